"""The tool registry: schemas, handler binding, lazy managers, unavailable stubs (SPEC §1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bareagent.core import tools
from bareagent.core.schema import tool_schema
from bareagent.core.tools import (
    BASE_TOOLS,
    DEFERRED_TOOLS,
    TOOL_HANDLERS,
    get_handlers,
    get_tools,
)

ALL = BASE_TOOLS | DEFERRED_TOOLS


def test_tool_sets_match_spec() -> None:
    assert {"bash", "read_file", "write_file", "edit_file", "glob", "grep"} == BASE_TOOLS
    assert {
        "todo_write", "todo_read", "subagent", "load_skill", "task_create", "task_list",
        "task_get", "task_update", "background_run", "team_spawn", "team_send", "team_list",
    } == DEFERRED_TOOLS  # fmt: skip


def test_get_tools_returns_all_18_schemas_as_fresh_copies() -> None:
    first = get_tools()
    assert len(first) == 18
    assert {s["name"] for s in first} == ALL
    for schema in first:
        assert set(schema) == {"name", "description", "parameters"}
        assert schema["parameters"]["type"] == "object"
        assert isinstance(schema["parameters"]["properties"], dict)
        assert set(schema["parameters"]["required"]) <= set(schema["parameters"]["properties"])
    first[0]["parameters"]["properties"].clear()
    assert get_tools()[0]["parameters"]["properties"]


def test_tool_schema_shape() -> None:
    props = {"x": {"type": "string"}}
    schema = tool_schema("t", "desc", props, ["x"])
    assert schema == {
        "name": "t",
        "description": "desc",
        "parameters": {"type": "object", "properties": props, "required": ["x"]},
    }
    props["y"] = {}
    assert "y" not in schema["parameters"]["properties"]


def test_module_registry_has_unbound_stubs() -> None:
    assert set(TOOL_HANDLERS) == ALL
    for name in BASE_TOOLS:
        with pytest.raises(RuntimeError, match="get_handlers"):
            TOOL_HANDLERS[name](file_path="x")
    assert TOOL_HANDLERS["background_run"](command="ls") == "Background manager unavailable."
    assert TOOL_HANDLERS["team_list"]() == []


def test_handlers_bound_to_workspace(tmp_path: Path) -> None:
    handlers = get_handlers(tmp_path)
    assert set(handlers) == ALL
    assert handlers["write_file"](file_path="a/b.txt", content="hello") == (
        "Wrote 5 characters to a/b.txt"
    )
    assert handlers["read_file"](file_path="a/b.txt") == "1: hello"
    assert handlers["glob"](pattern="*.txt") == ["a/b.txt"]
    assert handlers["grep"](pattern="hel+") == ["a/b.txt:1:hello"]
    assert handlers["edit_file"](file_path="a/b.txt", old_text="hello", new_text="bye") == (
        "Edited a/b.txt"
    )
    assert handlers["bash"](command="cat a/b.txt; echo; pwd").splitlines() == [
        "bye",
        str(tmp_path.resolve()),
    ]


def test_missing_runtime_pieces_degrade(tmp_path: Path) -> None:
    handlers = get_handlers(tmp_path)
    assert handlers["background_run"](command="sleep 1") == "Background manager unavailable."
    assert handlers["subagent"](task="x").startswith("Subagent unavailable")
    assert handlers["team_spawn"](name="bob").startswith("Team unavailable")
    assert handlers["team_send"](to_agent="bob", content="hi").startswith("Team unavailable")
    assert handlers["team_list"]() == []


def test_deferred_managers_are_created_lazily(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[str] = []
    real = tools._new_todo

    def counting() -> Any:
        created.append("todo")
        return real()

    monkeypatch.setattr(tools, "_new_todo", counting)
    handlers = get_handlers(tmp_path)
    assert created == []
    assert not (tmp_path / ".tasks.json").exists()
    assert handlers["todo_read"]() == "No TODO items."
    handlers["todo_write"](action="add", task="write tests")
    assert "write tests" in handlers["todo_read"]()
    assert created == ["todo"]
    task = handlers["task_create"](title="build")
    assert (tmp_path / ".tasks.json").exists()
    assert handlers["task_get"](task_id=task["id"])["title"] == "build"
    assert handlers["task_update"](task_id=task["id"], status="done")["status"] == "done"
    assert [t["id"] for t in handlers["task_list"](status="done")] == [task["id"]]
    with pytest.raises(ValueError, match="status or title is required"):
        handlers["task_update"](task_id=task["id"])
    assert "name:" in handlers["load_skill"](skill_name="git")


class Submitter:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float, str | None]] = []

    def submit(self, command: str, timeout: float = 30, task_id: str | None = None) -> str:
        self.calls.append((command, timeout, task_id))
        return task_id or "abc12345"


class Runner:
    def run(self, task: str, agent_type: str | None = None, run_in_background: bool = False) -> str:
        return f"ran {task} as {agent_type}"


def test_runtime_pieces_are_bound(tmp_path: Path) -> None:
    sub = Submitter()
    handlers = get_handlers(
        tmp_path,
        background_manager=sub,
        provider=object(),
        subagent_runner=Runner(),
        team_handlers={"team_list": lambda: [{"name": "bob"}]},
    )
    assert (
        handlers["background_run"](command="make", task_id="b1") == "Submitted background task b1"
    )
    assert sub.calls == [("make", 30, "b1")]
    assert handlers["subagent"](task="look", agent_type="explore") == "ran look as explore"
    assert handlers["team_list"]() == [{"name": "bob"}]


def test_subagent_depth_limit(tmp_path: Path) -> None:
    handlers = get_handlers(tmp_path, provider=object(), subagent_runner=Runner(), depth=3)
    assert handlers["subagent"](task="x") == (
        "Subagent refused: recursion depth 4 exceeds limit 3."
    )
    handlers = get_handlers(
        tmp_path, provider=object(), subagent_runner=Runner(), depth=1, max_depth=1
    )
    assert handlers["subagent"](task="x") == (
        "Subagent refused: recursion depth 2 exceeds limit 1."
    )


def test_allowed_tools_filter(tmp_path: Path) -> None:
    handlers = get_handlers(tmp_path, allowed_tools=["read_file", "grep"])
    assert set(handlers) == {"read_file", "grep"}


def test_workspace_must_exist(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        get_handlers(tmp_path / "missing")
