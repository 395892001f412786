"""Teammate definitions persisted in `<workspace>/.team.json` (SPEC §7).

The store is one JSON object, `{"version": 1, "teammates": [definition, ...]}`, where a
definition is `{name, role, system_prompt, provider_config}`. Every operation holds
`filelock.FileLock("<path>.lock")`; writes go to a temp file that is fsynced and
`os.replace`d over the store, so readers see the old or the new file, never a torn one.
A store that cannot be understood raises `TeamStoreError` and is never overwritten.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

TEAM_FILE = ".team.json"
STORE_VERSION = 1
LOCK_TIMEOUT = 30.0
NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_NAME = 64
MAX_ROLE = 200
RESERVED_NAMES = frozenset({"main"})
# A workspace file may be committed to a repository: secrets do not belong in it.
FORBIDDEN_PROVIDER_KEYS = frozenset({"api_key"})


class TeamStoreError(RuntimeError):
    """`.team.json` is unreadable or malformed; it is left untouched."""


class TeamError(ValueError):
    """A team operation was refused; `str()` is one line for the user."""


@dataclass
class TeammateDefinition:
    """One registered teammate."""

    name: str
    role: str
    system_prompt: str = ""
    provider_config: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict."""
        return asdict(self)


def check_name(name: object) -> str:
    """A teammate name: `^[A-Za-z0-9_-]+$`, at most 64 characters, not `main`."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise TeamError(f"Invalid teammate name {name!r}: use only letters, digits, '_' and '-'")
    if len(name) > MAX_NAME:
        raise TeamError(f"Invalid teammate name {name!r}: at most {MAX_NAME} characters")
    if name.lower() in RESERVED_NAMES:
        raise TeamError(f"Invalid teammate name {name!r}: 'main' is the user's session")
    return name


def check_role(role: object) -> str:
    """A non-empty one-line role."""
    if not isinstance(role, str) or not role.strip():
        raise TeamError("role must be a non-empty string")
    clean = " ".join(role.split())
    if len(clean) > MAX_ROLE:
        raise TeamError(f"role must be at most {MAX_ROLE} characters")
    return clean


def check_system_prompt(prompt: object) -> str:
    """Any text (may be empty)."""
    if prompt is None:
        return ""
    if not isinstance(prompt, str):
        raise TeamError("system_prompt must be a string")
    return prompt.strip()


def check_provider_config(value: object) -> dict[str, Any]:
    """Overrides of `[provider]`: known keys with the config file's types, no `api_key`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TeamError("provider_config must be an object of [provider] settings")
    bad = sorted(FORBIDDEN_PROVIDER_KEYS & set(value))
    if bad:
        raise TeamError(
            f"provider_config may not contain {bad[0]!r}: name an environment variable "
            "with api_key_env instead"
        )
    from bareagent.config import ConfigError, validate

    try:
        return dict(validate({"provider": dict(value)}, "provider_config")["provider"])
    except ConfigError as exc:
        raise TeamError(str(exc)) from None


def _definition_from(data: object, index: int, path: Path) -> TeammateDefinition:
    def bad(problem: str) -> TeamStoreError:
        return TeamStoreError(f"Corrupt team file {path}: teammate #{index} {problem}")

    if not isinstance(data, dict):
        raise bad("is not an object")
    unknown = sorted(set(data) - {"name", "role", "system_prompt", "provider_config"})
    if unknown:
        raise bad(f"has unknown key {unknown[0]!r}")
    try:
        return TeammateDefinition(
            name=check_name(data.get("name")),
            role=check_role(data.get("role")),
            system_prompt=check_system_prompt(data.get("system_prompt", "")),
            provider_config=check_provider_config(data.get("provider_config")),
        )
    except TeamError as exc:
        raise bad(f"is invalid: {exc}") from None


class TeammateManager:
    """Register, update, remove and read teammate definitions (multi-process safe)."""

    def __init__(self, workspace: str | os.PathLike[str]) -> None:
        self.workspace = Path(workspace).resolve()
        self.path = self.workspace / TEAM_FILE
        self.lock_path = Path(str(self.path) + ".lock")

    # -- storage -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # A fresh lock object per operation: nothing is shared across fork() or threads.
        lock = FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT)
        try:
            lock.acquire()
        except Timeout:
            raise TeamStoreError(
                f"Team file {self.path} is busy: could not lock {self.lock_path} "
                f"within {LOCK_TIMEOUT:g} seconds"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def _load(self) -> builtins.list[TeammateDefinition]:
        """Read and validate the whole store; call with the lock held."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise TeamStoreError(f"Cannot read team file {self.path}: {exc.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TeamStoreError(f"Corrupt team file {self.path}: not UTF-8 text") from None
        if not text.strip():
            return []
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TeamStoreError(
                f"Corrupt team file {self.path}: invalid JSON ({exc.msg} at line {exc.lineno} "
                f"column {exc.colno})"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("teammates"), builtins.list):
            raise TeamStoreError(f"Corrupt team file {self.path}: missing 'teammates' list")
        found = [_definition_from(d, i, self.path) for i, d in enumerate(data["teammates"])]
        seen: set[str] = set()
        for definition in found:
            key = definition.name.lower()
            if key in seen:
                raise TeamStoreError(
                    f"Corrupt team file {self.path}: duplicate teammate {definition.name!r}"
                )
            seen.add(key)
        return found

    def _save(self, definitions: builtins.list[TeammateDefinition]) -> None:
        """Atomically replace the store; call with the lock held."""
        data = {"version": STORE_VERSION, "teammates": [d.to_dict() for d in definitions]}
        payload = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.workspace)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.chmod(tmp, self.path.stat().st_mode & 0o777)
            except FileNotFoundError:
                os.chmod(tmp, 0o644)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @staticmethod
    def _index(definitions: builtins.list[TeammateDefinition], name: str) -> int | None:
        for i, definition in enumerate(definitions):
            if definition.name == name:
                return i
        return None

    # -- public API --------------------------------------------------------------------

    def register(
        self,
        name: str,
        role: str,
        system_prompt: str = "",
        provider_config: Mapping[str, Any] | None = None,
    ) -> TeammateDefinition:
        """Add a teammate; a name taken (case-insensitively) is a TeamError."""
        definition = TeammateDefinition(
            check_name(name),
            check_role(role),
            check_system_prompt(system_prompt),
            check_provider_config(provider_config),
        )
        with self._locked():
            definitions = self._load()
            taken = [d.name for d in definitions if d.name.lower() == name.lower()]
            if taken:
                raise TeamError(
                    f"Teammate {taken[0]} is already registered (update or remove it first)."
                )
            definitions.append(definition)
            self._save(definitions)
        return copy.deepcopy(definition)

    def update(
        self,
        name: str,
        *,
        role: str | None = None,
        system_prompt: str | None = None,
        provider_config: Mapping[str, Any] | None = None,
    ) -> TeammateDefinition:
        """Change the given fields of a registered teammate."""
        check_name(name)
        if role is None and system_prompt is None and provider_config is None:
            raise TeamError("role, system_prompt or provider_config is required")
        new_role = check_role(role) if role is not None else None
        new_prompt = check_system_prompt(system_prompt) if system_prompt is not None else None
        new_provider = (
            check_provider_config(provider_config) if provider_config is not None else None
        )
        with self._locked():
            definitions = self._load()
            index = self._index(definitions, name)
            if index is None:
                raise TeamError(unknown_teammate(name))
            definition = definitions[index]
            if new_role is not None:
                definition.role = new_role
            if new_prompt is not None:
                definition.system_prompt = new_prompt
            if new_provider is not None:
                definition.provider_config = new_provider
            self._save(definitions)
        return copy.deepcopy(definition)

    def remove(self, name: str) -> TeammateDefinition:
        """Forget a teammate (a running process is not stopped by this)."""
        check_name(name)
        with self._locked():
            definitions = self._load()
            index = self._index(definitions, name)
            if index is None:
                raise TeamError(unknown_teammate(name))
            removed = definitions.pop(index)
            self._save(definitions)
        return removed

    def get(self, name: str) -> TeammateDefinition:
        """One definition; an unknown name is a TeamError."""
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise TeamError(unknown_teammate(name))
        with self._locked():
            definitions = self._load()
        index = self._index(definitions, name)
        if index is None:
            raise TeamError(unknown_teammate(name))
        return definitions[index]

    def list(self) -> builtins.list[TeammateDefinition]:
        """Every definition in registration order."""
        with self._locked():
            return self._load()

    def names(self) -> builtins.list[str]:
        """Registered names (the mailbox's known agents, with `main`)."""
        return [d.name for d in self.list()]


def unknown_teammate(name: object) -> str:
    """The one-line error for a name that is not registered."""
    return (
        f"Unknown teammate {name!r}: register it first "
        "(`bareagent team register NAME ROLE SYSTEM_PROMPT`)."
    )
