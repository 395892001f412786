"""Tool registry: every schema for the model, and handlers bound to one runtime.

`get_tools()` always returns all 18 schemas. `get_handlers()` binds them to a workspace
and to whatever runtime pieces the caller has; deferred managers are created on first use
and missing pieces degrade to fixed "unavailable" answers instead of failing.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from bareagent.core.handlers import bash, file_edit, file_read, file_write, glob_search, grep_search
from bareagent.core.schema import ToolSchema
from bareagent.core.tool_schemas import BASE_TOOL_SCHEMAS, DEFERRED_TOOL_SCHEMAS

if TYPE_CHECKING:
    from bareagent.planning.skills import SkillLoader
    from bareagent.planning.tasks import TaskManager
    from bareagent.planning.todo import TodoManager
    from bareagent.sandbox.policy import SandboxPolicy

Handler = Callable[..., Any]
T = TypeVar("T")

BASE_TOOLS: frozenset[str] = frozenset(s["name"] for s in BASE_TOOL_SCHEMAS)
DEFERRED_TOOLS: frozenset[str] = frozenset(s["name"] for s in DEFERRED_TOOL_SCHEMAS)
TOOL_NAMES: tuple[str, ...] = tuple(s["name"] for s in BASE_TOOL_SCHEMAS + DEFERRED_TOOL_SCHEMAS)

BACKGROUND_UNAVAILABLE = "Background manager unavailable."
SUBAGENT_UNAVAILABLE = "Subagent unavailable: no provider is configured for this session."
TEAM_UNAVAILABLE = "Team unavailable: this session has no team handlers."


class BackgroundSubmitter(Protocol):
    """What `background_run` needs from a job manager."""

    def submit(self, command: str, timeout: float = 30, task_id: str | None = None) -> str:
        """Start a job and return its id."""
        ...


class SubagentRunner(Protocol):
    """What `subagent` needs: something that runs a child agent to completion."""

    def run(self, task: str, agent_type: str | None = None, run_in_background: bool = False) -> str:
        """Run (or start) a subagent and return its final text or a started message."""
        ...


def get_tools() -> list[ToolSchema]:
    """Return every tool schema (all 18), as a fresh deep copy."""
    return copy.deepcopy(BASE_TOOL_SCHEMAS + DEFERRED_TOOL_SCHEMAS)


def _unbound(name: str) -> Handler:
    def handler(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(
            f"Tool {name!r} is not bound to a workspace; "
            "use get_handlers(workspace) to get executable handlers."
        )

    handler.__name__ = f"unbound_{name}"
    return handler


class _Lazy(Generic[T]):
    """Creates a manager on first use, so unused deferred tools cost nothing."""

    def __init__(self, factory: Callable[[], T], value: T | None = None) -> None:
        self._factory = factory
        self._value = value

    def get(self) -> T:
        if self._value is None:
            self._value = self._factory()
        return self._value


def _new_todo() -> TodoManager:
    from bareagent.planning.todo import TodoManager

    return TodoManager()


def _new_skills() -> SkillLoader:
    from bareagent.planning.skills import SkillLoader

    return SkillLoader()


def get_handlers(
    workspace: str | Path,
    *,
    todo_manager: TodoManager | None = None,
    task_manager: TaskManager | None = None,
    skill_loader: SkillLoader | None = None,
    provider: object | None = None,
    permission_guard: object | None = None,
    background_manager: BackgroundSubmitter | None = None,
    team_handlers: Mapping[str, Handler] | None = None,
    subagent_runner: SubagentRunner | None = None,
    depth: int = 0,
    max_depth: int = 3,
    allowed_tools: Iterable[str] | None = None,
    sandbox_policy: SandboxPolicy | None = None,
) -> dict[str, Handler]:
    """Bind every tool name to a callable for this workspace and runtime.

    `allowed_tools` restricts the result (a subagent's handlers follow its filtered
    schema). `provider` and `permission_guard` are accepted so callers can pass their
    whole runtime; the subagent runner owns how children are built from them.
    `sandbox_policy` is how `bash` runs commands (None: the `process` level).
    """
    root = Path(workspace).resolve()
    if not root.is_dir():
        raise NotADirectoryError(f"workspace is not a directory: {workspace}")

    def task_factory() -> TaskManager:
        from bareagent.planning.tasks import TaskManager

        return TaskManager(root / ".tasks.json")

    todo = _Lazy(_new_todo, todo_manager)
    tasks = _Lazy(task_factory, task_manager)
    skills = _Lazy(_new_skills, skill_loader)

    handlers: dict[str, Handler] = {
        "bash": functools.partial(bash.run_bash, root, policy=sandbox_policy),
        "read_file": functools.partial(file_read.read_file, root),
        "write_file": functools.partial(file_write.write_file, root),
        "edit_file": functools.partial(file_edit.edit_file, root),
        "glob": functools.partial(glob_search.glob_files, root),
        "grep": functools.partial(grep_search.grep_files, root),
        "todo_write": lambda **kw: todo.get().write(**kw),
        "todo_read": lambda: todo.get().read(),
        "load_skill": lambda skill_name: skills.get().load(skill_name),
        "task_create": lambda title, description="", depends_on=None: tasks.get().create(
            title, description=description, depends_on=depends_on
        ),
        "task_list": lambda status=None: tasks.get().list(status),
        "task_get": lambda task_id: tasks.get().get(task_id),
        "task_update": lambda task_id, status=None, title=None: tasks.get().update(
            task_id, status=status, title=title
        ),
        "background_run": _background_handler(background_manager),
        "subagent": _subagent_handler(provider, subagent_runner, depth, max_depth),
    }
    handlers.update(_team_handlers(team_handlers))

    if allowed_tools is not None:
        keep = set(allowed_tools)
        handlers = {name: fn for name, fn in handlers.items() if name in keep}
    return handlers


def _background_handler(manager: BackgroundSubmitter | None) -> Handler:
    if manager is None:
        return lambda command="", timeout=30, task_id=None: BACKGROUND_UNAVAILABLE

    def background_run(command: str, timeout: float = 30, task_id: str | None = None) -> str:
        job_id = manager.submit(command, timeout=timeout, task_id=task_id)
        return f"Submitted background task {job_id}"

    return background_run


def _subagent_handler(
    provider: object | None, runner: SubagentRunner | None, depth: int, max_depth: int
) -> Handler:
    def subagent(task: str, agent_type: str | None = None, run_in_background: bool = False) -> str:
        child_depth = depth + 1
        if child_depth > max_depth:
            return f"Subagent refused: recursion depth {child_depth} exceeds limit {max_depth}."
        if runner is None or provider is None:
            return SUBAGENT_UNAVAILABLE
        if not task or not str(task).strip():
            raise ValueError("task must not be empty")
        return runner.run(task, agent_type=agent_type, run_in_background=run_in_background)

    return subagent


def _team_handlers(given: Mapping[str, Handler] | None) -> dict[str, Handler]:
    defaults: dict[str, Handler] = {
        "team_spawn": lambda name="": TEAM_UNAVAILABLE,
        "team_send": lambda to_agent="", content="": TEAM_UNAVAILABLE,
        "team_list": lambda: [],
    }
    if given:
        defaults.update({k: v for k, v in given.items() if k in defaults})
    return defaults


def _placeholder_handlers() -> dict[str, Handler]:
    """Stubs for every tool: runtime-less tools answer "unavailable", the rest raise."""
    registry = {name: _unbound(name) for name in TOOL_NAMES}
    registry["background_run"] = _background_handler(None)
    registry["subagent"] = _subagent_handler(None, None, 0, 3)
    registry.update(_team_handlers(None))
    return registry


TOOL_HANDLERS: dict[str, Handler] = _placeholder_handlers()
