"""Worker process setup: session, cwd, signals, fds, stdio, logging, owner watch.

`worker_entry` is the target of every worker process. It makes the process safe to run
agent code in, then tells the spawner it is ready, then hands over to
`bareagent.worker.<kind>.main(spec, ctx)`.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bareagent.orchestrator.logsetup import (
    configure_worker_logging,
    find_session_handler,
    flush_session_log,
    queue_fds,
    set_identity,
    worker_log_path,
)
from bareagent.orchestrator.registry import process_matches
from bareagent.orchestrator.spec import SpawnSpec

log = logging.getLogger(__name__)

EXIT_OWNER_LOST = 75
OWNER_POLL_SECONDS = 0.5
# Signals whose owner-side handling (or ignoring) must not leak into a worker.
_RESET_SIGNALS = ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD")


class ReadyChannel(Protocol):
    """The write end a worker reports readiness on (a multiprocessing Connection)."""

    def send(self, obj: Any) -> None:
        """Send one picklable object."""
        ...

    def fileno(self) -> int:
        """The underlying descriptor."""
        ...

    def close(self) -> None:
        """Close the channel."""
        ...


@dataclass
class WorkerContext:
    """What a worker's `main` gets besides its spec."""

    spec: SpawnSpec
    log_path: Path
    on_owner_lost: list[Callable[[], None]] = field(default_factory=list)
    watch: OwnerWatch | None = None


class OwnerWatch(threading.Thread):
    """Polls the owner process (pid + create_time); calls `on_lost` once when it is gone."""

    def __init__(
        self,
        pid: int,
        create_time: float | None,
        on_lost: Callable[[], None],
        interval: float = OWNER_POLL_SECONDS,
    ) -> None:
        super().__init__(name="owner-watch", daemon=True)
        self.pid = pid
        self.create_time = create_time
        self.on_lost = on_lost
        self.interval = interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        """Check at once, then every `interval` seconds."""
        while True:
            if not process_matches(self.pid, self.create_time):
                self.on_lost()
                return
            if self._stop_event.wait(self.interval):
                return

    def stop(self) -> None:
        """Stop watching (the worker is finishing on its own)."""
        self._stop_event.set()


def kill_own_children() -> None:
    """Kill the process tree below this process (not this process itself)."""
    import psutil

    from bareagent.sandbox.process_tree import kill_process_tree

    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        try:
            kill_process_tree(child.pid, grace=1.0)
        except Exception as exc:  # keep going: the others must still die
            log.warning("could not kill child %s: %s", child.pid, exc)


def _owner_lost(ctx: WorkerContext) -> None:
    log.warning("owner process %s is gone; worker %s stops", ctx.spec.owner_pid, ctx.spec.worker_id)
    for hook in ctx.on_owner_lost:
        try:
            hook()
        except Exception as exc:
            log.warning("owner-lost hook failed: %s", exc)
    kill_own_children()
    _flush_stdio()
    flush_session_log(ctx.spec.session_id)
    os._exit(EXIT_OWNER_LOST)


def reset_signals() -> None:
    """Default dispositions, empty mask, no inherited wakeup fd (POSIX)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    for name in _RESET_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is not None:
            signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def new_session() -> None:
    """Own session and process group, so terminal signals to the owner do not reach us."""
    if hasattr(os, "setsid"):
        with contextlib.suppress(OSError):  # already a session leader
            os.setsid()


def neutralize_inherited_fds(keep: set[int]) -> None:
    """Point every inherited descriptor >= 3 that is not in `keep` at /dev/null.

    Closing them outright is unsafe after fork: Python objects inherited from the owner
    still hold the numbers and would later close whatever file reused them. Re-pointing
    releases the owner's sockets and pipes (so EOFs and ports behave) without that risk.
    """
    for fd_dir in ("/proc/self/fd", "/dev/fd"):
        try:
            fds = [int(name) for name in os.listdir(fd_dir)]
            break
        except (OSError, ValueError):
            continue
    else:
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in fds:
            if fd < 3 or fd == null or fd in keep:
                continue
            try:
                os.fstat(fd)
            except OSError:
                continue
            os.dup2(null, fd, inheritable=False)
    finally:
        os.close(null)


def redirect_stdio(log_path: Path) -> io.TextIOWrapper:
    """stdin from /dev/null; stdout and stderr appended to the worker's log file."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(null)
        os.close(fd)
    # New stream objects: the inherited ones may hold buffers or locks of the owner.
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115
    stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115
    sys.stdout, sys.stderr = stdout, stderr
    return stderr


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def prepare_process(spec: SpawnSpec, ready: ReadyChannel | None, *, forked: bool) -> WorkerContext:
    """Everything before agent code: identity, session, signals, cwd, stdio, fds, logging."""
    set_identity(spec.worker_id, spec.session_id)
    new_session()
    reset_signals()
    log_path = worker_log_path(Path(spec.state_root), spec.worker_id)
    stream = redirect_stdio(log_path)  # first, so a failure below lands in the worker's log
    os.chdir(spec.workspace)
    # A detached worker outlives its owner, who reads the session log queue; it logs
    # into its own file only.
    use_session = forked and not spec.detached
    session_handler = find_session_handler(spec.session_id) if use_session else None
    if forked:
        keep = queue_fds(session_handler)
        if ready is not None:
            keep.add(ready.fileno())
        neutralize_inherited_fds(keep)
    configure_worker_logging(spec.session_id, stream, keep_session=use_session)
    ctx = WorkerContext(spec=spec, log_path=log_path)
    if not spec.detached and spec.owner_pid:
        ctx.watch = OwnerWatch(spec.owner_pid, spec.owner_create_time, lambda: _owner_lost(ctx))
        ctx.watch.start()
    return ctx


def worker_entry(spec_data: dict[str, Any], ready: ReadyChannel | None, forked: bool) -> None:
    """Process target: prepare, report ready, run `bareagent.worker.<kind>.main`."""
    spec = SpawnSpec.from_dict(spec_data)
    ctx = prepare_process(spec, ready, forked=forked)
    if ready is not None:
        ready.send(("ready", os.getpid()))
        ready.close()
    log.info("worker %s (%s %s) ready in %s", spec.worker_id, spec.kind, spec.name, spec.workspace)
    module = importlib.import_module(f"bareagent.worker.{spec.kind}")
    code = 1
    try:
        code = int(module.main(spec, ctx))
    finally:
        if ctx.watch is not None:
            ctx.watch.stop()
        log.info("worker %s finished with exit code %s", spec.worker_id, code)
        _flush_stdio()
    sys.exit(code)


def tool_event_logger(logger: logging.Logger) -> Callable[[str, dict[str, Any]], None]:
    """An agent-loop event sink that logs each tool call, and failed results, to `logger`."""

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "tool_call":
            call = data["call"]
            args = json.dumps(call.input, ensure_ascii=False)
            logger.info("tool %s %s", call.name, args if len(args) <= 200 else args[:199] + "…")
        elif kind == "tool_result" and data.get("is_error"):
            logger.info("tool %s -> error: %s", data["call"].name, str(data["content"])[:200])

    return on_event
