"""Built-in subagent types: turn limits, nesting, permission mode and tool filters."""

from __future__ import annotations

from dataclasses import dataclass, field

from bareagent.permission.modes import PermissionMode

DEFAULT_AGENT_TYPE = "general-purpose"
_READ_ONLY_DENY = frozenset({"write_file", "edit_file", "bash", "subagent"})


@dataclass(frozen=True)
class AgentType:
    """What a subagent of one type may do: its turn limit, nesting, mode and tools."""

    name: str
    max_turns: int
    allow_nesting: bool
    mode: PermissionMode | None
    description: str
    allowed_tools: frozenset[str] | None = None
    denied_tools: frozenset[str] = field(default_factory=frozenset)

    def filter_tools(self, tool_names: list[str]) -> list[str]:
        """Apply the allow-list, then the deny-list, then drop `subagent` without nesting."""
        names = [n for n in tool_names if self.allowed_tools is None or n in self.allowed_tools]
        names = [n for n in names if n not in self.denied_tools]
        if not self.allow_nesting:
            names = [n for n in names if n != "subagent"]
        return names


AGENT_TYPES: dict[str, AgentType] = {
    "general-purpose": AgentType(
        name="general-purpose",
        max_turns=200,
        allow_nesting=True,
        mode=None,
        description="Does any self-contained task with the parent's tools and mode.",
    ),
    "explore": AgentType(
        name="explore",
        max_turns=50,
        allow_nesting=False,
        mode=PermissionMode.PLAN,
        description="Reads and searches the code base; never changes anything.",
        denied_tools=_READ_ONLY_DENY,
    ),
    "plan": AgentType(
        name="plan",
        max_turns=50,
        allow_nesting=False,
        mode=PermissionMode.PLAN,
        description="Studies the code base and writes an implementation plan.",
        denied_tools=_READ_ONLY_DENY,
    ),
    "code-review": AgentType(
        name="code-review",
        max_turns=50,
        allow_nesting=False,
        mode=PermissionMode.PLAN,
        description="Reviews code for bugs, risks and style; never changes anything.",
        denied_tools=_READ_ONLY_DENY,
    ),
}


def resolve_agent_type(name: str | None, default: str | None = None) -> AgentType:
    """Unknown type -> configured default -> general-purpose."""
    for candidate in (name, default, DEFAULT_AGENT_TYPE):
        if candidate and candidate in AGENT_TYPES:
            return AGENT_TYPES[candidate]
    return AGENT_TYPES[DEFAULT_AGENT_TYPE]
