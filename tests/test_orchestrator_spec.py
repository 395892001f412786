"""Spawn specs: validated before any process exists (depth, permission, tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bareagent.orchestrator.spec import (
    SpawnRefused,
    SpawnSpec,
    build_job_spec,
    build_subagent_spec,
)
from bareagent.permission import PermissionGuard, PermissionMode
from bareagent.planning.agent_types import AgentType


def _spec(guard: Any, tmp_path: Path, **kw: Any) -> SpawnSpec:
    values: dict[str, Any] = {
        "agent_type": None,
        "workspace": tmp_path,
        "state_root": tmp_path / "state",
        "worker_id": "sub-test0001",
        "parent_guard": guard,
        "depth": 0,
        "max_depth": 3,
        "provider_config": {"name": "anthropic", "model": "m"},
    }
    values.update(kw)
    return build_subagent_spec("do it", **values)


def _child_guard(spec: SpawnSpec) -> PermissionGuard:
    return PermissionGuard.from_spec(spec.permission)


def test_depth_over_limit_is_refused_with_exact_message(tmp_path: Path) -> None:
    guard = PermissionGuard(PermissionMode.DEFAULT)
    assert _spec(guard, tmp_path, depth=2).depth == 3
    with pytest.raises(SpawnRefused) as refused:
        _spec(guard, tmp_path, depth=3)
    assert str(refused.value) == "Subagent refused: recursion depth 4 exceeds limit 3."
    with pytest.raises(SpawnRefused) as refused:
        _spec(guard, tmp_path, depth=0, max_depth=0)
    assert str(refused.value) == "Subagent refused: recursion depth 1 exceeds limit 0."


@pytest.mark.parametrize("background", [False, True])
def test_auto_parent_never_gets_a_bypass_child(tmp_path: Path, background: bool) -> None:
    guard = PermissionGuard(PermissionMode.AUTO)
    spec = _spec(guard, tmp_path, agent_type="general-purpose", background=background)
    child = _child_guard(spec)
    assert child.mode == PermissionMode.AUTO
    assert child.fail_closed and spec.fail_closed


class _LooseGuard:
    """A guard whose for_subagent is buggy: it would hand out BYPASS."""

    def __init__(self, mode: PermissionMode) -> None:
        self.mode = mode
        self.fail_closed = False

    def for_subagent(self, agent_type: Any, *, background: bool = False) -> _LooseGuard:
        return _LooseGuard(PermissionMode.BYPASS)

    def to_spec(self) -> dict[str, Any]:
        return {"mode": self.mode.value, "fail_closed": self.fail_closed}


def test_orchestrator_clamps_a_looser_child_guard(tmp_path: Path) -> None:
    spec = _spec(_LooseGuard(PermissionMode.AUTO), tmp_path)
    assert spec.permission == {"mode": "auto", "fail_closed": True}
    spec = _spec(_LooseGuard(PermissionMode.AUTO), tmp_path, agent_type="explore")
    assert spec.permission["mode"] == "plan"


@pytest.mark.parametrize("parent", list(PermissionMode))
@pytest.mark.parametrize("agent_type", ["explore", "plan", "code-review"])
def test_plan_type_child_is_plan_and_fail_closed(
    tmp_path: Path, parent: PermissionMode, agent_type: str
) -> None:
    spec = _spec(PermissionGuard(parent), tmp_path, agent_type=agent_type)
    child = _child_guard(spec)
    assert child.mode == PermissionMode.PLAN
    assert child.fail_closed
    assert spec.max_turns == 50 and spec.agent_type == agent_type


def test_child_is_never_less_strict_than_parent(tmp_path: Path) -> None:
    for parent in PermissionMode:
        for agent_type in ("general-purpose", "explore"):
            spec = _spec(PermissionGuard(parent), tmp_path, agent_type=agent_type)
            assert _child_guard(spec).mode.strictness >= parent.strictness


def test_rules_are_inherited(tmp_path: Path) -> None:
    guard = PermissionGuard(
        PermissionMode.DEFAULT, allow_rules=["bash(prefix:make*)"], deny_rules=["bash(prefix:rm*)"]
    )
    child = _child_guard(_spec(guard, tmp_path))
    assert child.requires_confirm("bash", {"command": "rm -x foo"})
    assert not child.requires_confirm("bash", {"command": "make test"})


def test_tools_are_filtered_by_type(tmp_path: Path) -> None:
    guard = PermissionGuard(PermissionMode.DEFAULT)
    explore = _spec(guard, tmp_path, agent_type="explore").tools or []
    assert "read_file" in explore and "grep" in explore
    for denied in ("write_file", "edit_file", "bash", "subagent"):
        assert denied not in explore
    general = _spec(guard, tmp_path, agent_type="general-purpose").tools or []
    assert "subagent" in general and "write_file" in general and len(general) == 18
    # A child never gets a tool its parent lacks.
    narrowed = _spec(guard, tmp_path, parent_tools=["read_file", "bash"]).tools
    assert narrowed == ["read_file", "bash"]
    # Unknown type -> configured default -> general-purpose.
    assert _spec(guard, tmp_path, agent_type="nope", default_type="explore").agent_type == "explore"
    assert _spec(guard, tmp_path, agent_type="nope").agent_type == "general-purpose"


def test_filter_matches_agent_type_semantics() -> None:
    atype = AgentType(
        "x",
        5,
        False,
        None,
        "d",
        allowed_tools=frozenset({"a", "b", "subagent"}),
        denied_tools=frozenset({"b"}),
    )
    assert atype.filter_tools(["a", "b", "c", "subagent"]) == ["a"]


def test_spec_is_json_roundtrip_and_strict(tmp_path: Path) -> None:
    spec = _spec(PermissionGuard(PermissionMode.DEFAULT), tmp_path, background=True)
    data = json.loads(json.dumps(spec.to_dict()))
    assert SpawnSpec.from_dict(data) == spec
    assert spec.payload == {"task": "do it", "background": True}
    assert isinstance(spec.provider_config, dict)
    with pytest.raises(ValueError, match="unknown spawn spec keys: client"):
        SpawnSpec.from_dict({**data, "client": "x"})
    with pytest.raises(ValueError, match="kind"):
        SpawnSpec.from_dict({**data, "kind": "daemon"})


def test_job_spec_is_fail_closed_and_validated(tmp_path: Path) -> None:
    spec = build_job_spec(
        "make", timeout=5, job_id="b1", workspace=tmp_path, state_root=tmp_path / "s"
    )
    assert spec.kind == "job" and spec.fail_closed and spec.tools == []
    assert spec.payload == {"command": "make", "timeout": 5.0}
    with pytest.raises(ValueError, match="timeout"):
        build_job_spec("make", timeout=0, job_id="b1", workspace=tmp_path, state_root=tmp_path)
    with pytest.raises(ValueError, match="task_id"):
        build_job_spec("make", timeout=1, job_id="../b", workspace=tmp_path, state_root=tmp_path)
    with pytest.raises(ValueError, match="workspace"):
        build_job_spec(
            "make", timeout=1, job_id="b", workspace=tmp_path / "missing", state_root=tmp_path
        )
