"""Subagent worker: rebuilds provider, guard and session from its spec and runs the task.

LLM SDKs are imported lazily (by the provider factory) only here, never in job workers.
"""

from __future__ import annotations

import copy
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bareagent.orchestrator.results import ResultStore

if TYPE_CHECKING:
    from bareagent.config import Config
    from bareagent.orchestrator.spec import SpawnSpec
    from bareagent.worker.common import WorkerContext

log = logging.getLogger(__name__)


def subagents_store(state_root: str | Path) -> ResultStore:
    """The subagent result store of a state root."""
    return ResultStore(Path(state_root) / "subagents")


def child_config(spec: SpawnSpec) -> Config:
    """The child's config: the parent's settings, its provider, the type's turn limit."""
    from bareagent.config import Config, defaults

    data = defaults()
    for section, values in (spec.settings or {}).items():
        if section in data and isinstance(values, dict):
            data[section].update(copy.deepcopy(values))
    data["provider"].update(spec.provider_config or {})
    if spec.max_turns:
        data["agent"]["max_iterations"] = int(spec.max_turns)
    return Config(data=data, sources=("spawn spec",))


def run_task(spec: SpawnSpec) -> str:
    """Build the child's session from the spec alone and run the task to its final text."""
    from bareagent.core.prompts import subagent_system_prompt
    from bareagent.core.session import build_session
    from bareagent.orchestrator.runtime import ProcessRuntime
    from bareagent.permission import PermissionGuard
    from bareagent.planning.agent_types import resolve_agent_type

    config = child_config(spec)
    guard: Any = PermissionGuard.from_spec(spec.permission)
    guard.fail_closed = True  # no terminal in a worker: never wait for an answer
    atype = resolve_agent_type(spec.agent_type)
    workspace = Path(spec.workspace)
    runtime = ProcessRuntime(
        workspace,
        config,
        guard,
        owner=spec.worker_id,
        depth=spec.depth,
        tools=spec.tools,
        state_root=spec.state_root,
        start=False,  # the grandchild spawner helper is forked only when needed
    )
    try:
        session = build_session(
            workspace,
            config,
            guard=guard,
            allowed_tools=list(spec.tools) if spec.tools is not None else None,
            system_prompt=subagent_system_prompt(
                workspace, guard.mode.value, atype.name, atype.description
            ),
            depth=spec.depth,
            background_manager=runtime.jobs,
            subagent_runner=runtime.subagents,
            notifications=runtime.drain_notifications,
        )
        from bareagent.worker.common import tool_event_logger

        return session.run_turn(str(spec.payload["task"]), on_event=tool_event_logger(log))
    finally:
        runtime.shutdown()


def main(spec: SpawnSpec, ctx: WorkerContext) -> int:
    """Run the task; write the answer (or the error) into the durable result record."""
    store = subagents_store(spec.state_root)
    worker_id = spec.worker_id
    if store.start(worker_id, started_at=time.time(), pid=os.getpid()) is None:
        log.info("subagent %s was cancelled before it started", worker_id)
        return 0

    def owner_lost() -> None:
        store.finalize(worker_id, "killed", error="owner process exited before the answer")

    ctx.on_owner_lost.append(owner_lost)
    log.info("subagent %s (%s, depth %s) starts", worker_id, spec.agent_type, spec.depth)
    try:
        text = run_task(spec)
    except Exception as exc:
        log.exception("subagent %s failed", worker_id)
        store.finalize(worker_id, "failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    store.finalize(worker_id, "done", result=text)
    log.info("subagent %s answered (%d chars)", worker_id, len(text))
    return 0
