"""What keeps the demo self-contained: its own environment, and an orderly unwind on signals."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from bareagent.orchestrator.state import HOME_ENV

LOCAL_HOSTS = ("127.0.0.1", "localhost")
_NO_PROXY_VARS = ("NO_PROXY", "no_proxy")


def _with_local_hosts(value: str | None) -> str:
    entries = [e.strip() for e in (value or "").split(",") if e.strip()]
    return ",".join([*entries, *(h for h in LOCAL_HOSTS if h not in entries)])


@contextlib.contextmanager
def demo_environment(state_home: Path) -> Iterator[None]:
    """The demo's own state root, and no proxy for 127.0.0.1; restored afterwards.

    Workers inherit both. Without the proxy exemption an `HTTP_PROXY` in the user's
    environment would carry the SDK's requests for the local scripted server off the
    machine (or fail on them).
    """
    names = (HOME_ENV, *_NO_PROXY_VARS)
    saved = {name: os.environ.get(name) for name in names}
    os.environ[HOME_ENV] = str(state_home)
    for name in _NO_PROXY_VARS:
        os.environ[name] = _with_local_hosts(saved[name])
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class DemoInterrupted(KeyboardInterrupt):
    """A signal (Ctrl-C, SIGTERM, SIGHUP) stops the demo: unwind and clean up."""


class SignalGuard:
    """SIGINT/SIGTERM/SIGHUP during the demo: the first one unwinds it, later ones wait.

    The signal numbers are kept in `received`: the agent loop re-raises an interrupt
    that lands in a tool call as a plain KeyboardInterrupt, so the exception cannot
    carry the number. Once the cleanup has begun (`cleaning`) signals are only noted:
    cutting the cleanup short is what would leave processes behind.
    """

    NAMES = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self, on_hangup: Callable[[], None]) -> None:
        self.received: list[int] = []
        self.cleaning = False
        self._on_hangup = on_hangup
        self._previous: dict[int, Any] = {}

    @property
    def exit_status(self) -> int | None:
        """128 + the first signal's number, as a shell reports it; None without one."""
        return 128 + self.received[0] if self.received else None

    def install(self) -> None:
        """Take over the signals (only the main thread may)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for name in self.NAMES:
            signum = getattr(signal, name, None)
            if signum is not None:
                self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        """Give the signals back to whoever had them."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        if signum == getattr(signal, "SIGHUP", None):
            self._on_hangup()  # the terminal is gone: stop writing to it
        if self.cleaning or len(self.received) > 1:
            return
        raise DemoInterrupted(signum)
