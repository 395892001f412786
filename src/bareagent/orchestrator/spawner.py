"""Process creation, owner side: the fork backend (via the helper) and the spawn backend.

Both create a worker, block until it reports ready, and call `on_exit(worker_id, code)`
once the worker has been reaped and its exit recorded.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import multiprocessing.process
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol

from bareagent.orchestrator.helper import SPAWN_READY_TIMEOUT, helper_main
from bareagent.orchestrator.reaping import describe_exit, record_exit
from bareagent.orchestrator.spec import SpawnSpec
from bareagent.worker.common import worker_entry

log = logging.getLogger(__name__)

START_METHOD_ENV = "BAREAGENT_START_METHOD"
START_METHODS = ("fork", "spawn")

ExitCallback = Callable[[str, int | None], None]


class SpawnError(RuntimeError):
    """A worker could not be started; `str()` is one line for the user."""


def default_start_method() -> str:
    """`$BAREAGENT_START_METHOD`, else fork on Linux and spawn elsewhere."""
    chosen = os.environ.get(START_METHOD_ENV, "").strip().lower()
    if chosen:
        if chosen not in START_METHODS:
            raise ValueError(f"{START_METHOD_ENV} must be fork or spawn, not {chosen!r}")
        return chosen
    return "fork" if sys.platform.startswith("linux") else "spawn"


def forget_child(process: BaseProcess) -> None:
    """Stop multiprocessing from joining `process` at interpreter exit.

    Used when a helper or worker must outlive this process (detached workers): the
    atexit hook of multiprocessing would otherwise block until it exits.
    """
    children = getattr(multiprocessing.process, "_children", None)
    if isinstance(children, set):
        children.discard(process)


class Backend(Protocol):
    """What the supervisor needs from a way of creating processes."""

    method: str

    @property
    def alive(self) -> bool:
        """False when exits can no longer be reported (the helper died)."""
        ...

    def start(self) -> None:
        """Prepare (fork the helper, start the reaper thread)."""
        ...

    def spawn(self, spec: SpawnSpec) -> int:
        """Create a worker, wait until it is ready, return its pid (SpawnError)."""
        ...

    def stop(self, timeout: float, leave_running: bool) -> None:
        """Stop reaping; with `leave_running`, detached workers may outlive this process."""
        ...


class ForkBackend:
    """Forks workers through the single-threaded helper process (Linux)."""

    method = "fork"

    def __init__(self, state_root: Path, session_id: str, on_exit: ExitCallback) -> None:
        self.state_root = state_root
        self.session_id = session_id
        self.on_exit = on_exit
        self._helper: BaseProcess | None = None
        self._conn: Connection | None = None
        self._reader: threading.Thread | None = None
        self._send_lock = threading.Lock()
        self._pending: dict[int, Future[int]] = {}
        self._ids = itertools.count(1)
        self._alive = False

    @property
    def alive(self) -> bool:
        """The helper is running and reporting."""
        return self._alive

    @property
    def helper_pid(self) -> int | None:
        """Pid of the helper process."""
        return self._helper.pid if self._helper is not None else None

    def start(self) -> None:
        """Fork the helper; call this before the owner starts other threads if possible."""
        ctx = multiprocessing.get_context("fork")
        conn, child_conn = ctx.Pipe(duplex=True)
        helper = ctx.Process(
            target=helper_main,
            args=(child_conn, conn, str(self.state_root), self.session_id),
            name=f"bareagent-spawner-{self.session_id}",
            daemon=False,
        )
        helper.start()
        child_conn.close()
        self._helper, self._conn, self._alive = helper, conn, True
        self._reader = threading.Thread(
            target=self._read_loop, name=f"spawner-reader-{self.session_id}", daemon=True
        )
        self._reader.start()

    def spawn(self, spec: SpawnSpec) -> int:
        """Ask the helper to fork a worker; returns once the worker is ready."""
        if not self._alive or self._conn is None:
            raise SpawnError("spawner helper is not running")
        request_id = next(self._ids)
        future: Future[int] = Future()
        self._pending[request_id] = future
        try:
            with self._send_lock:
                self._conn.send(("spawn", request_id, spec.to_dict()))
            return future.result(timeout=SPAWN_READY_TIMEOUT + 10)
        except FutureTimeout:
            raise SpawnError(f"worker {spec.worker_id} did not become ready in time") from None
        except (OSError, ValueError) as exc:
            raise SpawnError(f"cannot reach the spawner helper: {exc}") from None
        finally:
            self._pending.pop(request_id, None)

    def _read_loop(self) -> None:
        conn = self._conn
        assert conn is not None
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            op = message[0]
            if op == "spawned":
                self._resolve(message[1], result=int(message[2]))
            elif op == "error":
                self._resolve(message[1], error=SpawnError(str(message[2])))
            elif op == "exited":
                self.on_exit(str(message[1]), message[2])
        self._alive = False
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(SpawnError("spawner helper exited"))

    def _resolve(self, request_id: int, result: int = 0, error: Exception | None = None) -> None:
        future = self._pending.get(request_id)
        if future is None or future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def stop(self, timeout: float, leave_running: bool) -> None:
        """Tell the helper to finish; it exits once no (non-detached) worker is left."""
        helper, conn = self._helper, self._conn
        if helper is None or conn is None:
            return
        try:
            with self._send_lock:
                conn.send(("stop",))
        except (OSError, ValueError):
            pass
        # With detached workers alive the helper stays by design: no point waiting long.
        _wait_exit(helper, min(timeout, 0.2) if leave_running else timeout)
        if helper.exitcode is None:
            if leave_running:
                log.info("spawner helper %s stays for detached workers", helper.pid)
                forget_child(helper)
            else:
                log.warning("spawner helper %s did not stop; killing it", helper.pid)
                helper.kill()
                helper.join(2.0)
        if helper.exitcode is not None:
            if self._reader is not None:
                self._reader.join(2.0)
            conn.close()
        self._alive = False


def _wait_exit(process: BaseProcess, timeout: float) -> None:
    """Wait up to `timeout` s for `process` to exit, never longer.

    Not `join(timeout)`: the helper re-points its inherited descriptors, including its
    end of multiprocessing's sentinel pipe, so the sentinel reads as ready at once and
    `join` falls through to a blocking waitpid (which would hang the owner for as long
    as the helper stays for detached workers). `exitcode` polls with WNOHANG.
    """
    deadline = time.monotonic() + timeout
    while process.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.02)


@dataclass
class _SpawnedChild:
    process: BaseProcess
    kind: str
    detached: bool


class SpawnBackend:
    """Starts each worker as a fresh interpreter (`spawn`); a thread reaps them."""

    method = "spawn"

    def __init__(self, state_root: Path, session_id: str, on_exit: ExitCallback) -> None:
        self.state_root = state_root
        self.session_id = session_id
        self.on_exit = on_exit
        self._children: dict[str, _SpawnedChild] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        """The reaper thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the reaper thread."""
        self._thread = threading.Thread(
            target=self._reap_loop, name=f"spawn-reaper-{self.session_id}", daemon=True
        )
        self._thread.start()

    def spawn(self, spec: SpawnSpec) -> int:
        """Start a fresh interpreter running the worker; returns once it is ready."""
        ctx = multiprocessing.get_context("spawn")
        reader, writer = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=worker_entry,
            args=(spec.to_dict(), writer, False),
            name=f"bareagent-{spec.worker_id}",
            daemon=False,
        )
        try:
            process.start()
        except OSError as exc:
            raise SpawnError(f"cannot start worker {spec.worker_id}: {exc}") from None
        finally:
            writer.close()
        message: Any = None
        try:
            if reader.poll(SPAWN_READY_TIMEOUT):
                message = reader.recv()
        except (EOFError, OSError):
            message = None
        finally:
            reader.close()
        with self._lock:
            self._children[spec.worker_id] = _SpawnedChild(process, spec.kind, spec.detached)
        self._wake.set()
        if isinstance(message, tuple) and message and message[0] == "ready":
            assert process.pid is not None
            return process.pid
        if process.exitcode is None:
            process.kill()
        process.join(2.0)
        raise SpawnError(
            f"worker {spec.worker_id} {describe_exit(process.exitcode)} before it was ready"
        )

    def _reap_loop(self) -> None:
        while not self._stopping:
            with self._lock:
                sentinels = {c.process.sentinel: wid for wid, c in self._children.items()}
            if not sentinels:
                self._wake.wait(0.2)
                self._wake.clear()
                continue
            for sentinel in wait(list(sentinels), timeout=0.2):
                if isinstance(sentinel, int):
                    self._finish(sentinels[sentinel])

    def _finish(self, worker_id: str) -> None:
        with self._lock:
            child = self._children.get(worker_id)
        if child is None:
            return
        child.process.join(1.0)
        code = child.process.exitcode
        if code is None:
            return
        with self._lock:
            self._children.pop(worker_id, None)
        try:
            record_exit(self.state_root, child.kind, worker_id, code)
        except Exception as exc:
            log.warning("could not record exit of %s: %s", worker_id, exc)
        self.on_exit(worker_id, code)

    def stop(self, timeout: float, leave_running: bool) -> None:
        """Stop reaping; detached workers still running are left to run on."""
        with self._lock:
            remaining = list(self._children.values())
        for child in remaining:
            child.process.join(timeout if not child.detached else 0)
            if child.process.exitcode is None and child.detached and leave_running:
                forget_child(child.process)
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(2.0)
