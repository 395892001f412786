"""TaskManager: persisted task list, validation, claiming and corrupt-file handling."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from bareagent.planning import tasks as tasks_mod
from bareagent.planning.tasks import (
    TaskClaimConflict,
    TaskManager,
    TaskStoreError,
    find_cycle,
)

KEYS = {"id", "title", "description", "status", "depends_on", "created_at", "updated_at"}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / ".tasks.json"


@pytest.fixture
def tm(store: Path) -> TaskManager:
    return TaskManager(store)


def _task(tid: str, status: str = "pending", deps: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": tid,
        "title": f"title {tid}",
        "description": "",
        "status": status,
        "depends_on": deps or [],
        "created_at": "2024-01-01T00:00:00+00:00",
        "updated_at": "2024-01-01T00:00:00+00:00",
    }


def _write(store: Path, tasks: list[dict[str, Any]], **extra: Any) -> None:
    store.write_text(json.dumps({"version": 1, "tasks": tasks, **extra}), encoding="utf-8")


# -- create -------------------------------------------------------------------------------


def test_create_returns_full_dict_and_persists(tm: TaskManager, store: Path) -> None:
    before = datetime.now(UTC)
    task = tm.create("  Write parser ", description="use tree-sitter")
    after = datetime.now(UTC)
    assert set(task) == KEYS
    assert task["id"] == "task-1"
    assert task["title"] == "Write parser"
    assert task["description"] == "use tree-sitter"
    assert task["status"] == "pending"
    assert task["depends_on"] == []
    created = datetime.fromisoformat(task["created_at"])
    assert created.utcoffset() == timedelta(0)
    assert before <= created <= after
    assert task["updated_at"] == task["created_at"]

    on_disk = json.loads(store.read_text(encoding="utf-8"))
    assert on_disk["tasks"] == [task]
    # A second manager (another process in real life) sees the same data.
    assert TaskManager(store).get("task-1") == task


def test_ids_are_sequential_and_continue_from_stored_max(tm: TaskManager, store: Path) -> None:
    assert [tm.create(f"t{n}")["id"] for n in range(3)] == ["task-1", "task-2", "task-3"]
    _write(store, [_task("task-7"), _task("custom-id"), _task("task-2")])
    assert tm.create("next")["id"] == "task-8"


def test_missing_file_is_empty_store(tm: TaskManager, store: Path) -> None:
    assert tm.list() == []
    assert tm.ready_tasks() == []
    assert not store.exists()


def test_empty_file_is_empty_store(tm: TaskManager, store: Path) -> None:
    store.write_text("  \n", encoding="utf-8")
    assert tm.list() == []
    assert tm.create("x")["id"] == "task-1"


@pytest.mark.parametrize("title", ["", "   ", "\n\t"])
def test_create_rejects_blank_title(tm: TaskManager, store: Path, title: str) -> None:
    with pytest.raises(ValueError, match=r"^title must not be empty$"):
        tm.create(title)
    assert not store.exists()


def test_create_rejects_non_string_title(tm: TaskManager) -> None:
    with pytest.raises(ValueError, match="title must be a string"):
        tm.create(123)  # type: ignore[arg-type]


def test_create_rejects_unknown_dependency(tm: TaskManager) -> None:
    tm.create("a")
    with pytest.raises(ValueError, match=r"^Unknown dependency task id 'task-9'$"):
        tm.create("b", depends_on=["task-1", "task-9"])
    assert [t["id"] for t in tm.list()] == ["task-1"]


def test_create_rejects_self_reference_to_future_id(tm: TaskManager) -> None:
    with pytest.raises(ValueError, match="Unknown dependency task id 'task-1'"):
        tm.create("a", depends_on=["task-1"])


@pytest.mark.parametrize("dep", ["", "   "])
def test_create_rejects_blank_dependency(tm: TaskManager, dep: str) -> None:
    tm.create("a")
    with pytest.raises(ValueError, match="dependency ids must not be blank"):
        tm.create("b", depends_on=["task-1", dep])


@pytest.mark.parametrize("deps", ["task-1", 5, [1]])
def test_create_rejects_malformed_depends_on(tm: TaskManager, deps: Any) -> None:
    tm.create("a")
    with pytest.raises(ValueError, match=r"depends_on must be a list|must be strings"):
        tm.create("b", depends_on=deps)


def test_duplicate_dependencies_are_deduplicated_in_order(tm: TaskManager) -> None:
    for n in range(3):
        tm.create(f"t{n}")
    task = tm.create("d", depends_on=["task-3", "task-1", "task-3", " task-1 ", "task-2"])
    assert task["depends_on"] == ["task-3", "task-1", "task-2"]
    assert tm.get(task["id"])["depends_on"] == ["task-3", "task-1", "task-2"]


def test_create_none_description_and_deps(tm: TaskManager) -> None:
    task = tm.create("x", description=None, depends_on=None)  # type: ignore[arg-type]
    assert task["description"] == ""
    assert task["depends_on"] == []


# -- list / get -----------------------------------------------------------------------------


def test_list_filters_by_status_and_validates(tm: TaskManager) -> None:
    for n in range(4):
        tm.create(f"t{n}")
    tm.update("task-2", status="done")
    tm.update("task-4", status="failed")
    assert [t["id"] for t in tm.list()] == ["task-1", "task-2", "task-3", "task-4"]
    assert [t["id"] for t in tm.list("pending")] == ["task-1", "task-3"]
    assert [t["id"] for t in tm.list(status="done")] == ["task-2"]
    assert [t["id"] for t in tm.list("failed")] == ["task-4"]
    assert tm.list("in_progress") == []
    with pytest.raises(ValueError, match=r"Invalid task status 'open'; expected one of: pending"):
        tm.list("open")


def test_get_unknown_and_returns_copy(tm: TaskManager) -> None:
    tm.create("x")
    with pytest.raises(ValueError, match=r"^Unknown task id 'task-2'$"):
        tm.get("task-2")
    got = tm.get("task-1")
    got["title"] = "mutated"
    got["depends_on"].append("zzz")
    assert tm.get("task-1")["title"] == "x"
    assert tm.get("task-1")["depends_on"] == []


# -- update ---------------------------------------------------------------------------------


def test_update_requires_status_or_title(tm: TaskManager) -> None:
    tm.create("x")
    with pytest.raises(ValueError, match=r"^status or title is required$"):
        tm.update("task-1")


def test_update_status_and_title(tm: TaskManager) -> None:
    created = tm.create("x")
    updated = tm.update("task-1", status="in_progress")
    assert updated["status"] == "in_progress"
    assert updated["updated_at"] >= created["updated_at"]
    assert updated["created_at"] == created["created_at"]
    renamed = tm.update("task-1", title="  new title ")
    assert renamed["title"] == "new title"
    assert renamed["status"] == "in_progress"
    both = tm.update("task-1", status="done", title="final")
    assert (both["status"], both["title"]) == ("done", "final")
    assert tm.get("task-1") == both


def test_update_validation(tm: TaskManager) -> None:
    tm.create("x")
    with pytest.raises(ValueError, match=r"Invalid task status 'closed'"):
        tm.update("task-1", status="closed")
    with pytest.raises(ValueError, match="title must not be empty"):
        tm.update("task-1", title="  ")
    with pytest.raises(ValueError, match=r"Unknown task id 'task-5'"):
        tm.update("task-5", status="done")
    with pytest.raises(ValueError, match=r"Invalid task expected_status 'nope'"):
        tm.update("task-1", status="done", expected_status="nope")
    assert tm.get("task-1")["status"] == "pending"
    assert tm.get("task-1")["title"] == "x"


def test_expected_status_claim(tm: TaskManager) -> None:
    tm.create("x")
    claimed = tm.update("task-1", status="in_progress", expected_status="pending")
    assert claimed["status"] == "in_progress"
    with pytest.raises(TaskClaimConflict) as info:
        tm.update("task-1", status="in_progress", expected_status="pending")
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        "Task task-1 is in_progress, not pending; it was not updated "
        "(another agent may have claimed it)"
    )
    before = tm.get("task-1")
    with pytest.raises(TaskClaimConflict):
        tm.update("task-1", title="other", expected_status="done")
    assert tm.get("task-1") == before


# -- ready_tasks ----------------------------------------------------------------------------


def test_ready_tasks_respects_dependencies(tm: TaskManager) -> None:
    tm.create("a")  # task-1
    tm.create("b")  # task-2
    tm.create("c", depends_on=["task-1"])  # task-3
    tm.create("d", depends_on=["task-1", "task-2"])  # task-4
    tm.create("e", depends_on=["task-4"])  # task-5

    def ready() -> list[str]:
        return [t["id"] for t in tm.ready_tasks()]

    assert ready() == ["task-1", "task-2"]
    tm.update("task-1", status="in_progress")
    assert ready() == ["task-2"]
    tm.update("task-1", status="done")
    assert ready() == ["task-2", "task-3"]
    tm.update("task-2", status="failed")  # failed is not done: task-4 stays blocked
    assert ready() == ["task-3"]
    tm.update("task-2", status="done")
    assert ready() == ["task-3", "task-4"]
    tm.update("task-4", status="done")
    assert ready() == ["task-3", "task-5"]


# -- cycles ---------------------------------------------------------------------------------


def test_find_cycle() -> None:
    assert find_cycle({}) is None
    assert find_cycle({"a": [], "b": ["a"], "c": ["a", "b"]}) is None
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    cycle = find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]})
    assert cycle is not None
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert find_cycle({"x": ["outside"]}) is None
    # Deep chains must not hit the recursion limit.
    chain = {f"n{i}": [f"n{i + 1}"] for i in range(5000)}
    chain["n5000"] = []
    assert find_cycle(chain) is None
    chain["n5000"] = ["n0"]
    found = find_cycle(chain)
    assert found is not None and len(found) == 5002


def test_loaded_file_with_cycle_is_rejected(tm: TaskManager, store: Path) -> None:
    _write(
        store,
        [
            _task("task-1", deps=["task-3"]),
            _task("task-2", deps=["task-1"]),
            _task("task-3", deps=["task-2"]),
        ],
    )
    raw = store.read_bytes()
    with pytest.raises(
        TaskStoreError, match="dependency cycle task-1 -> task-3 -> task-2 -> task-1"
    ):
        tm.list()
    with pytest.raises(TaskStoreError):
        tm.create("new")
    assert store.read_bytes() == raw


# -- corrupt store ---------------------------------------------------------------------------

CORRUPT: list[tuple[str, str]] = [
    ("{not json", "invalid JSON"),
    ("[]", "expected a JSON object, found list"),
    ('"text"', "expected a JSON object, found str"),
    ("{}", "missing 'tasks' list"),
    ('{"tasks": {}}', "missing 'tasks' list"),
    ('{"tasks": [1]}', "task #0 is not an object"),
    ('{"tasks": [{"id": "task-1"}]}', "task #0 has no string 'title'"),
    (json.dumps({"tasks": [{**_task("task-1"), "depends_on": "x"}]}), "no 'depends_on' list"),
    (json.dumps({"tasks": [{**_task("task-1"), "status": "weird"}]}), "unknown status 'weird'"),
    (json.dumps({"tasks": [_task("task-1"), _task("task-1")]}), "duplicate task id 'task-1'"),
    (
        json.dumps({"tasks": [_task("task-1", deps=["task-9"])]}),
        "depends on unknown task 'task-9'",
    ),
]


@pytest.mark.parametrize(("content", "problem"), CORRUPT, ids=[c[1] for c in CORRUPT])
def test_corrupt_store_raises_and_is_never_overwritten(
    tm: TaskManager, store: Path, content: str, problem: str
) -> None:
    store.write_text(content, encoding="utf-8")
    raw = store.read_bytes()
    for op in (
        lambda: tm.create("new task"),
        lambda: tm.update("task-1", status="done"),
        tm.list,
        tm.ready_tasks,
        lambda: tm.get("task-1"),
    ):
        with pytest.raises(TaskStoreError) as info:
            op()
        message = str(info.value)
        assert "\n" not in message
        assert str(store) in message
        assert problem in message
    assert store.read_bytes() == raw
    assert [p.name for p in store.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_non_utf8_store(tm: TaskManager, store: Path) -> None:
    store.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TaskStoreError, match="not UTF-8"):
        tm.create("x")
    assert store.read_bytes() == b"\xff\xfe\x00garbage"


def test_store_path_is_a_directory(tmp_path: Path) -> None:
    store = tmp_path / ".tasks.json"
    store.mkdir()
    with pytest.raises(TaskStoreError, match="Cannot read task store"):
        TaskManager(store).list()


def test_task_store_error_is_not_value_error() -> None:
    # The agent should not mistake a broken store for a bad argument it can fix.
    assert not issubclass(TaskStoreError, ValueError)
    assert issubclass(TaskClaimConflict, ValueError)


# -- file handling ---------------------------------------------------------------------------


def test_unknown_keys_are_preserved(tm: TaskManager, store: Path) -> None:
    _write(store, [{**_task("task-1"), "owner": "alice"}], note="keep me")
    tm.update("task-1", status="done")
    tm.create("next")
    data = json.loads(store.read_text(encoding="utf-8"))
    assert data["note"] == "keep me"
    assert data["tasks"][0]["owner"] == "alice"
    assert tm.get("task-1")["owner"] == "alice"


def test_writes_leave_no_temp_files_and_keep_mode(tm: TaskManager, store: Path) -> None:
    tm.create("x")
    assert stat.S_IMODE(store.stat().st_mode) == 0o644
    os.chmod(store, 0o600)
    tm.create("y")
    tm.update("task-1", status="done")
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    leftovers = [p.name for p in store.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_failed_write_keeps_old_file(
    tm: TaskManager, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tm.create("x")
    raw = store.read_bytes()

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)  # the module calls os.replace
    with pytest.raises(OSError, match="disk full"):
        tm.create("y")
    assert store.read_bytes() == raw
    assert [p.name for p in store.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_creates_missing_parent_directory(tmp_path: Path) -> None:
    store = tmp_path / "nested" / "dir" / ".tasks.json"
    TaskManager(store).create("x")
    assert json.loads(store.read_text(encoding="utf-8"))["tasks"][0]["id"] == "task-1"


@pytest.mark.timeout(10)
def test_busy_lock_times_out_with_clear_error(
    tm: TaskManager, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks_mod, "LOCK_TIMEOUT", 0.2)
    holder = FileLock(str(store) + ".lock")
    with (
        holder,
        pytest.raises(TaskStoreError, match=r"is busy: could not lock .*\.lock within 0\.2"),
    ):
        tm.create("x")
    assert tm.create("x")["id"] == "task-1"
