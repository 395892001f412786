"""PermissionGuard: decides which tool calls need the user's confirmation, and asks."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bareagent.permission.bash_analysis import BashVerdict, classify_bash
from bareagent.permission.modes import PermissionMode
from bareagent.permission.rules import Rule, parse_rules

log = logging.getLogger(__name__)

SAFE_TOOLS = frozenset(
    {
        "read_file",
        "glob",
        "grep",
        "todo_read",
        "todo_write",
        "load_skill",
        "task_list",
        "task_get",
        "team_list",
    }
)
# Tools that change only workspace state the user can review, so DEFAULT/AUTO let them run.
NO_CONFIRM_TOOLS = frozenset({"edit_file", "task_create", "task_update"})
SHELL_TOOLS = frozenset({"bash", "background_run"})
_PROMPT_LIMIT = 300

AskUserFn = Callable[[Any], bool]


@dataclass(frozen=True)
class Decision:
    """Whether a call needs confirmation, and why (shown to the user when asking)."""

    confirm: bool
    reason: str


class PermissionGuard:
    """The permission ladder of one agent (see docs/security.md, "Permission model")."""

    def __init__(
        self,
        mode: PermissionMode | str,
        *,
        fail_closed: bool = False,
        ask_user_fn: AskUserFn | None = None,
        allow_rules: Iterable[str] | None = None,
        deny_rules: Iterable[str] | None = None,
    ) -> None:
        self.mode = PermissionMode.parse(mode)
        self.fail_closed = bool(fail_closed)
        self.ask_user_fn = ask_user_fn
        self._allow: list[Rule] = []
        self._deny: list[Rule] = []
        self.allow_rules = list(allow_rules or [])
        self.deny_rules = list(deny_rules or [])

    # configuration --------------------------------------------------------------------

    @property
    def mode(self) -> PermissionMode:
        """The current permission mode."""
        return self._mode

    @mode.setter
    def mode(self, value: PermissionMode | str) -> None:
        self._mode = PermissionMode.parse(value)

    @property
    def allow_rules(self) -> list[str]:
        """The allow rules that parsed (source strings)."""
        return [r.source for r in self._allow]

    @allow_rules.setter
    def allow_rules(self, rules: Iterable[str]) -> None:
        self._allow = parse_rules(rules)

    @property
    def deny_rules(self) -> list[str]:
        """The deny rules that parsed (source strings)."""
        return [r.source for r in self._deny]

    @deny_rules.setter
    def deny_rules(self, rules: Iterable[str]) -> None:
        parsed = parse_rules(rules)
        for rule in parsed:
            if rule.tool in SAFE_TOOLS:
                log.warning(
                    "deny rule %r has no effect: %s never needs confirmation",
                    rule.source,
                    rule.tool,
                )
        self._deny = parsed

    def __repr__(self) -> str:
        return (
            f"PermissionGuard(mode={self.mode.value!r}, fail_closed={self.fail_closed}, "
            f"allow={self.allow_rules!r}, deny={self.deny_rules!r})"
        )

    # decisions ------------------------------------------------------------------------

    def is_blocked(self, tool_name: str) -> bool:
        """True when PLAN mode forbids this tool outright."""
        return self.mode is PermissionMode.PLAN and tool_name not in SAFE_TOOLS

    def requires_confirm(self, tool_name: str, tool_input: Mapping[str, Any] | None) -> bool:
        """True when this call must be confirmed (or, in PLAN / fail-closed, is denied)."""
        return self.decide(tool_name, tool_input).confirm

    def decide(self, tool_name: str, tool_input: Mapping[str, Any] | None) -> Decision:
        """The full ladder for one call, with the reason for the outcome."""
        inputs: Mapping[str, Any] = tool_input if isinstance(tool_input, Mapping) else {}
        if self.mode is PermissionMode.BYPASS:
            return Decision(False, "bypass mode")
        if tool_name in SAFE_TOOLS:
            return Decision(False, "read-only tool")
        if self.mode is PermissionMode.PLAN:
            return Decision(True, "plan mode allows read-only tools only")
        if tool_name in SHELL_TOOLS:
            return self._decide_shell(tool_name, inputs)
        for rule in self._deny:
            if rule.matches(tool_name, inputs):
                return Decision(True, f"deny rule {rule.source}")
        for rule in self._allow:
            if rule.matches(tool_name, inputs):
                return Decision(False, f"allow rule {rule.source}")
        if tool_name in NO_CONFIRM_TOOLS:
            return Decision(False, "workspace edit")
        if tool_name == "write_file":
            return Decision(self.mode is PermissionMode.DEFAULT, "writes a file")
        return Decision(True, "this tool always asks outside auto-safe cases")

    def _decide_shell(self, tool_name: str, inputs: Mapping[str, Any]) -> Decision:
        command = inputs.get("command")
        if not isinstance(command, str):
            return Decision(True, "no command given")
        verdict = classify_bash(command)
        rules_for = ("bash", tool_name)
        for rule in self._deny:
            if any(rule.names(t) for t in rules_for) and _deny_hits(rule, command, verdict):
                return Decision(True, f"deny rule {rule.source}")
        if verdict.dangerous:
            return Decision(True, "dangerous: " + "; ".join(verdict.reasons[:3]))
        allow = [r for r in self._allow if any(r.names(t) for t in rules_for)]
        if _allowed(allow, command, verdict):
            return Decision(False, "allow rule")
        if verdict.auto_safe:
            return Decision(False, "auto-safe command")
        if tool_name == "background_run":
            # A background job is a non-bash tool: outside the auto-safe set it always asks.
            return Decision(True, "background command outside the auto-safe set")
        return Decision(self.mode is PermissionMode.DEFAULT, "command outside the auto-safe set")

    # asking ---------------------------------------------------------------------------

    def ask_user(self, call: Any) -> bool:
        """Ask whether a call may run; False whenever nobody can answer (fail closed)."""
        if self.fail_closed or self.mode is PermissionMode.PLAN:
            return False
        if not _stdin_is_tty():
            return False
        try:
            if self.ask_user_fn is not None:
                return bool(self.ask_user_fn(call))
            answer = input(self.prompt_for(call))
        except (EOFError, KeyboardInterrupt, OSError):
            return False
        return answer.strip().lower() in ("y", "yes")

    def prompt_for(self, call: Any) -> str:
        """The one-line question shown by the built-in prompt."""
        name = str(getattr(call, "name", "?"))
        inputs = getattr(call, "input", None)
        decision = self.decide(name, inputs if isinstance(inputs, Mapping) else {})
        summary = _summarise(name, inputs)
        why = f" ({_printable(decision.reason)})" if decision.reason.startswith("dangerous") else ""
        return f"Allow {name} {summary}{why}? [y/N] "

    # subagents and spawn specs ---------------------------------------------------------

    def for_subagent(self, agent_type: Any = None, *, background: bool = False) -> PermissionGuard:
        """The guard of a child: never less strict, fail-closed when nobody can answer."""
        if agent_type is None or isinstance(agent_type, str):
            # Imported here so that permission keeps importing nothing from planning.
            from bareagent.planning.agent_types import resolve_agent_type

            agent_type = resolve_agent_type(agent_type)
        type_mode = getattr(agent_type, "mode", None)
        mode = self.mode
        if type_mode is not None:
            mode = PermissionMode.stricter(PermissionMode.parse(type_mode), self.mode)
        fail_closed = self.fail_closed or background or mode is PermissionMode.PLAN
        return PermissionGuard(
            mode,
            fail_closed=fail_closed,
            ask_user_fn=self.ask_user_fn,
            allow_rules=self.allow_rules,
            deny_rules=self.deny_rules,
        )

    def to_spec(self) -> dict[str, Any]:
        """A JSON-able description of this guard for a worker's spawn spec."""
        return {
            "mode": self.mode.value,
            "fail_closed": self.fail_closed,
            "allow": self.allow_rules,
            "deny": self.deny_rules,
        }

    @classmethod
    def from_spec(
        cls, spec: Mapping[str, Any], *, ask_user_fn: AskUserFn | None = None
    ) -> PermissionGuard:
        """Rebuild a guard from `to_spec()` output; ValueError on a malformed spec."""
        if not isinstance(spec, Mapping):
            raise ValueError("permission spec must be a mapping")
        if "mode" not in spec:
            raise ValueError("permission spec has no 'mode'")
        fail_closed = spec.get("fail_closed", True)
        if not isinstance(fail_closed, bool):
            raise ValueError("permission spec 'fail_closed' must be true or false")
        rules: dict[str, list[str]] = {}
        for key in ("allow", "deny"):
            value = spec.get(key, [])
            if not isinstance(value, list):
                raise ValueError(f"permission spec '{key}' must be a list of rule strings")
            rules[key] = value
        return cls(
            PermissionMode.parse(spec["mode"]),
            fail_closed=fail_closed,
            ask_user_fn=ask_user_fn,
            allow_rules=rules["allow"],
            deny_rules=rules["deny"],
        )


def _deny_hits(rule: Rule, command: str, verdict: BashVerdict) -> bool:
    if rule.matches_text(command):
        return True
    return any(
        rule.matches_text(seg.text) or (seg.normalized and rule.matches_text(seg.normalized))
        for seg in verdict.segments
    )


def _allowed(rules: list[Rule], command: str, verdict: BashVerdict) -> bool:
    """An allow rule covers the commands that begin inside its matched prefix; every other
    command chained to it must be auto-safe or matched by an allow rule of its own."""
    stripped = command.lstrip()
    lead = len(command) - len(stripped)
    covered_end = -1
    for rule in rules:
        if rule.whole_tool:
            return True
        if rule.matches_text(stripped):
            end = len(command[: lead + len(rule.prefix or "")].encode("utf-8", "surrogatepass"))
            covered_end = max(covered_end, end)
    if covered_end < 0:
        return False
    for seg in verdict.segments:
        if seg.safe or seg.start < covered_end:
            continue
        if any(
            r.matches_text(seg.text) or (seg.normalized and r.matches_text(seg.normalized))
            for r in rules
        ):
            continue
        return False
    return True


def _stdin_is_tty() -> bool:
    stdin = sys.stdin
    if stdin is None or getattr(stdin, "closed", False):
        return False
    try:
        return bool(stdin.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _printable(text: str) -> str:
    """Escape control characters so a tool input cannot rewrite the terminal prompt."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _summarise(name: str, inputs: Any) -> str:
    if isinstance(inputs, Mapping):
        for key in ("command", "file_path", "task", "content"):
            value = inputs.get(key)
            if isinstance(value, str):
                text = value
                break
        else:
            text = json.dumps(inputs, ensure_ascii=False, default=str)
    else:
        text = repr(inputs)
    text = _printable(text)
    if len(text) > _PROMPT_LIMIT:
        text = text[: _PROMPT_LIMIT - 1] + "…"
    return text
