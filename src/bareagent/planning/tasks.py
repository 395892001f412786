"""Persistent task list shared by every process working in one workspace.

The store is one JSON file, `{"version": 1, "tasks": [task, ...]}`. Every operation,
including plain reads, holds `filelock.FileLock("<path>.lock")`: writers need it for
read-modify-write, and readers take it too because on Windows `os.replace` fails while
another process has the target open, so lock-free reads could break a concurrent writer.
Writes go to a temp file in the same directory, are fsynced and then `os.replace`d over
the store, so a crash leaves either the old or the new file, never a torn one.

A store that cannot be understood raises `TaskStoreError` and is never written: the user
must look at it, because overwriting would silently drop their tasks. A missing or empty
file is an empty store.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

TASK_STATUSES: tuple[str, ...] = ("pending", "in_progress", "done", "failed")
STORE_VERSION = 1
LOCK_TIMEOUT = 30.0

Task = dict[str, Any]
TaskList = builtins.list[Task]

_ID_RE = re.compile(r"^task-(\d+)$")
_REQUIRED_STR_KEYS = ("id", "title", "description", "status", "created_at", "updated_at")


class TaskStoreError(RuntimeError):
    """The task file is unreadable or malformed; it is left untouched."""


class TaskClaimConflict(ValueError):
    """An `expected_status` check failed: someone else changed the task first."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _check_status(status: object, what: str = "status") -> str:
    if status not in TASK_STATUSES:
        raise ValueError(
            f"Invalid task {what} {status!r}; expected one of: {', '.join(TASK_STATUSES)}"
        )
    return str(status)


def _check_title(title: object) -> str:
    if not isinstance(title, str):
        raise ValueError("title must be a string")
    if not title.strip():
        raise ValueError("title must not be empty")
    return title.strip()


def find_cycle(graph: Mapping[str, Iterable[str]]) -> builtins.list[str] | None:
    """Return one dependency cycle as a path (first id repeated at the end), or None."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(graph, white)
    for root in graph:
        if color[root] != white:
            continue
        # Iterative DFS: a long dependency chain must not hit the recursion limit.
        path: builtins.list[str] = [root]
        stack: builtins.list[Iterator[str]] = [iter(graph[root])]
        color[root] = grey
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                color[path.pop()] = black
                continue
            state = color.get(nxt, black)  # ids outside the graph cannot close a cycle
            if state == grey:
                return [*path[path.index(nxt) :], nxt]
            if state == white:
                color[nxt] = grey
                path.append(nxt)
                stack.append(iter(graph[nxt]))
    return None


def _validate_store(data: object, path: Path) -> TaskList:
    """Check the loaded JSON and return its task list, or raise TaskStoreError."""

    def bad(problem: str) -> TaskStoreError:
        return TaskStoreError(f"Corrupt task store {path}: {problem}")

    if not isinstance(data, dict):
        raise bad(f"expected a JSON object, found {type(data).__name__}")
    tasks = data.get("tasks")
    if not isinstance(tasks, builtins.list):
        raise bad("missing 'tasks' list")
    seen: set[str] = set()
    for n, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise bad(f"task #{n} is not an object")
        for key in _REQUIRED_STR_KEYS:
            if not isinstance(task.get(key), str):
                raise bad(f"task #{n} has no string '{key}'")
        deps = task.get("depends_on")
        if not isinstance(deps, builtins.list) or not all(isinstance(d, str) for d in deps):
            raise bad(f"task {task['id']!r} has no 'depends_on' list of ids")
        if task["status"] not in TASK_STATUSES:
            raise bad(f"task {task['id']!r} has unknown status {task['status']!r}")
        if task["id"] in seen:
            raise bad(f"duplicate task id {task['id']!r}")
        seen.add(task["id"])
    for task in tasks:
        missing = [d for d in task["depends_on"] if d not in seen]
        if missing:
            raise bad(f"task {task['id']!r} depends on unknown task {missing[0]!r}")
    cycle = find_cycle({t["id"]: t["depends_on"] for t in tasks})
    if cycle:
        raise bad(f"dependency cycle {' -> '.join(cycle)}")
    return tasks


class TaskManager:
    """Create, list and update the tasks persisted in one JSON file (multi-process safe)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lock_path = Path(str(self.path) + ".lock")

    # -- storage -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A fresh lock object per operation: nothing is shared across fork() or threads.
        lock = FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT)
        try:
            lock.acquire()
        except Timeout:
            raise TaskStoreError(
                f"Task store {self.path} is busy: could not lock {self.lock_path} "
                f"within {LOCK_TIMEOUT:g} seconds"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def _load(self) -> dict[str, Any]:
        """Read and validate the whole store; call with the lock held."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {"version": STORE_VERSION, "tasks": []}
        except OSError as exc:
            raise TaskStoreError(f"Cannot read task store {self.path}: {exc.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TaskStoreError(f"Corrupt task store {self.path}: not UTF-8 text") from None
        if not text.strip():
            return {"version": STORE_VERSION, "tasks": []}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskStoreError(
                f"Corrupt task store {self.path}: invalid JSON ({exc.msg} at line {exc.lineno} "
                f"column {exc.colno})"
            ) from None
        _validate_store(data, self.path)
        assert isinstance(data, dict)
        return data

    def _save(self, data: dict[str, Any]) -> None:
        """Atomically replace the store with `data`; call with the lock held."""
        payload = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.chmod(tmp, self.path.stat().st_mode & 0o777)
            except FileNotFoundError:
                os.chmod(tmp, 0o644)  # mkstemp's 0600 would surprise users of a workspace file
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._fsync_dir()

    def _fsync_dir(self) -> None:
        # Makes the rename itself durable on POSIX; directories cannot be opened on Windows.
        if os.name != "posix":
            return
        with contextlib.suppress(OSError):
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    # -- public API --------------------------------------------------------------------

    def create(
        self, title: str, description: str = "", depends_on: Iterable[str] | None = None
    ) -> Task:
        """Create a pending task and return it; deps must name existing tasks."""
        clean_title = _check_title(title)
        if description is None:
            description = ""
        if not isinstance(description, str):
            raise ValueError("description must be a string")
        deps = self._clean_deps(depends_on)
        with self._locked():
            data = self._load()
            tasks: TaskList = data["tasks"]
            known = {t["id"] for t in tasks}
            for dep in deps:
                if dep not in known:
                    raise ValueError(f"Unknown dependency task id {dep!r}")
            numbers = [int(m.group(1)) for t in tasks if (m := _ID_RE.match(t["id"]))]
            task_id = f"task-{max(numbers, default=0) + 1}"
            graph = {t["id"]: t["depends_on"] for t in tasks}
            graph[task_id] = deps
            cycle = find_cycle(graph)
            if cycle:
                raise ValueError(f"Dependency cycle: {' -> '.join(cycle)}")
            stamp = _now()
            task: Task = {
                "id": task_id,
                "title": clean_title,
                "description": description,
                "status": "pending",
                "depends_on": deps,
                "created_at": stamp,
                "updated_at": stamp,
            }
            tasks.append(task)
            data.setdefault("version", STORE_VERSION)
            self._save(data)
        return copy.deepcopy(task)

    @staticmethod
    def _clean_deps(depends_on: Iterable[str] | None) -> builtins.list[str]:
        if depends_on is None:
            return []
        if isinstance(depends_on, str | bytes) or not isinstance(depends_on, Iterable):
            raise ValueError("depends_on must be a list of task ids")
        deps: builtins.list[str] = []
        for dep in depends_on:
            if not isinstance(dep, str):
                raise ValueError(f"dependency ids must be strings, got {dep!r}")
            if not dep.strip():
                raise ValueError("dependency ids must not be blank")
            if dep.strip() not in deps:
                deps.append(dep.strip())
        return deps

    def list(self, status: str | None = None) -> TaskList:
        """Return all tasks in creation order, or only those with `status`."""
        if status is not None:
            _check_status(status)
        with self._locked():
            tasks: TaskList = self._load()["tasks"]
        return [copy.deepcopy(t) for t in tasks if status is None or t["status"] == status]

    def get(self, task_id: str) -> Task:
        """Return one task; unknown id → ValueError."""
        with self._locked():
            tasks: TaskList = self._load()["tasks"]
        return copy.deepcopy(self._find(tasks, task_id))

    @staticmethod
    def _find(tasks: TaskList, task_id: object) -> Task:
        for task in tasks:
            if task["id"] == task_id:
                return task
        raise ValueError(f"Unknown task id {task_id!r}")

    def update(
        self,
        task_id: str,
        status: str | None = None,
        title: str | None = None,
        expected_status: str | None = None,
    ) -> Task:
        """Change status and/or title; with `expected_status` only if it still holds."""
        if status is None and title is None:
            raise ValueError("status or title is required")
        if status is not None:
            _check_status(status)
        new_title = _check_title(title) if title is not None else None
        if expected_status is not None:
            _check_status(expected_status, "expected_status")
        with self._locked():
            data = self._load()
            task = self._find(data["tasks"], task_id)
            if expected_status is not None and task["status"] != expected_status:
                raise TaskClaimConflict(
                    f"Task {task['id']} is {task['status']}, not {expected_status}; "
                    "it was not updated (another agent may have claimed it)"
                )
            if status is not None:
                task["status"] = status
            if new_title is not None:
                task["title"] = new_title
            task["updated_at"] = _now()
            self._save(data)
        return copy.deepcopy(task)

    def ready_tasks(self) -> TaskList:
        """Return pending tasks whose dependencies are all done, in creation order."""
        with self._locked():
            tasks: TaskList = self._load()["tasks"]
        done = {t["id"] for t in tasks if t["status"] == "done"}
        return [
            copy.deepcopy(t)
            for t in tasks
            if t["status"] == "pending" and all(d in done for d in t["depends_on"])
        ]
