"""Turn (command, cwd, env, policy) into the argv and environment the runner starts.

POSIX chain: `python limits_exec.py ... -- [bwrap ... --] bash -lc COMMAND`. The limits
wrapper is outermost and execs into bwrap (or bash), so the runner's child pid is bwrap
(or the shell) itself: `--die-with-parent` watches the runner, the process group and
the process tree start at the pid the runner knows. Windows: PowerShell directly, with
the same environment policy and process-count watchdog but no limits and no bwrap.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bareagent.sandbox import bwrap
from bareagent.sandbox.env_policy import filter_env
from bareagent.sandbox.limits import limits_argv
from bareagent.sandbox.policy import SandboxPolicy, SandboxUnavailable

log = logging.getLogger(__name__)

_IS_WINDOWS = os.name == "nt"
# Outer bwrap plus its init process in the new pid namespace.
BWRAP_OVERHEAD = 2
_warned: set[str] = set()


@dataclass(frozen=True)
class LaunchPlan:
    """What to start: argv, environment, and the process cap to watch (0 = none)."""

    argv: list[str]
    env: dict[str, str] | None
    level: str
    max_processes: int
    overhead: int


def shell_argv(command: str) -> list[str]:
    """The shell invocation of the bash tool on this OS."""
    if _IS_WINDOWS:
        return ["powershell", "-NoProfile", "-Command", command]
    return ["bash", "-lc", command]


def unavailable_message(reason: str) -> str:
    """The one-line refusal for a `bwrap` policy that cannot run (without 'Error: ')."""
    return (
        f"sandbox level 'bwrap' is unavailable: {reason}; refusing to run commands "
        '(set [sandbox] fallback = "process" to allow a weaker sandbox).'
    )


def effective_level(policy: SandboxPolicy) -> str:
    """The level that will run; SandboxUnavailable when bwrap is missing and we fail closed."""
    if policy.level != "bwrap":
        return policy.level
    reason = bwrap.unavailable_reason(policy.network)
    if reason is None:
        return "bwrap"
    if policy.fallback == "process":
        if reason not in _warned:
            _warned.add(reason)
            log.warning("sandbox level 'bwrap' is unavailable (%s); using 'process'", reason)
        return "process"
    raise SandboxUnavailable(unavailable_message(reason))


def _bwrap_env(env: dict[str, str], workspace: Path) -> dict[str, str]:
    tmpdir = env.get("TMPDIR")
    if tmpdir and not Path(tmpdir).resolve().is_relative_to(workspace):
        # The sandbox has its own empty /tmp; a TMPDIR elsewhere would not be writable.
        env["TMPDIR"] = "/tmp"
    return env


def plan_launch(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None,
    policy: SandboxPolicy,
) -> LaunchPlan:
    """Apply `policy` to one command; SandboxUnavailable if it must not run at all."""
    level = effective_level(policy)
    inner = shell_argv(command)
    if level == "none":
        return LaunchPlan(inner, dict(env) if env is not None else None, level, 0, 0)
    child_env = filter_env(env, allow=policy.env_allow, deny=policy.env_deny)
    cap = policy.limits.max_processes
    if _IS_WINDOWS:
        return LaunchPlan(inner, child_env, level, cap, 0)
    overhead = 0
    if level == "bwrap":
        exe = bwrap.find_bwrap()
        assert exe is not None  # effective_level probed it
        workspace = Path(policy.workspace or cwd).resolve()
        child_env = _bwrap_env(child_env, workspace)
        inner = bwrap.bwrap_argv(
            exe,
            inner,
            workspace=workspace,
            cwd=cwd,
            hidden=policy.paths_to_hide(),
            network=policy.network,
            home=child_env.get("HOME"),
        )
        overhead = BWRAP_OVERHEAD
    argv = limits_argv(policy.limits, child_env, inner)
    return LaunchPlan(argv, child_env, level, cap, overhead)
