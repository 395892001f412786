"""One owner's process runtime: supervisor, job manager, subagent manager, notifications."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bareagent.config import Config
from bareagent.core.notifications import Notification
from bareagent.orchestrator.jobs import JobManager
from bareagent.orchestrator.spec import GuardLike
from bareagent.orchestrator.subagents import SubagentManager
from bareagent.orchestrator.supervisor import Supervisor
from bareagent.sandbox.policy import SandboxPolicy


class ProcessRuntime:
    """Wires the process model into a session (`build_session(background_manager=...,
    subagent_runner=..., notifications=runtime.drain_notifications)`).

    `tools` (a worker's allow-list) leaves out managers whose tool the session lacks.
    """

    def __init__(
        self,
        workspace: str | Path,
        config: Config,
        guard: GuardLike,
        *,
        owner: str = "main",
        depth: int = 0,
        tools: list[str] | None = None,
        supervisor: Supervisor | None = None,
        state_root: str | Path | None = None,
        detached_jobs: bool = False,
        start: bool = True,
    ) -> None:
        self._own_supervisor = supervisor is None
        self.supervisor = supervisor or Supervisor(workspace, state_root=state_root)
        if start:
            self.supervisor.start()
        self.jobs: JobManager | None = None
        self.subagents: SubagentManager | None = None
        if tools is None or "background_run" in tools:
            self.jobs = JobManager(
                workspace,
                owner=owner,
                max_concurrent=max(1, int(config.get("background", "max_concurrent"))),
                supervisor=self.supervisor,
                detached=detached_jobs,
                sandbox_policy=SandboxPolicy.from_config(
                    config, workspace=workspace, state_root=self.supervisor.state_root
                ),
            )
        if tools is None or "subagent" in tools:
            self.subagents = SubagentManager(
                workspace,
                config,
                guard,
                depth=depth,
                owner=owner,
                supervisor=self.supervisor,
                parent_tools=tools,
            )

    def drain_notifications(self) -> list[Notification]:
        """Finished jobs and background subagents of this owner, each exactly once."""
        notes: list[Notification] = []
        if self.jobs is not None:
            notes.extend(self.jobs.drain_notifications())
        if self.subagents is not None:
            notes.extend(self.subagents.drain_notifications())
        return notes

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop this owner's non-detached work and the supervisor it created."""
        if self.subagents is not None:
            self.subagents.shutdown(timeout)
        if self.jobs is not None:
            self.jobs.shutdown(timeout)
        if self._own_supervisor:
            self.supervisor.shutdown(timeout)

    def __enter__(self) -> ProcessRuntime:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
