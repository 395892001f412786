"""`bareagent top`: a live table of the workspace's workers, busiest first.

On a terminal it redraws in the alternate screen (rich `Live`) and quits on `q` or
Ctrl-C; keys are read in cbreak mode (POSIX termios/tty; msvcrt on Windows, untested) and
the terminal settings are restored on every way out. When stdout is not a terminal it
prints a plain-text frame every interval instead (`--once`: one frame).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from bareagent.cli.common import CLIError
from bareagent.cli.ops_view import (
    PRIME_SECONDS,
    Sampler,
    WorkerRow,
    ps_plain,
    ps_table,
    read_records,
    sort_by_cpu,
    totals,
)

MIN_INTERVAL = 0.1
QUIT_KEYS = frozenset("qQ")


def check_interval(value: float) -> float:
    """A finite refresh interval of at least MIN_INTERVAL seconds."""
    if not math.isfinite(value) or value < MIN_INTERVAL:
        raise CLIError(f"--interval must be at least {MIN_INTERVAL} seconds, got {value}")
    return value


class Frames:
    """Successive samples of the same workers (CPU % is measured between frames)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.sampler = Sampler()
        self._first = True

    def next(self) -> list[WorkerRow]:
        """The current rows, busiest first."""
        prime = PRIME_SECONDS if self._first else 0.0
        self._first = False
        records = read_records(self.workspace, include_finished=False)
        return sort_by_cpu(self.sampler.rows(records, prime=prime))


def _header(workspace: Path, rows: list[WorkerRow]) -> str:
    clock = datetime.now().strftime("%H:%M:%S")
    return f"bareagent top - {workspace} - {clock} - {totals(rows).describe()}"


def plain_frame(workspace: Path, rows: list[WorkerRow]) -> str:
    """One frame for pipes and files."""
    return f"{_header(workspace, rows)}\n{ps_plain(rows)}\n"


def rich_frame(workspace: Path, rows: list[WorkerRow], interval: float) -> Group:
    """One frame for the terminal."""
    head = Text(_header(workspace, rows), style="bold")
    foot = Text(f"refresh {interval:g}s - q or Ctrl-C to quit", style="dim")
    body: Any = ps_table(rows) if rows else Text("No workers running.", style="dim")
    return Group(head, body, foot)


class KeyReader:
    """Single key presses from the terminal without echo, or nothing when there is none."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stdin
        self.fd: int | None = None
        self._saved: Any = None

    def __enter__(self) -> KeyReader:
        try:
            if os.name == "posix" and self.stream.isatty():
                import termios
                import tty

                fd = self.stream.fileno()
                self._saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)  # ISIG stays on: Ctrl-C still raises KeyboardInterrupt
                self.fd = fd
        except (OSError, ValueError, AttributeError):
            self.fd = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None and self._saved is not None:
            import termios

            with contextlib.suppress(OSError):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
        self.fd = None

    def wait(self, timeout: float) -> str:
        """Keys typed within `timeout` seconds (returns early on the first key)."""
        if self.fd is not None:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if ready:
                return os.read(self.fd, 64).decode("utf-8", "ignore")
            return ""
        if os.name == "nt" and _is_console(self.stream):
            return _wait_msvcrt(timeout)
        time.sleep(timeout)
        return ""


def _is_console(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError, AttributeError):
        return False


def _wait_msvcrt(timeout: float) -> str:  # pragma: no cover - Windows only, untested
    import msvcrt

    deadline = time.monotonic() + timeout
    keys = ""
    while time.monotonic() < deadline:
        while msvcrt.kbhit():  # type: ignore[attr-defined,unused-ignore]
            keys += msvcrt.getwch()  # type: ignore[attr-defined,unused-ignore]
        if keys:
            return keys
        time.sleep(0.05)
    return keys


@contextlib.contextmanager
def _term_as_interrupt() -> Iterator[None]:
    """SIGTERM leaves like Ctrl-C, so the terminal settings are restored either way."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_top(
    workspace: Path,
    *,
    interval: float,
    once: bool = False,
    iterations: int | None = None,
    console: Console | None = None,
) -> int:
    """Show frames until `q`, Ctrl-C, `iterations` frames, or one frame with `once`."""
    interval = check_interval(interval)
    frames = Frames(workspace)
    out = sys.stdout
    tty = out.isatty()
    if once:
        iterations = 1
    try:
        with _term_as_interrupt():
            if not tty:
                return _run_plain(workspace, frames, interval, iterations)
            console = console or Console()
            if iterations == 1:
                console.print(rich_frame(workspace, frames.next(), interval))
                return 0
            return _run_live(workspace, frames, interval, iterations, console)
    except KeyboardInterrupt:
        return 0


def _run_plain(workspace: Path, frames: Frames, interval: float, iterations: int | None) -> int:
    shown = 0
    while True:
        sys.stdout.write(plain_frame(workspace, frames.next()))
        sys.stdout.flush()
        shown += 1
        if iterations is not None and shown >= iterations:
            return 0
        sys.stdout.write("\n")
        time.sleep(interval)


def _run_live(
    workspace: Path, frames: Frames, interval: float, iterations: int | None, console: Console
) -> int:
    shown = 1
    with (
        KeyReader() as keys,
        Live(
            rich_frame(workspace, frames.next(), interval),
            console=console,
            screen=True,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        ) as live,
    ):
        live.refresh()
        while iterations is None or shown < iterations:
            deadline = time.monotonic() + interval
            while (left := deadline - time.monotonic()) > 0:
                if QUIT_KEYS & set(keys.wait(left)):
                    return 0
            live.update(rich_frame(workspace, frames.next(), interval), refresh=True)
            shown += 1
    return 0
