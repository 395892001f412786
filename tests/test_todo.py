"""TodoManager: in-memory TODO list behind todo_write / todo_read."""

from __future__ import annotations

import threading

import pytest

from bareagent.planning.todo import TodoManager


def test_empty_read() -> None:
    todo = TodoManager()
    assert todo.read() == "No TODO items."
    assert todo.items() == []
    assert not todo.has_open_items()


def test_add_assigns_sequential_ids_and_default_priority() -> None:
    todo = TodoManager()
    assert todo.write("add", task="Write tests") == "Added TODO t1: Write tests [priority: normal]"
    assert todo.write("add", task="  Ship it ", priority="high") == (
        "Added TODO t2: Ship it [priority: high]"
    )
    items = todo.items()
    assert [(i.id, i.task, i.priority, i.status) for i in items] == [
        ("t1", "Write tests", "normal", "pending"),
        ("t2", "Ship it", "high", "pending"),
    ]


def test_priority_is_free_form_and_blank_means_normal() -> None:
    todo = TodoManager()
    todo.write("add", task="a", priority="P0 - urgent")
    todo.write("add", task="b", priority="   ")
    todo.write("add", task="c", priority=None)
    assert [i.priority for i in todo.items()] == ["P0 - urgent", "normal", "normal"]


def test_update_status_and_read_format() -> None:
    todo = TodoManager()
    todo.write("add", task="first")
    todo.write("add", task="second", priority="low")
    todo.write("add", task="third")
    assert todo.write("update", task_id="t1", status="done") == "Updated TODO t1 to done"
    assert todo.write("update", task_id="t2", status="in_progress") == (
        "Updated TODO t2 to in_progress"
    )
    assert todo.read().splitlines() == [
        "[x] t1 (done, priority: normal) first",
        "[~] t2 (in_progress, priority: low) second",
        "[ ] t3 (pending, priority: normal) third",
    ]


def test_read_keeps_one_line_per_item() -> None:
    todo = TodoManager()
    todo.write("add", task="line one\nline two")
    todo.write("add", task="other")
    lines = todo.read().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("line one line two")


def test_has_open_items_tracks_status() -> None:
    todo = TodoManager()
    todo.write("add", task="x")
    assert todo.has_open_items()
    todo.write("update", task_id="t1", status="done")
    assert not todo.has_open_items()
    todo.write("update", task_id="t1", status="pending")
    assert todo.has_open_items()


def test_items_are_copies() -> None:
    todo = TodoManager()
    todo.write("add", task="x")
    item = todo.items()[0]
    item.status = "done"
    item.task = "changed"
    assert todo.items()[0].status == "pending"
    assert todo.items()[0].task == "x"
    assert item.to_dict() == {"id": "t1", "task": "changed", "priority": "normal", "status": "done"}


@pytest.mark.parametrize("task", [None, "", "   ", "\n"])
def test_add_requires_task(task: str | None) -> None:
    todo = TodoManager()
    with pytest.raises(ValueError, match="add requires a non-empty 'task'"):
        todo.write("add", task=task)
    assert todo.items() == []


def test_unknown_action() -> None:
    with pytest.raises(ValueError, match=r"Unknown todo action 'delete'; expected one of: add"):
        TodoManager().write("delete", task="x")


def test_update_errors() -> None:
    todo = TodoManager()
    todo.write("add", task="x")
    with pytest.raises(ValueError, match=r"update requires 'task_id'"):
        todo.write("update", status="done")
    with pytest.raises(ValueError, match=r"update requires 'status'"):
        todo.write("update", task_id="t1")
    with pytest.raises(
        ValueError, match=r"Invalid TODO status 'finished'; expected one of: pending, in_progress"
    ):
        todo.write("update", task_id="t1", status="finished")
    with pytest.raises(ValueError, match=r"Unknown TODO id 't9' \(known ids: t1\)"):
        todo.write("update", task_id="t9", status="done")
    assert todo.items()[0].status == "pending"


def test_unknown_id_on_empty_list() -> None:
    with pytest.raises(ValueError, match=r"known ids: none"):
        TodoManager().write("update", task_id="t1", status="done")


def test_ids_never_reused_and_unique_under_threads() -> None:
    todo = TodoManager()

    def add_many() -> None:
        for _ in range(200):
            todo.write("add", task="x")

    threads = [threading.Thread(target=add_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i.id for i in todo.items()]
    assert len(ids) == 800
    assert set(ids) == {f"t{n}" for n in range(1, 801)}
