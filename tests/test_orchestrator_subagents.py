"""Subagents and background jobs driven by a scripted model (real SDKs, local server)."""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bareagent.config import load_config
from bareagent.core.loop import agent_loop
from bareagent.core.schema import tool_schema
from bareagent.orchestrator.jobs import JobManager
from bareagent.orchestrator.results import ResultStore
from bareagent.orchestrator.subagents import SubagentManager
from bareagent.orchestrator.supervisor import Supervisor
from bareagent.permission.modes import PermissionMode
from bareagent.provider import create_provider
from bareagent.testing import ScriptedLLMServer
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    supervisor,
    workspace,
)

pytestmark = pytest.mark.timeout(60)


def _provider_section(server: ScriptedLLMServer) -> dict[str, Any]:
    return {
        "name": "anthropic",
        "model": "scripted-model",
        "api_key": "test-key",
        "base_url": server.anthropic_base_url,
        "max_retries": 0,
        "timeout": 20.0,
    }


def _config(server: ScriptedLLMServer, workspace: Path, tmp_path: Path) -> Any:
    return load_config(
        workspace,
        overrides={"provider": _provider_section(server), "agent": {"stream": False}},
        user_file=tmp_path / "no-user-config.toml",
    )


def _tool_names(body: Any) -> list[str]:
    return [t["name"] for t in body.get("tools") or []]


def _manager(
    supervisor: Supervisor, config: Any, mode: PermissionMode = PermissionMode.DEFAULT, **kw: Any
) -> SubagentManager:
    from bareagent.permission import PermissionGuard

    return SubagentManager(
        supervisor.workspace, config, PermissionGuard(mode), supervisor=supervisor, **kw
    )


def test_background_job_result_is_injected_on_a_later_turn(
    supervisor: Supervisor, workspace: Path, tmp_path: Path, marker: str
) -> None:
    jobs = JobManager(workspace, owner="main", supervisor=supervisor)
    script = {
        "turns": [
            {
                "tool_calls": [
                    {
                        "name": "background_run",
                        "input": {"command": f"sleep 2; echo built # {marker}", "task_id": "build"},
                    }
                ]
            },
            {"tool_calls": [{"name": "check_docs", "input": {}}]},
            {"text": "The build finished: built."},
        ]
    }

    def check_docs() -> str:
        # Keeps the model busy on another tool while the build runs in its process.
        assert jobs.get("build")["status"] == "running"
        jobs.wait("build", 15)
        return "docs look fine"

    tools = [
        tool_schema(
            "background_run",
            "run in background",
            {"command": {"type": "string"}, "task_id": {"type": "string"}},
            ["command"],
        ),
        tool_schema("check_docs", "check docs", {}, []),
    ]
    handlers = {
        "background_run": lambda command, timeout=30, task_id=None: (
            f"Submitted background task {jobs.submit(command, timeout=timeout, task_id=task_id)}"
        ),
        "check_docs": check_docs,
    }
    with ScriptedLLMServer(script) as server:
        provider = create_provider(_provider_section(server))
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a test agent."},
            {"role": "user", "content": "Build the project and check the docs meanwhile."},
        ]
        final = agent_loop(
            messages, provider, tools, handlers, notifications=jobs.drain_notifications
        )
        bodies = [json.dumps(r.body) for r in server.requests]
    assert final == "The build finished: built."
    assert len(bodies) == 3
    assert "Submitted background task build" in bodies[1]
    assert "<background-notifications>" not in bodies[1]
    assert "<background-notifications>" in bodies[2]
    assert re.search(r"\[job build\] status=done\\nresult: built", bodies[2])
    assert jobs.drain_notifications() == []
    jobs.shutdown()


def test_explore_subagent_has_no_write_file(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    script = {
        "turns": [
            {
                "when": {"system_contains": "explore subagent"},
                "tool_calls": [
                    {"name": "write_file", "input": {"file_path": "x.txt", "content": "hi"}}
                ],
            },
            {"when": {"system_contains": "explore subagent"}, "text": "I could not write."},
        ]
    }
    with ScriptedLLMServer(script) as server:
        manager = _manager(supervisor, _config(server, workspace, tmp_path), PermissionMode.BYPASS)
        answer = manager.run("Look around and write x.txt", agent_type="explore")
        requests = [r.body for r in server.requests]
    assert answer == "I could not write."
    assert not (workspace / "x.txt").exists()
    assert len(requests) == 2
    first_tools = _tool_names(requests[0])
    assert "read_file" in first_tools and "write_file" not in first_tools
    assert "bash" not in first_tools and "subagent" not in first_tools
    assert "Unknown tool: write_file" in json.dumps(requests[1])
    record = ResultStore(supervisor.state_root / "subagents").list()[0]
    assert record["agent_type"] == "explore" and record["status"] == "done" and record["delivered"]


def test_sync_general_purpose_subagent_returns_final_text(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "notes.txt").write_text("the answer is 42\n")
    script = {
        "turns": [
            {
                "when": {"system_contains": "general-purpose subagent"},
                "tool_calls": [{"name": "read_file", "input": {"file_path": "notes.txt"}}],
            },
            {"when": {"last_user_contains": "the answer is 42"}, "text": "Found it: 42."},
        ]
    }
    with ScriptedLLMServer(script) as server:
        manager = _manager(supervisor, _config(server, workspace, tmp_path))
        answer = manager.run("What is the answer in notes.txt?")
        bodies = [r.body for r in server.requests]
    assert answer == "Found it: 42."
    assert "What is the answer in notes.txt?" in json.dumps(bodies[0]["messages"])
    assert len(bodies[0]["messages"]) == 1  # a fresh history: just the task
    workers = supervisor.registry.list(include_finished=True)
    assert [(w.kind, w.status, w.extra.get("depth")) for w in workers] == [
        ("subagent", "exited", 1)
    ]


def test_subagent_that_crashes_gives_an_error_not_a_hang(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    script = {
        "turns": [
            {
                "when": {"system_contains": "general-purpose subagent"},
                "tool_calls": [{"name": "bash", "input": {"command": "kill -9 $PPID; sleep 5"}}],
            }
        ]
    }
    with ScriptedLLMServer(script) as server:
        manager = _manager(supervisor, _config(server, workspace, tmp_path), PermissionMode.BYPASS)
        answer = manager.run("crash please")
    assert re.fullmatch(
        r"Subagent sub-[a-z0-9]{8} failed: exited with code -9 before answering\.", answer
    )


def test_background_subagent_reports_through_notifications(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    script = {
        "turns": [{"when": {"system_contains": "plan subagent"}, "text": "Plan: do A then B."}]
    }
    with ScriptedLLMServer(script) as server:
        manager = _manager(supervisor, _config(server, workspace, tmp_path))
        started = manager.run("Plan the work", agent_type="plan", run_in_background=True)
        match = re.fullmatch(r"Subagent (sub-[a-z0-9]{8}) started in the background\.", started)
        assert match
        assert supervisor.wait(match.group(1), 20)
    notes = manager.drain_notifications()
    assert [(n.source_id, n.kind, n.status, n.result) for n in notes] == [
        (match.group(1), "subagent", "done", "Plan: do A then B.")
    ]
    assert manager.drain_notifications() == []


def test_depth_limit_refuses_without_a_process(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    with ScriptedLLMServer({"turns": []}) as server:
        manager = _manager(supervisor, _config(server, workspace, tmp_path), depth=3, max_depth=3)
        assert manager.run("too deep") == "Subagent refused: recursion depth 4 exceeds limit 3."
    assert supervisor.registry.list(include_finished=True) == []


def test_nested_subagent_within_depth(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    # BYPASS: a worker cannot ask the user, so in other modes the child's `subagent` call
    # (which needs confirmation) is denied.
    script = {
        "turns": [
            {
                "when": {
                    "system_contains": "general-purpose subagent",
                    "last_user_contains": "outer task",
                },
                "tool_calls": [
                    {"name": "subagent", "input": {"task": "inner task", "agent_type": "explore"}}
                ],
            },
            {"when": {"system_contains": "explore subagent"}, "text": "inner done"},
            {"when": {"last_user_contains": "inner done"}, "text": "outer done: inner done"},
        ]
    }
    with ScriptedLLMServer(script) as server:
        manager = _manager(supervisor, _config(server, workspace, tmp_path), PermissionMode.BYPASS)
        answer = manager.run("outer task")
    assert answer == "outer done: inner done"
    workers = {
        w.kind + str(w.extra.get("depth")): w
        for w in supervisor.registry.list(include_finished=True)
    }
    assert set(workers) == {"subagent1", "subagent2"}
    assert workers["subagent2"].parent == workers["subagent1"].id


def test_sync_subagent_is_fail_closed(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    """No terminal in a worker: a call that needs confirmation is denied, not hung."""
    script = {
        "turns": [
            {
                "when": {"system_contains": "general-purpose subagent"},
                "tool_calls": [
                    {"name": "write_file", "input": {"file_path": "y.txt", "content": "y"}}
                ],
            },
            {"when": {"last_user_contains": "User denied."}, "text": "Writing was denied."},
        ]
    }
    with ScriptedLLMServer(script) as server:
        manager = _manager(supervisor, _config(server, workspace, tmp_path), PermissionMode.DEFAULT)
        answer = manager.run("write y.txt")
        second = json.dumps(server.requests[1].body)
    assert answer == "Writing was denied."
    assert "User denied." in second
    assert not (workspace / "y.txt").exists()
