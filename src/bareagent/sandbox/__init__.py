"""Sandbox primitives: workspace path checks, process-tree kill, shell runner."""

from bareagent.sandbox.paths import relative_posix, safe_path
from bareagent.sandbox.process_tree import kill_process_tree
from bareagent.sandbox.runner import ShellResult, format_shell_result, run_shell

__all__ = [
    "ShellResult",
    "format_shell_result",
    "kill_process_tree",
    "relative_posix",
    "run_shell",
    "safe_path",
]
