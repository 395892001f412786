"""One agent session: provider, permission guard, tools and history, built from config."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bareagent.config import Config, ConfigError
from bareagent.core.loop import EventSink, LoopOptions, NotificationSource, agent_loop
from bareagent.core.prompts import main_system_prompt
from bareagent.core.tools import BackgroundSubmitter, SubagentRunner, get_handlers, get_tools
from bareagent.permission import PermissionGuard, PermissionMode
from bareagent.planning.todo import TodoManager
from bareagent.provider import Provider, ProviderConfig, create_provider
from bareagent.sandbox.policy import SandboxPolicy

log = logging.getLogger(__name__)

TODO_TOOLS = frozenset({"todo_write", "todo_read"})
NAG_AFTER_TURNS = 3
NAG_TEXT = (
    "<reminder>You have open TODO items that were not updated for a few turns. "
    "Check them with todo_read and mark finished ones done.</reminder>"
)


def provider_config(config: Config) -> ProviderConfig:
    """Build the provider settings from the merged config."""
    try:
        return ProviderConfig.from_dict(dict(config.provider))
    except ValueError as exc:
        raise ConfigError(f"[provider] {exc}") from None


@dataclass
class Session:
    """A conversation with its runtime; `run_turn` sends one user prompt to completion."""

    workspace: Path
    config: Config
    provider: Provider
    guard: PermissionGuard
    tools: list[dict[str, Any]]
    handlers: dict[str, Callable[..., Any]]
    todo: TodoManager
    system_prompt: str
    notifications: NotificationSource | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns_since_todo: int = 0

    def __post_init__(self) -> None:
        if not self.messages:
            self.reset()

    def reset(self) -> None:
        """Forget the conversation, keeping the system prompt."""
        self.messages[:] = [{"role": "system", "content": self.system_prompt}]
        self.turns_since_todo = 0

    def set_mode(self, mode: PermissionMode) -> None:
        """Change the permission mode for the following turns."""
        self.guard.mode = mode

    def loop_options(self) -> LoopOptions:
        """Loop settings from the `[agent]` config section."""
        agent = self.config.section("agent")
        return LoopOptions(
            max_iterations=agent["max_iterations"],
            stream=agent["stream"],
            max_history_chars=agent["max_history_chars"],
        )

    def run_turn(self, prompt: str, on_event: EventSink | None = None) -> str:
        """Append the user's prompt and run the agent loop until the model answers."""
        content = prompt
        if self._needs_nag():
            content = f"{prompt}\n\n{NAG_TEXT}"
            self.turns_since_todo = 0
        self.messages.append({"role": "user", "content": content})
        start = len(self.messages)
        try:
            return agent_loop(
                self.messages,
                self.provider,
                self.tools,
                self.handlers,
                permission_guard=self.guard,
                notifications=self.notifications,
                on_event=on_event,
                options=self.loop_options(),
            )
        finally:
            self._track_todo_use(self.messages[start:])

    def _needs_nag(self) -> bool:
        return self.todo.has_open_items() and self.turns_since_todo >= NAG_AFTER_TURNS

    def _track_todo_use(self, new_messages: list[dict[str, Any]]) -> None:
        used = any(
            block.get("type") == "tool_use" and block.get("name") in TODO_TOOLS
            for m in new_messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for block in m["content"]
        )
        self.turns_since_todo = 0 if used else self.turns_since_todo + 1


def guard_from_config(
    config: Config,
    *,
    ask_user_fn: Callable[[Any], bool] | None = None,
    fail_closed: bool = False,
) -> PermissionGuard:
    """The permission guard described by the `[permission]` section."""
    perm = config.section("permission")
    return PermissionGuard(
        PermissionMode.parse(perm["mode"]),
        fail_closed=fail_closed,
        ask_user_fn=ask_user_fn,
        allow_rules=list(perm["allow"]),
        deny_rules=list(perm["deny"]),
    )


def build_session(
    workspace: str | Path,
    config: Config,
    *,
    ask_user_fn: Callable[[Any], bool] | None = None,
    fail_closed: bool = False,
    provider: Provider | None = None,
    background_manager: BackgroundSubmitter | None = None,
    notifications: NotificationSource | None = None,
    team_handlers: Mapping[str, Callable[..., Any]] | None = None,
    subagent_runner: SubagentRunner | None = None,
    depth: int = 0,
    extra_prompt: str = "",
    guard: PermissionGuard | None = None,
    allowed_tools: list[str] | None = None,
    system_prompt: str | None = None,
    sandbox_policy: SandboxPolicy | None = None,
) -> Session:
    """Assemble a session from config; raises ProviderError/ConfigError on bad setup.

    Workers pass the `guard`, `allowed_tools` and `system_prompt` fixed in their spawn
    spec; a top-level session derives them from config. The sandbox policy of `bash`
    comes from the `[sandbox]` section unless given.
    """
    root = Path(workspace).resolve()
    if sandbox_policy is None:
        sandbox_policy = SandboxPolicy.from_config(config, workspace=root)
    if guard is None:
        guard = guard_from_config(config, ask_user_fn=ask_user_fn, fail_closed=fail_closed)
    llm = provider if provider is not None else create_provider(provider_config(config))
    todo = TodoManager()
    handlers = get_handlers(
        root,
        todo_manager=todo,
        provider=llm,
        permission_guard=guard,
        background_manager=background_manager,
        team_handlers=team_handlers,
        subagent_runner=subagent_runner,
        depth=depth,
        max_depth=config.get("subagent", "max_depth"),
        allowed_tools=allowed_tools,
        sandbox_policy=sandbox_policy,
    )
    tools = get_tools()
    if allowed_tools is not None:
        tools = [t for t in tools if t["name"] in handlers]
    prompt = system_prompt or main_system_prompt(
        root, guard.mode.value, _skills_summary(), extra_prompt
    )
    return Session(
        workspace=root,
        config=config,
        provider=llm,
        guard=guard,
        tools=tools,
        handlers=handlers,
        todo=todo,
        system_prompt=prompt,
        notifications=notifications,
    )


def _skills_summary() -> str:
    from bareagent.planning.skills import SkillLoader

    try:
        return SkillLoader().describe()
    except (OSError, ValueError) as exc:
        log.warning("skills unavailable: %s", exc)
        return ""
