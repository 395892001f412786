"""Configuration: defaults < user config file < `<workspace>/.bareagent.toml` < flags.

The workspace file sits inside the directory the agent edits (and may come from a cloned
repository), so it may tighten permissions and the sandbox but never loosen them: a less
strict mode, extra allow rules, a weaker sandbox level, network access, environment
allow-list entries, a fallback or looser limits from it are ignored with a warning. The
user file and flags are trusted.
"""

from __future__ import annotations

import copy
import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

log = logging.getLogger(__name__)

WORKSPACE_CONFIG_NAME = ".bareagent.toml"
CONFIG_ENV = "BAREAGENT_CONFIG"


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names file and key."""


_Number = (int, float)

# section -> key -> (accepted types, default)
SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], Any]]] = {
    "provider": {
        "name": ((str,), "anthropic"),
        "model": ((str,), None),
        "api_key": ((str,), None),
        "api_key_env": ((str,), None),
        "base_url": ((str,), None),
        "api": ((str,), "chat"),
        "max_tokens": ((int,), 4096),
        "thinking_budget": ((int,), None),
        "temperature": (_Number, None),
        "timeout": (_Number, 600.0),
        "max_retries": ((int,), 2),
    },
    "permission": {
        "mode": ((str,), "default"),
        "allow": ((list,), []),
        "deny": ((list,), []),
    },
    "subagent": {
        "max_depth": ((int,), 3),
        "default_type": ((str,), "general-purpose"),
    },
    "agent": {
        "max_iterations": ((int,), 200),
        "stream": ((bool,), True),
        "max_history_chars": ((int,), 400_000),
    },
    "background": {
        "max_concurrent": ((int,), 4),
    },
    "sandbox": {
        "level": ((str,), "process"),
        "network": ((bool,), False),
        "env_allow": ((list,), []),
        "fallback": ((str,), "refuse"),
        "cpu_seconds": ((int,), None),
        "memory_mb": ((int,), None),
        "open_files": ((int,), None),
        "max_processes": ((int,), None),
    },
}

_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("permission", "mode"): ("default", "auto", "plan", "bypass"),
    ("provider", "api"): ("chat", "responses"),
    ("sandbox", "level"): ("none", "process", "bwrap"),
    ("sandbox", "fallback"): ("refuse", "process"),
}
_STRICTNESS = {"bypass": 0, "auto": 1, "default": 2, "plan": 3}
_SANDBOX_STRICTNESS = {"none": 0, "process": 1, "bwrap": 2}
_SANDBOX_LIMITS = ("cpu_seconds", "memory_mb", "open_files", "max_processes")


@dataclass
class Config:
    """Merged configuration; `data[section][key]` with every key present."""

    data: dict[str, dict[str, Any]]
    sources: tuple[str, ...] = ()

    def section(self, name: str) -> dict[str, Any]:
        """Return one section (a live dict)."""
        return self.data[name]

    def get(self, section: str, key: str) -> Any:
        """Return one value."""
        return self.data[section][key]

    @property
    def provider(self) -> dict[str, Any]:
        """The `[provider]` section."""
        return self.data["provider"]


def defaults() -> dict[str, dict[str, Any]]:
    """Every section with its default values."""
    return {
        section: {key: copy.deepcopy(default) for key, (_t, default) in keys.items()}
        for section, keys in SCHEMA.items()
    }


def user_config_path() -> Path:
    """The user's config file: `$BAREAGENT_CONFIG`, else the platform config dir."""
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir("bareagent")) / "config.toml"


def validate(raw: Mapping[str, Any], origin: str) -> dict[str, dict[str, Any]]:
    """Check sections, keys, types and choices; raise ConfigError naming the bad key."""
    clean: dict[str, dict[str, Any]] = {}
    for section, values in raw.items():
        if section not in SCHEMA:
            raise ConfigError(f"{origin}: unknown section [{section}]")
        if not isinstance(values, Mapping):
            raise ConfigError(f"{origin}: [{section}] must be a table")
        clean[section] = {}
        for key, value in values.items():
            clean[section][key] = _check_value(section, key, value, origin)
    return clean


def _check_value(section: str, key: str, value: Any, origin: str) -> Any:
    where = f"{origin}: [{section}] {key}"
    if key not in SCHEMA[section]:
        raise ConfigError(f"{origin}: [{section}] unknown key {key!r}")
    types, _default = SCHEMA[section][key]
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        names = " or ".join(t.__name__ for t in types)
        raise ConfigError(f"{where} must be {names}, got {type(value).__name__}")
    if isinstance(value, list) and not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    if isinstance(value, str):
        value = value.strip()
        choices = _CHOICES.get((section, key))
        if choices is not None:
            value = value.lower()
            if value not in choices:
                raise ConfigError(f"{where} must be one of {', '.join(choices)}, got {value!r}")
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        raise ConfigError(f"{where} must not be negative")
    return value


def read_toml(path: Path) -> dict[str, dict[str, Any]]:
    """Read and validate one TOML file; a missing file is empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return validate(raw, str(path))


def _restrict_workspace_sandbox(
    layer: dict[str, dict[str, Any]], current: dict[str, Any], origin: str
) -> None:
    box = layer.get("sandbox")
    if not box:
        return
    from bareagent.sandbox.limits import not_looser

    dropped = []
    level = box.get("level")
    if level is not None and _SANDBOX_STRICTNESS[level] < _SANDBOX_STRICTNESS[current["level"]]:
        dropped.append(f"level {level!r}")
        del box["level"]
    if box.get("network") and not current["network"]:
        dropped.append("network = true")
        del box["network"]
    if box.get("env_allow"):
        dropped.append("env_allow")
        del box["env_allow"]
    if box.get("fallback") == "process" and current["fallback"] != "process":
        dropped.append("fallback 'process'")
        del box["fallback"]
    for key in _SANDBOX_LIMITS:
        if key in box and not not_looser(key, box[key], current[key]):
            dropped.append(key)
            del box[key]
    if dropped:
        log.warning("%s: ignoring looser [sandbox] settings: %s", origin, ", ".join(dropped))


def _restrict_workspace(layer: dict[str, dict[str, Any]], current_mode: str, origin: str) -> None:
    perm = layer.get("permission")
    if not perm:
        return
    mode = perm.get("mode")
    if mode is not None and _STRICTNESS[mode] < _STRICTNESS[current_mode]:
        log.warning(
            "%s: ignoring permission mode %r (less strict than %r)", origin, mode, current_mode
        )
        del perm["mode"]
    if perm.get("allow"):
        log.warning("%s: ignoring [permission] allow rules from the workspace file", origin)
        del perm["allow"]


def load_config(
    workspace: str | Path | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    user_file: Path | None = None,
) -> Config:
    """Merge defaults, the user file, the workspace file and flag overrides."""
    data = defaults()
    sources: list[str] = []
    user_path = user_file or user_config_path()
    layers: list[tuple[str, dict[str, dict[str, Any]], bool]] = [
        (str(user_path), read_toml(user_path), False)
    ]
    if workspace is not None:
        ws_path = Path(workspace) / WORKSPACE_CONFIG_NAME
        layers.append((str(ws_path), read_toml(ws_path), True))
    for origin, layer, untrusted in layers:
        if not layer:
            continue
        if untrusted:
            _restrict_workspace(layer, data["permission"]["mode"], origin)
            _restrict_workspace_sandbox(layer, data["sandbox"], origin)
        sources.append(origin)
        for section, values in layer.items():
            if section == "permission" and "deny" in values:
                values = {**values, "deny": data["permission"]["deny"] + values["deny"]}
            data[section].update(values)
    if overrides:
        flags = validate(
            {s: {k: v for k, v in kv.items() if v is not None} for s, kv in overrides.items()},
            "command line",
        )
        for section, values in flags.items():
            data[section].update(values)
    return Config(data=data, sources=tuple(sources))
