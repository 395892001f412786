"""Permission model: modes, the guard, allow/deny rules and bash command analysis."""

from bareagent.permission.bash_analysis import (
    BashVerdict,
    classify_bash,
    is_auto_safe_command,
    is_dangerous,
)
from bareagent.permission.guard import (
    NO_CONFIRM_TOOLS,
    SAFE_TOOLS,
    SHELL_TOOLS,
    Decision,
    PermissionGuard,
)
from bareagent.permission.modes import PermissionMode
from bareagent.permission.rules import Rule, parse_rule, parse_rules

__all__ = [
    "NO_CONFIRM_TOOLS",
    "SAFE_TOOLS",
    "SHELL_TOOLS",
    "BashVerdict",
    "Decision",
    "PermissionGuard",
    "PermissionMode",
    "Rule",
    "classify_bash",
    "is_auto_safe_command",
    "is_dangerous",
    "parse_rule",
    "parse_rules",
]
