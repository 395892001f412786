"""Spawn specs: everything a worker is allowed to be, decided before its process exists."""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from bareagent.orchestrator.registry import KINDS
from bareagent.permission.modes import PermissionMode
from bareagent.planning.agent_types import AgentType, resolve_agent_type

_JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class SpawnRefused(ValueError):
    """The orchestrator refuses to create this worker; `str()` is the user-facing reason."""


class GuardLike(Protocol):
    """What the orchestrator needs from a permission guard."""

    mode: PermissionMode
    fail_closed: bool

    def to_spec(self) -> dict[str, Any]:
        """A JSON-able description that `from_spec` turns back into a guard."""
        ...

    def for_subagent(self, agent_type: Any, *, background: bool = False) -> Any:
        """The guard of a child, never less strict than this one."""
        ...


@dataclass
class SpawnSpec:
    """The complete, JSON-able description of one worker; the worker builds itself from it."""

    kind: str
    name: str
    workspace: str
    worker_id: str
    state_root: str
    depth: int = 0
    permission: dict[str, Any] = field(default_factory=dict)
    fail_closed: bool = True
    tools: list[str] | None = None
    agent_type: str | None = None
    provider_config: dict[str, Any] | None = None
    settings: dict[str, dict[str, Any]] | None = None
    parent_id: str = "main"
    owner_pid: int = 0
    owner_create_time: float | None = None
    session_id: str = ""
    detached: bool = False
    max_turns: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-able)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpawnSpec:
        """Rebuild and validate; unknown keys are an error, not silently dropped."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown spawn spec keys: {', '.join(unknown)}")
        spec = cls(**data)
        spec.validate()
        return spec

    def validate(self) -> None:
        """Check the shape; ValueError names the bad field."""
        if self.kind not in KINDS:
            raise ValueError(
                f"spawn spec kind must be one of {', '.join(KINDS)}, not {self.kind!r}"
            )
        if not Path(self.workspace).is_absolute() or not Path(self.workspace).is_dir():
            raise ValueError(
                f"spawn spec workspace is not an existing absolute dir: {self.workspace}"
            )
        if not self.worker_id or not _JOB_ID_RE.match(self.worker_id):
            raise ValueError(f"spawn spec worker_id is not a safe id: {self.worker_id!r}")
        if not isinstance(self.depth, int) or self.depth < 0:
            raise ValueError("spawn spec depth must be a non-negative integer")
        if self.tools is not None and not all(isinstance(t, str) for t in self.tools):
            raise ValueError("spawn spec tools must be a list of tool names")
        if self.kind == "job":
            check_command(self.payload.get("command"))
            check_timeout(self.payload.get("timeout"))
            if self.payload.get("sandbox") is not None:
                from bareagent.sandbox.policy import SandboxPolicy

                SandboxPolicy.from_dict(self.payload["sandbox"])
        if self.kind == "subagent" and not str(self.payload.get("task") or "").strip():
            raise ValueError("spawn spec of a subagent needs a non-empty task")


def check_command(command: Any) -> str:
    """A job command: a non-empty string."""
    if not isinstance(command, str) or not command.strip():
        raise ValueError("command must be a non-empty string")
    return command


def check_timeout(timeout: Any) -> float:
    """A job timeout: a positive, finite number of seconds."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ValueError(f"timeout must be a number of seconds, got {timeout!r}")
    if not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def check_job_id(task_id: Any) -> str:
    """A caller-chosen job id: letters, digits, `_ . -`, at most 64, no leading dot."""
    if not isinstance(task_id, str) or not _JOB_ID_RE.match(task_id):
        raise ValueError(
            f"invalid task_id {task_id!r}: use 1-64 letters, digits, '_', '.' or '-' "
            "starting with a letter or digit"
        )
    return task_id


def all_tool_names() -> list[str]:
    """Every tool name, in schema order."""
    from bareagent.core.tool_schemas import BASE_TOOL_SCHEMAS, DEFERRED_TOOL_SCHEMAS

    return [str(s["name"]) for s in BASE_TOOL_SCHEMAS + DEFERRED_TOOL_SCHEMAS]


def check_depth(child_depth: int, max_depth: int) -> None:
    """Refuse a child deeper than the limit with the exact user-facing message."""
    if child_depth > max_depth:
        raise SpawnRefused(
            f"Subagent refused: recursion depth {child_depth} exceeds limit {max_depth}."
        )


def child_guard(parent: GuardLike, agent_type: AgentType, *, background: bool) -> Any:
    """The child's guard: `for_subagent`, then clamped so it is never looser than required.

    Every subagent is fail-closed: a worker has no terminal to ask the user on.
    """
    child = parent.for_subagent(agent_type, background=background)
    required = PermissionMode.parse(parent.mode)
    if agent_type.mode is not None:
        required = PermissionMode.stricter(required, agent_type.mode)
    child.mode = PermissionMode.stricter(PermissionMode.parse(child.mode), required)
    child.fail_closed = True
    return child


def build_subagent_spec(
    task: str,
    *,
    agent_type: str | None,
    workspace: str | Path,
    state_root: str | Path,
    worker_id: str,
    parent_guard: GuardLike,
    depth: int,
    max_depth: int,
    provider_config: dict[str, Any],
    settings: dict[str, dict[str, Any]] | None = None,
    default_type: str | None = None,
    background: bool = False,
    parent_tools: list[str] | None = None,
    parent_id: str = "main",
    owner_create_time: float | None = None,
    session_id: str = "",
) -> SpawnSpec:
    """Validate and compute a subagent's spec; SpawnRefused for depth over the limit."""
    child_depth = depth + 1
    check_depth(child_depth, max_depth)
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must not be empty")
    atype = resolve_agent_type(agent_type, default_type)
    guard = child_guard(parent_guard, atype, background=background)
    base = parent_tools if parent_tools is not None else all_tool_names()
    spec = SpawnSpec(
        kind="subagent",
        name=atype.name,
        workspace=str(Path(workspace).resolve()),
        worker_id=worker_id,
        state_root=str(state_root),
        depth=child_depth,
        permission=dict(guard.to_spec()),
        fail_closed=True,
        tools=atype.filter_tools(list(base)),
        agent_type=atype.name,
        provider_config=dict(provider_config),
        settings=settings,
        parent_id=parent_id,
        owner_pid=os.getpid(),
        owner_create_time=owner_create_time,
        session_id=session_id,
        detached=False,
        max_turns=atype.max_turns,
        payload={"task": task, "background": background},
    )
    spec.validate()
    return spec


def build_job_spec(
    command: str,
    *,
    timeout: float,
    job_id: str,
    workspace: str | Path,
    state_root: str | Path,
    parent_id: str = "main",
    detached: bool = False,
    owner_create_time: float | None = None,
    session_id: str = "",
    permission: dict[str, Any] | None = None,
    sandbox: dict[str, Any] | None = None,
) -> SpawnSpec:
    """Validate and compute a background job's spec (no model, no tools, fail-closed).

    `sandbox` is a `SandboxPolicy.to_dict()`; the job's command runs under it.
    """
    payload: dict[str, Any] = {"command": check_command(command), "timeout": check_timeout(timeout)}
    if sandbox is not None:
        payload["sandbox"] = dict(sandbox)
    spec = SpawnSpec(
        kind="job",
        name=job_id,
        workspace=str(Path(workspace).resolve()),
        worker_id=check_job_id(job_id),
        state_root=str(state_root),
        permission=dict(permission or {}),
        fail_closed=True,
        tools=[],
        parent_id=parent_id,
        owner_pid=os.getpid(),
        owner_create_time=owner_create_time,
        session_id=session_id,
        detached=detached,
        payload=payload,
    )
    spec.validate()
    return spec
