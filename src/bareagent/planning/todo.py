"""Per-session TODO list kept in memory (the `todo_write` / `todo_read` tools)."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

TODO_STATUSES: tuple[str, ...] = ("pending", "in_progress", "done")
TODO_ACTIONS: tuple[str, ...] = ("add", "update")
DEFAULT_PRIORITY = "normal"
EMPTY_TEXT = "No TODO items."

_MARKERS = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}


@dataclass
class TodoItem:
    """One TODO entry; `id` is t1, t2, … in creation order."""

    id: str
    task: str
    priority: str = DEFAULT_PRIORITY
    status: str = "pending"

    def to_dict(self) -> dict[str, str]:
        """Return the item as a plain dict."""
        return asdict(self)


def _one_line(text: str) -> str:
    # read() promises one line per item, so embedded newlines must not break the list.
    return " ".join(text.split())


class TodoManager:
    """In-memory TODO list for one session; ids are never reused."""

    def __init__(self) -> None:
        self._items: list[TodoItem] = []
        self._next = 1
        # Tool calls may come from more than one thread (e.g. a streaming UI); keep ids unique.
        self._lock = threading.Lock()

    def write(
        self,
        action: str,
        task: str | None = None,
        priority: str | None = DEFAULT_PRIORITY,
        task_id: str | None = None,
        status: str | None = None,
    ) -> str:
        """Add an item (`action="add"`) or change an item's status (`action="update"`)."""
        act = action.strip().lower() if isinstance(action, str) else action
        if act == "add":
            return self._add(task, priority)
        if act == "update":
            return self._update(task_id, status)
        raise ValueError(f"Unknown todo action {action!r}; expected one of: add, update")

    def _add(self, task: str | None, priority: str | None) -> str:
        if not isinstance(task, str) or not task.strip():
            raise ValueError("todo_write add requires a non-empty 'task'")
        if priority is not None and not isinstance(priority, str):
            raise ValueError("priority must be a string label such as 'high' or 'normal'")
        label = _one_line(priority or "") or DEFAULT_PRIORITY
        with self._lock:
            item = TodoItem(id=f"t{self._next}", task=task.strip(), priority=label)
            self._next += 1
            self._items.append(item)
        return f"Added TODO {item.id}: {_one_line(item.task)} [priority: {item.priority}]"

    def _update(self, task_id: str | None, status: str | None) -> str:
        if not isinstance(task_id, str) or not task_id.strip():
            raise ValueError("todo_write update requires 'task_id' (e.g. t1)")
        if status is None:
            raise ValueError("todo_write update requires 'status' (pending, in_progress or done)")
        if status not in TODO_STATUSES:
            raise ValueError(
                f"Invalid TODO status {status!r}; expected one of: {', '.join(TODO_STATUSES)}"
            )
        wanted = task_id.strip()
        with self._lock:
            for item in self._items:
                if item.id == wanted:
                    item.status = status
                    return f"Updated TODO {item.id} to {status}"
            known = ", ".join(i.id for i in self._items) or "none"
        raise ValueError(f"Unknown TODO id {wanted!r} (known ids: {known})")

    def read(self) -> str:
        """Return the list as text, one line per item, or `No TODO items.`."""
        with self._lock:
            items = list(self._items)
        if not items:
            return EMPTY_TEXT
        return "\n".join(
            f"{_MARKERS[i.status]} {i.id} ({i.status}, priority: {i.priority}) {_one_line(i.task)}"
            for i in items
        )

    def items(self) -> list[TodoItem]:
        """Return copies of all items in creation order."""
        with self._lock:
            return [TodoItem(**i.to_dict()) for i in self._items]

    def has_open_items(self) -> bool:
        """True when any item is not done (drives the REPL's reminder)."""
        with self._lock:
            return any(i.status != "done" for i in self._items)
