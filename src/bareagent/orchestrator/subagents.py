"""SubagentManager: each subagent is a worker process with a spec fixed by the parent.

A synchronous call blocks until the child process has exited and reads its answer from
the durable result record (`<state_root>/subagents/<id>.json`); a child that dies first
yields an error string, never a hang. A background call returns at once and reports
through `drain_notifications`, like jobs.

The child cannot ask the user anything (a worker has no terminal), so every subagent
guard is fail-closed: calls that would need confirmation are denied.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Any

from bareagent.config import Config
from bareagent.core.notifications import Notification
from bareagent.orchestrator.registry import new_worker_id
from bareagent.orchestrator.results import FINAL_STATUSES, ResultStore
from bareagent.orchestrator.spawner import SpawnError
from bareagent.orchestrator.spec import GuardLike, SpawnRefused, build_subagent_spec
from bareagent.orchestrator.supervisor import Supervisor

log = logging.getLogger(__name__)


class SubagentManager:
    """Implements the `SubagentRunner` protocol with worker processes."""

    def __init__(
        self,
        workspace: str | Path,
        config: Config,
        parent_guard: GuardLike,
        depth: int = 0,
        max_depth: int | None = None,
        owner: str = "main",
        *,
        supervisor: Supervisor | None = None,
        state_root: str | Path | None = None,
        parent_tools: list[str] | None = None,
        parent_id: str | None = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self.config = config
        self.parent_guard = parent_guard
        self.depth = depth
        self.max_depth = int(
            config.get("subagent", "max_depth") if max_depth is None else max_depth
        )
        self.owner = owner
        self._own_supervisor = supervisor is None
        self.supervisor = supervisor or Supervisor(self.workspace, state_root=state_root)
        self.state_root = self.supervisor.state_root
        self.parent_tools = parent_tools
        self.parent_id = parent_id or self.supervisor.parent_name
        self.store = ResultStore(self.state_root / "subagents")
        self._background: set[str] = set()

    def run(self, task: str, agent_type: str | None = None, run_in_background: bool = False) -> str:
        """Run a subagent to completion (its final text) or start it in the background."""
        worker_id = new_worker_id("subagent")
        try:
            spec = build_subagent_spec(
                task,
                agent_type=agent_type,
                workspace=self.workspace,
                state_root=self.state_root,
                worker_id=worker_id,
                parent_guard=self.parent_guard,
                depth=self.depth,
                max_depth=self.max_depth,
                provider_config=dict(self.config.provider),
                settings=copy.deepcopy(self.config.data),
                default_type=self.config.get("subagent", "default_type"),
                background=run_in_background,
                parent_tools=self.parent_tools,
                parent_id=self.parent_id,
                owner_create_time=self.supervisor.owner_create_time,
                session_id=self.supervisor.session_id,
            )
        except SpawnRefused as refused:
            return str(refused)
        self.store.create(
            {
                "id": worker_id,
                "task": task,
                "agent_type": spec.agent_type,
                "mode": spec.permission.get("mode"),
                "depth": spec.depth,
                "status": "queued",
                "owner": self.owner,
                "background": run_in_background,
                "created_at": time.time(),
                "started_at": None,
                "ended_at": None,
                "result": None,
                "error": None,
                "exit_code": None,
                "delivered": False,
            },
            lambda existing: f"subagent id {existing['id']} already exists",
        )
        try:
            self.supervisor.spawn(spec, extra={"agent_type": spec.agent_type, "depth": spec.depth})
        except SpawnError as exc:
            self.store.finalize(worker_id, "failed", error=f"could not start: {exc}")
            self.store.update(worker_id, delivered=not run_in_background)
            return f"Subagent {worker_id} failed: could not start: {exc}"
        if run_in_background:
            self._background.add(worker_id)
            return f"Subagent {worker_id} started in the background."
        return self._wait_answer(worker_id)

    def _wait_answer(self, worker_id: str) -> str:
        try:
            self.supervisor.wait(worker_id)
        except KeyboardInterrupt:
            self.store.finalize(worker_id, "killed", error="interrupted by the user")
            self.supervisor.kill(worker_id)
            self.supervisor.wait(worker_id, 5.0)
            raise
        record = self.store.update(worker_id, delivered=True) or {}
        if record.get("status") == "done":
            return str(record.get("result") or "")
        if record.get("status") not in FINAL_STATUSES:
            # Exit seen but nothing recorded (should not happen): never leave the caller waiting.
            return f"Subagent {worker_id} failed: exited without an answer."
        return f"Subagent {worker_id} failed: {record.get('error') or 'unknown error'}"

    def drain_notifications(self) -> list[Notification]:
        """Finished background subagents of this owner, each returned exactly once."""
        return [
            Notification(
                source_id=str(r["id"]),
                kind="subagent",
                status=str(r.get("status")),
                result=r.get("result"),
                error=r.get("error"),
            )
            for r in self.store.drain(self.owner, where=lambda r: bool(r.get("background")))
        ]

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop background subagents that are still running."""
        for worker_id in sorted(self._background):
            handle = self.supervisor.handle(worker_id)
            if handle is not None and not handle.exited.is_set():
                self.store.finalize(worker_id, "killed", error="owner shut down")
                self.supervisor.kill(worker_id)
                self.supervisor.wait(worker_id, timeout)
        if self._own_supervisor:
            self.supervisor.shutdown(timeout)

    def __enter__(self) -> SubagentManager:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
