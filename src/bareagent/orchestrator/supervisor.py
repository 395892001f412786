"""Owner-side supervision: spawn, wait, kill, and clean shutdown of one owner's workers."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bareagent.orchestrator.logsetup import (
    current_session_id,
    current_worker_id,
    find_session_handler,
    install_session_log,
    remove_session_log,
    worker_log_path,
)
from bareagent.orchestrator.reaping import record_exit
from bareagent.orchestrator.registry import Registry, WorkerRecord, process_matches, random_suffix
from bareagent.orchestrator.spawner import (
    Backend,
    ForkBackend,
    SpawnBackend,
    SpawnError,
    default_start_method,
)
from bareagent.orchestrator.spec import SpawnSpec
from bareagent.orchestrator.state import ensure_state_root

log = logging.getLogger(__name__)

ExitListener = Callable[[str, int | None], None]
_POLL_SECONDS = 0.05


@dataclass
class WorkerHandle:
    """The owner's view of one worker it spawned."""

    id: str
    kind: str
    detached: bool
    pid: int | None = None
    create_time: float | None = None
    exit_code: int | None = None
    exited: threading.Event = field(default_factory=threading.Event)
    backend: Any = None


class Supervisor:
    """Spawns and supervises the workers of one owner process for one workspace.

    Call `start()` early (before the owner starts threads of its own, where possible):
    with the fork start method it forks the spawner helper then.
    """

    def __init__(
        self,
        workspace: str | Path,
        *,
        state_root: str | Path | None = None,
        session_id: str | None = None,
        start_method: str | None = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self.state_root = Path(state_root) if state_root else ensure_state_root(self.workspace)
        for sub in ("workers", "jobs", "subagents", "logs"):
            (self.state_root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        # Inside a worker, nested workers log into the same session as their ancestors.
        self.session_id = session_id or current_session_id() or random_suffix(8)
        self.start_method = start_method or default_start_method()
        self.registry = Registry(self.state_root)
        self.owner_pid = os.getpid()
        self.owner_create_time = psutil.Process().create_time()
        self.parent_name = current_worker_id() or "main"
        self._handles: dict[str, WorkerHandle] = {}
        self._listeners: list[ExitListener] = []
        self._lock = threading.RLock()
        self._backend: Backend | None = None
        self._log_handler: logging.Handler | None = None
        self._closed = False

    # -- lifecycle

    @property
    def started(self) -> bool:
        """True once `start()` ran."""
        return self._backend is not None

    @property
    def backend(self) -> Backend | None:
        """The process-creation backend (None before `start()`)."""
        return self._backend

    @property
    def session_log(self) -> Path:
        """This session's aggregated log file."""
        return self.state_root / "logs" / f"session-{self.session_id}.log"

    def start(self) -> None:
        """Install the session log and the spawner backend (idempotent)."""
        with self._lock:
            if self._backend is not None:
                return
            if self._closed:
                raise SpawnError("supervisor is shut down")
            fork = self.start_method == "fork"
            if find_session_handler(self.session_id) is None and current_worker_id() is None:
                self._log_handler = install_session_log(
                    self.state_root, self.session_id, multiprocess=fork
                )
            backend: Backend
            if fork:
                backend = ForkBackend(self.state_root, self.session_id, self._on_exit)
            else:
                backend = SpawnBackend(self.state_root, self.session_id, self._on_exit)
            backend.start()
            self._backend = backend
            atexit.register(self.shutdown)
            log.info(
                "supervisor for %s started (session %s, %s)",
                self.workspace,
                self.session_id,
                self.start_method,
            )

    def shutdown(self, timeout: float = 5.0) -> None:
        """Kill non-detached workers, reap them, stop the backend, close the session log."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            backend = self._backend
            handles = list(self._handles.values())
        atexit.unregister(self.shutdown)
        if backend is not None:
            doomed = [h for h in handles if not h.detached and not h.exited.is_set()]
            for handle in doomed:
                self.kill(handle.id)
            deadline = time.monotonic() + timeout
            for handle in doomed:
                self.wait(handle.id, max(0.0, deadline - time.monotonic()))
            leave = any(h.detached and not h.exited.is_set() for h in handles)
            backend.stop(timeout, leave_running=leave)
        if self._log_handler is not None:
            remove_session_log(self._log_handler)
            self._log_handler = None

    def __enter__(self) -> Supervisor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- workers

    def add_exit_listener(self, listener: ExitListener) -> None:
        """`listener(worker_id, exit_code)` runs on a background thread; keep it short."""
        self._listeners.append(listener)

    def handle(self, worker_id: str) -> WorkerHandle | None:
        """A worker this supervisor spawned."""
        return self._handles.get(worker_id)

    def live_handles(self) -> list[WorkerHandle]:
        """Spawned workers that have not exited."""
        return [h for h in list(self._handles.values()) if not h.exited.is_set()]

    def spawn(self, spec: SpawnSpec, extra: dict[str, Any] | None = None) -> WorkerHandle:
        """Register, create and wait for a ready worker (SpawnError if it cannot start)."""
        self.start()
        backend = self._ensure_backend()
        record = WorkerRecord(
            id=spec.worker_id,
            kind=spec.kind,
            name=spec.name,
            pid=None,
            create_time=None,
            parent=spec.parent_id,
            owner_pid=self.owner_pid,
            owner_create_time=self.owner_create_time,
            cwd=spec.workspace,
            status="starting",
            started_at=time.time(),
            log_path=str(worker_log_path(self.state_root, spec.worker_id)),
            detached=spec.detached,
            extra={"session": self.session_id, "start_method": self.start_method, **(extra or {})},
        )
        self.registry.write(record)
        handle = WorkerHandle(spec.worker_id, spec.kind, spec.detached, backend=backend)
        with self._lock:
            self._handles[spec.worker_id] = handle
        try:
            pid = backend.spawn(spec)
        except SpawnError as exc:
            self.registry.update(
                spec.worker_id, status="failed", ended_at=time.time(), error=str(exc)
            )
            handle.exited.set()
            raise
        handle.pid = pid
        try:
            handle.create_time = psutil.Process(pid).create_time()
        except psutil.Error:
            handle.create_time = None
        self.registry.mark_running(spec.worker_id, pid, handle.create_time)
        log.info("spawned %s %s (pid %s)", spec.kind, spec.worker_id, pid)
        return handle

    def _ensure_backend(self) -> Backend:
        with self._lock:
            backend = self._backend
            assert backend is not None
            if not backend.alive and backend.method == "fork":
                log.warning("spawner helper is gone; starting a new one")
                backend = ForkBackend(self.state_root, self.session_id, self._on_exit)
                backend.start()
                self._backend = backend
            return backend

    def _on_exit(self, worker_id: str, exit_code: int | None) -> None:
        handle = self._handles.get(worker_id)
        if handle is not None:
            handle.exit_code = exit_code
            handle.exited.set()
        for listener in list(self._listeners):
            try:
                listener(worker_id, exit_code)
            except Exception as exc:
                log.warning("exit listener failed for %s: %s", worker_id, exc)

    def wait(self, worker_id: str, timeout: float | None = None) -> bool:
        """Wait until the worker has exited and been recorded; False on timeout."""
        handle = self._handles.get(worker_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if handle is not None and handle.exited.wait(_POLL_SECONDS * 4):
                return True
            if handle is None:
                record = self.registry.read(worker_id)
                if record is None or not process_matches(record.pid, record.create_time):
                    return True
                time.sleep(_POLL_SECONDS)
            elif self._reaper_missing(handle):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def _reaper_missing(self, handle: WorkerHandle) -> bool:
        """The helper died: detect the exit by pid and record it here instead."""
        backend = handle.backend
        if backend is not None and backend.alive:
            return False
        if process_matches(handle.pid, handle.create_time):
            return False
        record_exit(self.state_root, handle.kind, handle.id, None)
        self._on_exit(handle.id, None)
        return True

    def kill(self, worker_id: str) -> bool:
        """Kill a worker's whole process tree (any worker of this state root)."""
        record = self.registry.update(worker_id, kill_requested=True)
        handle = self._handles.get(worker_id)
        pid = handle.pid if handle is not None else (record.pid if record else None)
        ctime = (
            handle.create_time if handle is not None else (record.create_time if record else None)
        )
        if pid is None or not process_matches(pid, ctime):
            return False
        from bareagent.sandbox.process_tree import kill_process_tree

        log.info("killing worker %s (pid %s)", worker_id, pid)
        kill_process_tree(pid, grace=1.0)
        return True
