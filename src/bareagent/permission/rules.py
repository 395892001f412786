"""Allow/deny rules: `tool`, `tool(prefix:command-prefix*)` or `tool(command-prefix*)`.

A rule names a tool (case-insensitive) and optionally a prefix. Without a prefix (`bash`,
`write_file`, `bash()`, `bash(*)`) it covers every call of that tool. With one it covers the
calls whose *subject* starts with the prefix: the command for bash/background_run, the
normalised path for file tools, the obvious key for the others (see SUBJECT_KEYS). Trailing
`*` are dropped; matching is a plain `startswith` after stripping leading whitespace.
Unparseable rules are ignored with a warning.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

_RULE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(?:\((.*)\))?\s*$", re.DOTALL)

SUBJECT_KEYS: dict[str, str] = {
    "bash": "command",
    "background_run": "command",
    "read_file": "file_path",
    "write_file": "file_path",
    "edit_file": "file_path",
    "glob": "pattern",
    "grep": "pattern",
    "subagent": "agent_type",
    "load_skill": "skill_name",
    "team_spawn": "name",
    "team_send": "to_agent",
    "task_create": "title",
    "task_update": "task_id",
    "task_get": "task_id",
}
_PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file"})


@dataclass(frozen=True)
class Rule:
    """One parsed rule: the tool it names and an optional subject prefix."""

    source: str
    tool: str
    prefix: str | None

    @property
    def whole_tool(self) -> bool:
        """True when the rule covers every call of its tool."""
        return not self.prefix

    def names(self, tool_name: str) -> bool:
        """True when the rule is about this tool."""
        return self.tool == tool_name.strip().lower()

    def matches_text(self, text: str) -> bool:
        """True when a subject string starts with the rule's prefix."""
        return self.whole_tool or text.lstrip().startswith(self.prefix or "")

    def matches(self, tool_name: str, tool_input: Mapping[str, Any]) -> bool:
        """True when the rule covers this call (prefix rules need a string subject)."""
        if not self.names(tool_name):
            return False
        if self.whole_tool:
            return True
        subject = subject_of(tool_name, tool_input)
        return subject is not None and self.matches_text(subject)


def subject_of(tool_name: str, tool_input: Mapping[str, Any]) -> str | None:
    """The string a prefix rule is matched against for this tool call, if any."""
    name = tool_name.strip().lower()
    key = SUBJECT_KEYS.get(name)
    if key is None:
        return None
    value = tool_input.get(key)
    if not isinstance(value, str):
        return None
    if name in _PATH_TOOLS:
        # `docs/../secret.txt` must not pass for a `docs/` rule.
        return posixpath.normpath(value.replace("\\", "/")) if value else value
    return value


def _clean_prefix(inner: str, bare: bool) -> str:
    prefix = inner.strip().rstrip("*")
    if bare and prefix.endswith(":"):
        # Accept the `tool(npm run test:*)` spelling other agents use for a word prefix.
        prefix = prefix[:-1]
    return prefix.lstrip()


def parse_rule(text: object) -> Rule | None:
    """Parse one rule string; None (and a warning) when it cannot be understood."""
    if not isinstance(text, str) or not text.strip():
        log.warning("ignoring permission rule %r: not a non-empty string", text)
        return None
    m = _RULE_RE.match(text)
    if m is None:
        log.warning("ignoring permission rule %r: expected tool or tool(prefix:...)", text)
        return None
    tool, inner = m.group(1).lower(), m.group(2)
    if inner is None:
        return Rule(source=text, tool=tool, prefix=None)
    stripped = inner.strip()
    if stripped.startswith("prefix:"):
        prefix = _clean_prefix(stripped[len("prefix:") :], bare=False)
    else:
        prefix = _clean_prefix(stripped, bare=True)
    return Rule(source=text, tool=tool, prefix=prefix or None)


def parse_rules(texts: Iterable[object] | None) -> list[Rule]:
    """Parse a list of rule strings, dropping the ones that cannot be understood."""
    if texts is None:
        return []
    if isinstance(texts, str):
        texts = [texts]
    rules: list[Rule] = []
    for text in texts:
        rule = parse_rule(text)
        if rule is not None:
            rules.append(rule)
    return rules
