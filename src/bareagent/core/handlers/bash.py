"""The `bash` tool: run a command in the workspace and render the SPEC §1 string."""

from __future__ import annotations

from pathlib import Path

from bareagent.sandbox.paths import StrPath, resolve_workspace
from bareagent.sandbox.runner import format_shell_result, run_shell, validate_timeout


def run_bash(workspace: StrPath, command: str, timeout: float = 30) -> str:
    """Run `command` with cwd = workspace; timeouts and failures become error strings."""
    if not isinstance(command, str) or not command.strip():
        raise ValueError("command must be a non-empty string")
    limit = validate_timeout(timeout)
    root: Path = resolve_workspace(workspace)
    result = run_shell(command, cwd=root, timeout=limit)
    return format_shell_result(result, limit)
