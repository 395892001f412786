"""SandboxPolicy: how every agent command runs, decided once and carried to workers.

Built from the `[sandbox]` config section (`SandboxPolicy.from_config`), JSON-able
(`to_dict`/`from_dict`) so a job worker's spawn spec carries exactly the policy of the
session that started it. Levels:

- `none`: no environment filtering, no limits (the command still gets its own process
  group and a tree kill on timeout);
- `process` (default): environment policy, resource limits, process-count watchdog;
- `bwrap`: `process` plus bubblewrap (read-only root, writable workspace, private /tmp,
  hidden state root, no network unless `network = true`, own pid namespace).

`fallback` says what happens when `bwrap` is requested but cannot run: `refuse` (fail
closed: every command is refused) or `process`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bareagent.sandbox.limits import ResourceLimits

if TYPE_CHECKING:
    from bareagent.config import Config

log = logging.getLogger(__name__)

LEVELS = ("none", "process", "bwrap")
FALLBACKS = ("refuse", "process")
_LIMIT_KEYS = ("cpu_seconds", "memory_mb", "open_files", "max_processes")


class SandboxUnavailable(RuntimeError):
    """The configured sandbox cannot run here and the policy fails closed."""


def _str_tuple(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(f"sandbox {name} must be a list of strings")
    if not all(isinstance(v, str) for v in value):
        raise ValueError(f"sandbox {name} must be a list of strings")
    return tuple(value)


def _optional_path(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise ValueError(f"sandbox {name} must be a path")
    return os.fspath(value)


def default_hidden_paths() -> tuple[str, ...]:
    """BareAgent's own state base and config, which no command needs to see."""
    import platformdirs

    from bareagent.config import user_config_path
    from bareagent.orchestrator.state import state_base

    paths = [str(state_base()), str(user_config_path())]
    paths.append(platformdirs.user_config_dir("bareagent"))
    return tuple(dict.fromkeys(os.path.abspath(p) for p in paths))


def _state_root_for(workspace: str) -> str | None:
    from bareagent.orchestrator.state import state_root

    try:
        return str(state_root(workspace))
    except (ValueError, OSError):
        return None


@dataclass(frozen=True)
class SandboxPolicy:
    """Everything the runner needs to sandbox a command (defaults: the `process` level)."""

    level: str = "process"
    network: bool = False
    env_allow: tuple[str, ...] = ()
    env_deny: tuple[str, ...] = ()
    fallback: str = "refuse"
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    workspace: str | None = None
    state_root: str | None = None
    hidden_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(
                f"sandbox level must be one of {', '.join(LEVELS)}, not {self.level!r}"
            )
        if self.fallback not in FALLBACKS:
            raise ValueError(
                f"sandbox fallback must be one of {', '.join(FALLBACKS)}, not {self.fallback!r}"
            )
        if not isinstance(self.network, bool):
            raise ValueError("sandbox network must be true or false")
        if not isinstance(self.limits, ResourceLimits):
            raise ValueError("sandbox limits must be a ResourceLimits")
        object.__setattr__(self, "env_allow", _str_tuple(self.env_allow, "env_allow"))
        object.__setattr__(self, "env_deny", _str_tuple(self.env_deny, "env_deny"))
        object.__setattr__(self, "hidden_paths", _str_tuple(self.hidden_paths, "hidden_paths"))
        object.__setattr__(self, "workspace", _optional_path(self.workspace, "workspace"))
        object.__setattr__(self, "state_root", _optional_path(self.state_root, "state_root"))

    # -- construction

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        workspace: str | os.PathLike[str] | None = None,
        state_root: str | os.PathLike[str] | None = None,
    ) -> SandboxPolicy:
        """The policy of the `[sandbox]` section (plus the provider's `api_key_env`)."""
        section = config.section("sandbox")
        limits = ResourceLimits.from_dict({k: section.get(k) for k in _LIMIT_KEYS})
        deny: list[str] = []
        key_env = config.provider.get("api_key_env")
        if isinstance(key_env, str) and key_env.strip():
            deny.append(key_env.strip())
        policy = cls(
            level=section["level"],
            network=section["network"],
            env_allow=tuple(section["env_allow"]),
            env_deny=tuple(deny),
            fallback=section["fallback"],
            limits=limits,
            state_root=None if state_root is None else os.fspath(state_root),
        )
        return policy.for_workspace(workspace) if workspace is not None else policy

    def for_workspace(
        self,
        workspace: str | os.PathLike[str],
        *,
        state_root: str | os.PathLike[str] | None = None,
    ) -> SandboxPolicy:
        """This policy with workspace, state root and hidden paths filled in where unset."""
        ws = self.workspace or str(Path(workspace).resolve())
        root = self.state_root
        if root is None:
            root = os.fspath(state_root) if state_root is not None else _state_root_for(ws)
        hidden = self.hidden_paths or default_hidden_paths()
        return replace(self, workspace=ws, state_root=root, hidden_paths=hidden)

    # -- JSON

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-able), the inverse of `from_dict`."""
        return {
            "level": self.level,
            "network": self.network,
            "env_allow": list(self.env_allow),
            "env_deny": list(self.env_deny),
            "fallback": self.fallback,
            "limits": self.limits.to_dict(),
            "workspace": self.workspace,
            "state_root": self.state_root,
            "hidden_paths": list(self.hidden_paths),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SandboxPolicy:
        """Rebuild and validate; unknown keys are an error (ValueError)."""
        if not isinstance(data, Mapping):
            raise ValueError("sandbox policy must be a mapping")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown sandbox policy keys: {', '.join(unknown)}")
        values = dict(data)
        limits = values.pop("limits", {})
        if not isinstance(limits, Mapping):
            raise ValueError("sandbox limits must be a mapping")
        for name in ("env_allow", "env_deny", "hidden_paths"):
            if name in values:
                values[name] = _str_tuple(values[name], name)
        return cls(**values, limits=ResourceLimits.from_dict(limits))

    # -- queries

    def paths_to_hide(self) -> list[str]:
        """The state root and the other hidden paths, without duplicates."""
        paths = [self.state_root] if self.state_root else []
        return list(dict.fromkeys([*paths, *self.hidden_paths]))


DEFAULT_POLICY = SandboxPolicy()
