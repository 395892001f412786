"""Sandbox: workspace path checks, process-tree kill, and the one shell runner.

Every command an agent runs (the bash tool, background jobs, commands of subagents and
teammates) goes through `run_shell` under a `SandboxPolicy`; see docs/security.md.
"""

from bareagent.sandbox.limits import ResourceLimits
from bareagent.sandbox.paths import relative_posix, safe_path
from bareagent.sandbox.policy import SandboxPolicy, SandboxUnavailable
from bareagent.sandbox.process_tree import kill_process_tree
from bareagent.sandbox.runner import ShellResult, format_shell_result, run_shell

__all__ = [
    "ResourceLimits",
    "SandboxPolicy",
    "SandboxUnavailable",
    "ShellResult",
    "format_shell_result",
    "kill_process_tree",
    "relative_posix",
    "run_shell",
    "safe_path",
]
