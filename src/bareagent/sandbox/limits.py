"""Resource limits of a sandboxed command, and the wrapper argv that applies them.

Defaults (each `0` means "no limit"; `None` in the config means "this default"):

- `cpu_seconds` 1800: CPU time per process. Wall time is already bounded by the command's
  timeout; this stops a spinning process in a long-timeout background job without
  cutting off a real single-process build or test run (minutes of CPU).
- `memory_mb` 4096: address space (RLIMIT_AS) per process. Enough for compilers, node
  and a JVM (checked: `java -version`, node, cargo start under 4 GiB; the JVM fails under
  2 GiB), small enough that a runaway allocation fails at once instead of pushing the
  machine into swap. AddressSanitizer binaries need `memory_mb = 0`.
- `open_files` 4096: RLIMIT_NOFILE. Above the usual soft default (1024), so nothing that
  works in a normal shell breaks, but bounded.
- `max_processes` 256: processes in the command's tree, enforced by the runner's
  watchdog (see `watchdog.py`). `make -j`/pytest-xdist stay far below it; a fork loop
  is stopped early.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

DEFAULT_CPU_SECONDS = 1800
DEFAULT_MEMORY_MB = 4096
DEFAULT_OPEN_FILES = 4096
DEFAULT_MAX_PROCESSES = 256
# Kernel backstop (Linux, non-root): tasks (threads count) the user may add while the
# command runs, per allowed process. See limits_exec.nproc_backstop.
NPROC_BACKSTOP_FACTOR = 8

LIMITS_EXEC = Path(__file__).with_name("limits_exec.py")


@dataclass(frozen=True)
class ResourceLimits:
    """Per-command limits; 0 disables one."""

    cpu_seconds: int = DEFAULT_CPU_SECONDS
    memory_mb: int = DEFAULT_MEMORY_MB
    open_files: int = DEFAULT_OPEN_FILES
    max_processes: int = DEFAULT_MAX_PROCESSES

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"sandbox {f.name} must be a non-negative integer, got {value!r}")

    def to_dict(self) -> dict[str, int]:
        """Plain dict (JSON-able)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResourceLimits:
        """Rebuild from `to_dict` output; a missing or None value takes the default."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown sandbox limit keys: {', '.join(unknown)}")
        return cls(**{k: v for k, v in data.items() if v is not None})


def not_looser(name: str, value: int | None, current: int | None) -> bool:
    """Whether `value` for limit `name` is no looser than `current` (None = default, 0 = off)."""
    default = int(getattr(ResourceLimits, name))

    def effective(v: int | None) -> float:
        v = default if v is None else v
        return float("inf") if v == 0 else float(v)

    return effective(value) <= effective(current)


def limits_argv(limits: ResourceLimits, env: Mapping[str, str], inner: list[str]) -> list[str]:
    """POSIX: `inner` prefixed with the limits wrapper (see limits_exec.py)."""
    argv = [sys.executable, "-I", "-S", os.fspath(LIMITS_EXEC)]
    if limits.cpu_seconds:
        argv += ["--cpu", str(limits.cpu_seconds)]
    if limits.memory_mb:
        argv += ["--as", str(limits.memory_mb * 1024 * 1024)]
    if limits.open_files:
        argv += ["--nofile", str(limits.open_files)]
    if limits.max_processes:
        argv += ["--nproc-extra", str(limits.max_processes * NPROC_BACKSTOP_FACTOR)]
    if "LC_CTYPE" in env:
        argv += ["--lc-ctype", env["LC_CTYPE"]]
    else:
        argv.append("--no-lc-ctype")
    return [*argv, "--", *inner]
