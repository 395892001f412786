"""JobManager: background jobs as worker processes, with a queue and durable results.

Queueing: at most `max_concurrent` jobs of this manager run at once. `submit` starts a
job at once when a slot is free; otherwise the job is recorded as `queued` and a small
dispatcher thread starts it when an exit event (from the reaper) frees a slot.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from bareagent.core.notifications import Notification
from bareagent.orchestrator.registry import new_job_id, process_matches
from bareagent.orchestrator.results import FINAL_STATUSES, PENDING_STATUSES, Record, ResultStore
from bareagent.orchestrator.spawner import SpawnError
from bareagent.orchestrator.spec import build_job_spec, check_command, check_job_id, check_timeout
from bareagent.orchestrator.supervisor import Supervisor
from bareagent.sandbox.policy import SandboxPolicy

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENT = 4


class JobManager:
    """Runs `background_run` commands in job worker processes for one owner."""

    def __init__(
        self,
        workspace: str | Path,
        state_root: str | Path | None = None,
        owner: str = "main",
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        *,
        supervisor: Supervisor | None = None,
        detached: bool = False,
        parent_id: str | None = None,
        sandbox_policy: SandboxPolicy | None = None,
    ) -> None:
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
            raise ValueError("max_concurrent must be an integer")
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        if not owner or not isinstance(owner, str):
            raise ValueError("owner must be a non-empty name")
        self.workspace = Path(workspace).resolve()
        self._own_supervisor = supervisor is None
        self.supervisor = supervisor or Supervisor(self.workspace, state_root=state_root)
        self.state_root = self.supervisor.state_root
        self.owner = owner
        self.max_concurrent = max_concurrent
        self.detached = detached
        self.parent_id = parent_id or self.supervisor.parent_name
        self.store = ResultStore(self.state_root / "jobs")
        # Jobs run their command under exactly the bash tool's policy (None: `process`).
        self.sandbox_policy = (sandbox_policy or SandboxPolicy()).for_workspace(
            self.workspace, state_root=self.state_root
        )
        self._queue: deque[str] = deque()
        self._running: set[str] = set()
        self._cond = threading.Condition()
        self._stopped = False
        self._dispatcher: threading.Thread | None = None
        self.supervisor.add_exit_listener(self._on_exit)
        self._recover()

    # -- the BackgroundSubmitter protocol

    def submit(self, command: str, timeout: float = 30, task_id: str | None = None) -> str:
        """Start (or queue) a job; returns its id. ValueError for bad input or a duplicate id."""
        if self._stopped:
            raise RuntimeError("job manager is shut down")
        check_command(command)
        timeout = check_timeout(timeout)
        job_id = new_job_id() if task_id is None else check_job_id(task_id)
        now = time.time()
        record: Record = {
            "id": job_id,
            "command": command,
            "timeout": timeout,
            "status": "queued",
            "owner": self.owner,
            "owner_pid": self.supervisor.owner_pid,
            "owner_create_time": self.supervisor.owner_create_time,
            "detached": self.detached,
            "created_at": now,
            "started_at": None,
            "ended_at": None,
            "result": None,
            "error": None,
            "exit_code": None,
            "delivered": False,
        }
        self.store.create(record, self._conflict)
        with self._cond:
            self._queue.append(job_id)
        log.info("job %s submitted: %r", job_id, command)
        self._start_ready()
        self._ensure_dispatcher()
        return job_id

    def _conflict(self, existing: Record) -> str | None:
        job_id, status = existing["id"], existing.get("status")
        if status in PENDING_STATUSES and self._is_pending_alive(existing):
            return (
                f"background task {job_id!r} is already {status}; "
                "wait for it, cancel it, or choose another task_id"
            )
        if status in FINAL_STATUSES and not existing.get("delivered"):
            return (
                f"background task {job_id!r} finished but its result was not delivered yet; "
                "choose another task_id"
            )
        return None

    def _is_pending_alive(self, record: Record) -> bool:
        if record.get("status") == "queued":
            return process_matches(record.get("owner_pid"), record.get("owner_create_time"))
        worker = self.supervisor.registry.get(str(record["id"]))
        return worker is not None and worker.is_live_status

    # -- starting jobs

    def _ensure_dispatcher(self) -> None:
        with self._cond:
            if self._dispatcher is None or not self._dispatcher.is_alive():
                self._dispatcher = threading.Thread(
                    target=self._dispatch_loop, name=f"job-dispatcher-{self.owner}", daemon=True
                )
                self._dispatcher.start()

    def _dispatch_loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: (
                        self._stopped
                        or bool(self._queue and len(self._running) < self.max_concurrent)
                    ),
                    timeout=1.0,
                )
                if self._stopped:
                    return
            self._start_ready()

    def _start_ready(self) -> None:
        while True:
            with self._cond:
                if self._stopped or not self._queue or len(self._running) >= self.max_concurrent:
                    return
                job_id = self._queue.popleft()
                self._running.add(job_id)
            self._start(job_id)

    def _start(self, job_id: str) -> None:
        record = self.store.read(job_id)
        if record is None or record.get("status") != "queued":
            self._release(job_id)
            return
        try:
            spec = build_job_spec(
                record["command"],
                timeout=record["timeout"],
                job_id=job_id,
                workspace=self.workspace,
                state_root=self.state_root,
                parent_id=self.parent_id,
                detached=self.detached,
                owner_create_time=self.supervisor.owner_create_time,
                session_id=self.supervisor.session_id,
                sandbox=self.sandbox_policy.to_dict(),
            )
            handle = self.supervisor.spawn(spec, extra={"command": record["command"]})
        except (SpawnError, ValueError, OSError) as exc:
            log.warning("job %s could not start: %s", job_id, exc)
            self.store.finalize(job_id, "failed", error=f"could not start job worker: {exc}")
            self._release(job_id)
            return
        self.store.start(job_id, started_at=time.time(), pid=handle.pid)
        if handle.exited.is_set():
            self._release(job_id)

    def _release(self, job_id: str) -> None:
        with self._cond:
            self._running.discard(job_id)
            self._cond.notify_all()

    def _on_exit(self, worker_id: str, exit_code: int | None) -> None:
        if worker_id in self._running:
            self._release(worker_id)

    # -- queries

    def list(self) -> list[Record]:
        """Every job of this workspace (all owners), oldest first."""
        return self.store.list()

    def get(self, job_id: str) -> Record:
        """One job record; ValueError for an unknown id."""
        record = self.store.read(job_id)
        if record is None:
            raise ValueError(f"unknown background task {job_id!r}")
        return record

    def running_ids(self) -> builtins.list[str]:
        """Jobs of this manager currently holding a slot."""
        with self._cond:
            return sorted(self._running)

    def queued_ids(self) -> builtins.list[str]:
        """Jobs of this manager waiting for a slot, in order."""
        with self._cond:
            return list(self._queue)

    def wait(self, job_id: str, timeout: float | None = None) -> Record:
        """Block until the job is final and its worker reaped; TimeoutError otherwise."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.get(job_id)
            if record.get("status") in FINAL_STATUSES:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                self.supervisor.wait(job_id, remaining)
                return record
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"background task {job_id!r} is still {record.get('status')}")
            time.sleep(0.05)

    # -- control

    def cancel(self, job_id: str) -> bool:
        """Kill a queued or running job (whole tree) → `killed`; False if already final."""
        record = self.get(job_id)
        with self._cond:
            if job_id in self._queue:
                self._queue.remove(job_id)
                self.store.finalize(job_id, "killed", error="cancelled before it started")
                return True
        if record.get("status") in FINAL_STATUSES:
            return False
        # Final status first: the worker's own "done/failed" write then becomes a no-op.
        self.store.finalize(job_id, "killed", error="cancelled")
        self.supervisor.kill(job_id)
        self.supervisor.wait(job_id, 5.0)
        return True

    def drain_notifications(self) -> builtins.list[Notification]:
        """Finished jobs of this owner not delivered yet; each is returned exactly once."""
        return [
            Notification(
                source_id=str(r["id"]),
                kind="job",
                status=str(r.get("status")),
                result=r.get("result"),
                error=r.get("error"),
            )
            for r in self.store.drain(self.owner)
        ]

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the dispatcher, drop queued jobs, kill non-detached running ones, reap."""
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            queued = list(self._queue)
            self._queue.clear()
            running = sorted(self._running)
            self._cond.notify_all()
        for job_id in queued:
            self.store.finalize(job_id, "killed", error="owner shut down before it started")
        if not self.detached:
            for job_id in running:
                self.store.finalize(job_id, "killed", error="owner shut down")
                self.supervisor.kill(job_id)
            deadline = time.monotonic() + timeout
            for job_id in running:
                self.supervisor.wait(job_id, max(0.0, deadline - time.monotonic()))
        if self._dispatcher is not None:
            self._dispatcher.join(2.0)
        if self._own_supervisor:
            self.supervisor.shutdown(timeout)

    def _recover(self) -> None:
        """Settle records of this owner left pending by a previous owner process."""
        for record in self.store.list():
            if record.get("owner") != self.owner or record.get("status") not in PENDING_STATUSES:
                continue
            if self._is_pending_alive(record):
                continue
            job_id = str(record["id"])
            if record.get("status") == "queued":
                self.store.finalize(job_id, "killed", error="owner exited before it started")
            else:
                self.store.finalize(
                    job_id, "failed", error="job worker lost (its exit was not recorded)"
                )

    def __enter__(self) -> JobManager:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
