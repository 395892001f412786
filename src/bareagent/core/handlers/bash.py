"""The `bash` tool: run a command in the workspace and render the SPEC §1 string."""

from __future__ import annotations

from pathlib import Path

from bareagent.sandbox.paths import StrPath, resolve_workspace
from bareagent.sandbox.policy import DEFAULT_POLICY, SandboxPolicy, SandboxUnavailable
from bareagent.sandbox.runner import format_shell_result, run_shell, validate_timeout


def run_bash(
    workspace: StrPath,
    command: str,
    timeout: float = 30,
    *,
    policy: SandboxPolicy | None = None,
) -> str:
    """Run `command` with cwd = workspace under the sandbox `policy` (default: `process`).

    Timeouts, failures and a sandbox that cannot run become error strings.
    """
    if not isinstance(command, str) or not command.strip():
        raise ValueError("command must be a non-empty string")
    limit = validate_timeout(timeout)
    root: Path = resolve_workspace(workspace)
    chosen = policy or DEFAULT_POLICY
    if chosen.workspace is None:
        chosen = chosen.for_workspace(root)
    try:
        result = run_shell(command, cwd=root, timeout=limit, policy=chosen)
    except SandboxUnavailable as exc:
        return f"Error: {exc}"
    return format_shell_result(result, limit)
