"""Session and worker logging: every line names the worker id and pid.

With the `fork` start method the owner wraps its session log file handler in a
`multiprocessing_logging.MultiProcessingHandler`; forked workers inherit its queue, so
their records are written by the owner into `logs/session-<id>.log`. Each worker also
logs into its own `logs/<worker-id>.log` (together with its stdout/stderr), which is the
only log with the `spawn` start method.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import IO, Any

LOGGER_NAME = "bareagent"
LOG_FORMAT = "%(asctime)s [%(worker_id)s pid=%(process)d] %(levelname)s %(name)s: %(message)s"
_SESSION_ATTR = "_bareagent_session"

_identity: dict[str, str | None] = {"worker": None, "session": None}


def set_identity(worker_id: str | None, session_id: str | None) -> None:
    """Name this process in log lines (called first thing in a worker)."""
    _identity["worker"] = worker_id
    _identity["session"] = session_id


def current_worker_id() -> str | None:
    """The worker id of this process, or None in an owner."""
    return _identity["worker"]


def current_session_id() -> str | None:
    """The session a worker belongs to, or None in an owner."""
    return _identity["session"]


class _StampFilter(logging.Filter):
    """Adds `worker_id`; runs in the emitting process, so workers stamp their own id.

    A worker only feeds the session log of its own session (an owner process may run
    several supervisors, e.g. in tests).
    """

    def __init__(self, session_id: str | None = None) -> None:
        super().__init__()
        self.session_id = session_id

    def filter(self, record: logging.LogRecord) -> bool:
        mine = _identity["session"]
        if self.session_id is not None and mine is not None and mine != self.session_id:
            return False
        if not hasattr(record, "worker_id"):
            record.worker_id = _identity["worker"] or "main"
        return True


def session_log_path(state_root: Path, session_id: str) -> Path:
    """`<state_root>/logs/session-<id>.log`."""
    return state_root / "logs" / f"session-{session_id}.log"


def worker_log_path(state_root: Path, worker_id: str) -> Path:
    """`<state_root>/logs/<worker-id>.log`."""
    return state_root / "logs" / f"{worker_id}.log"


def find_session_handler(session_id: str) -> logging.Handler | None:
    """The session handler already installed in this process (inherited by a fork)."""
    for handler in logging.getLogger(LOGGER_NAME).handlers:
        if getattr(handler, _SESSION_ATTR, None) == session_id:
            return handler
    return None


def install_session_log(
    state_root: Path, session_id: str, *, multiprocess: bool
) -> logging.Handler:
    """Attach the session log to the `bareagent` logger; wrapped for forked workers."""
    path = session_log_path(state_root, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    file_handler = logging.FileHandler(path, encoding="utf-8", delay=False)
    file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
    file_handler.addFilter(_StampFilter(session_id))
    handler: logging.Handler = file_handler
    if multiprocess:
        try:
            from multiprocessing_logging import MultiProcessingHandler

            handler = MultiProcessingHandler(
                f"bareagent-log-{session_id}", sub_handler=file_handler
            )
        except ImportError:  # optional outside Linux; the file handler still works
            handler = file_handler
    setattr(handler, _SESSION_ATTR, session_id)
    logging.getLogger(LOGGER_NAME).addHandler(handler)
    return handler


def remove_session_log(handler: logging.Handler) -> None:
    """Detach and close a handler from `install_session_log` (owner side only)."""
    logging.getLogger(LOGGER_NAME).removeHandler(handler)
    handler.close()


def flush_session_log(session_id: str | None) -> None:
    """In a worker about to `os._exit`: push buffered records to the owner first.

    Records sit in the queue's feeder-thread buffer; lost, they would also leave the
    owner's receiver waiting for them when it closes.
    """
    handler = find_session_handler(session_id) if session_id else None
    queue: Any = getattr(handler, "queue", None)
    if queue is None:
        return
    try:
        queue.close()
        queue.join_thread()
    except (OSError, ValueError, AssertionError):
        pass


def queue_fds(handler: logging.Handler | None) -> set[int]:
    """File descriptors a forked worker needs to keep for the session log queue.

    Only the write end: were workers to hold read ends too, a queue whose owner is gone
    would fill up and block their exit instead of failing fast with EPIPE.
    """
    queue: Any = getattr(handler, "queue", None)
    fds: set[int] = set()
    for name in ("_writer",):
        conn = getattr(queue, name, None)
        if conn is None:
            continue
        with contextlib.suppress(AttributeError, OSError, ValueError):
            fds.add(int(conn.fileno()))
    return fds


def configure_worker_logging(session_id: str, stream: IO[str], *, keep_session: bool) -> None:
    """Replace inherited handlers: own log stream, plus the session log when forked."""
    bare = logging.getLogger(LOGGER_NAME)
    session = find_session_handler(session_id) if keep_session else None
    # Handlers inherited through fork belong to the owner; they must not be closed here.
    for handler in list(bare.handlers):
        bare.removeHandler(handler)
    if session is not None:
        bare.addHandler(session)
    local = logging.StreamHandler(stream)
    local.setFormatter(logging.Formatter(LOG_FORMAT))
    local.addFilter(_StampFilter())
    bare.addHandler(local)
    bare.setLevel(logging.INFO)
    bare.propagate = False
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    fallback = logging.StreamHandler(stream)
    fallback.setLevel(logging.WARNING)
    root.addHandler(fallback)
