"""Workspace path sandbox: map a user-supplied relative path to a real path inside it.

`safe_path` is lexical first (no filesystem access beyond resolving the workspace once),
then checks every existing component of the workspace-relative chain with `lstat`, so a
symlink anywhere on the way is refused even when it points back inside the workspace.
Windows path forms are refused on every OS, so a model cannot learn a spelling that only
escapes on one platform.

Returned paths are lexically normalised (`a/../b` -> `<ws>/b`); callers must use the
returned path, never the original string, so the OS never walks a `..` itself.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

StrPath = str | os.PathLike[str]

_DRIVE = re.compile(r"^[A-Za-z]:")
_SEPARATORS = re.compile(r"[\\/]")
_IS_WINDOWS = os.name == "nt"


def resolve_workspace(workspace: StrPath) -> Path:
    """Return the workspace as an absolute, symlink-free directory path."""
    root = Path(workspace).resolve()
    if not root.is_dir():
        raise NotADirectoryError(f"Workspace is not a directory: {workspace}")
    return root


def _check_form(raw: str) -> None:
    """Reject path spellings that are absolute or OS-specific before touching the disk."""
    if "\x00" in raw:
        raise PermissionError(f"Path contains a NUL byte: {raw!r}")
    if raw.startswith("~"):
        raise PermissionError(f"Home-relative paths are not allowed: {raw}")
    if raw.startswith(("\\\\", "//")):
        raise PermissionError(f"UNC/network paths are not allowed: {raw}")
    if raw.startswith(("/", "\\")) or os.path.isabs(raw):
        raise PermissionError(f"Absolute paths are not allowed: {raw}")
    if _DRIVE.match(raw):
        raise PermissionError(f"Drive-qualified paths are not allowed: {raw}")
    if _IS_WINDOWS and ":" in raw:
        # NTFS alternate data streams (`file:stream`) name data outside the file's content.
        raise PermissionError(f"Paths containing ':' are not allowed: {raw}")
    # Both separators count here: `..\..` must not pass just because this is POSIX.
    depth = 0
    for part in _SEPARATORS.split(raw):
        if part == "..":
            depth -= 1
            if depth < 0:
                raise PermissionError(f"Path escapes the workspace: {raw}")
        elif part not in ("", "."):
            depth += 1


def _normalise(raw: str) -> list[str]:
    """Split into components and fold `.`/`..` lexically (escapes were rejected already)."""
    parts: list[str] = []
    for part in Path(raw).parts:
        if part == "..":
            if not parts:
                raise PermissionError(f"Path escapes the workspace: {raw}")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return parts


def _is_link(st: os.stat_result) -> bool:
    if stat.S_ISLNK(st.st_mode):
        return True
    # Windows junctions and other reparse points redirect like symlinks but are not S_ISLNK.
    attrs = getattr(st, "st_file_attributes", 0)
    return bool(attrs & getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0))


def safe_path(path: StrPath, workspace: StrPath) -> Path:
    """Return the absolute path of `path` inside `workspace`, or raise PermissionError."""
    raw = os.fspath(path)
    if not isinstance(raw, str):
        raise TypeError(f"path must be a string, not {type(raw).__name__}")
    _check_form(raw)
    root = resolve_workspace(workspace)
    parts = _normalise(raw)
    current = root
    for part in parts:
        current = current / part
        try:
            st = os.lstat(current)
        except (FileNotFoundError, NotADirectoryError):
            # The rest of the chain does not exist yet; whatever gets created there is
            # created by our own tools as real directories/files.
            break
        if _is_link(st):
            rel = current.relative_to(root).as_posix()
            raise PermissionError(f"Symlinks are not allowed in workspace paths: {rel}")
    return root.joinpath(*parts)


def relative_posix(path: StrPath, workspace: StrPath) -> str:
    """Return `path` relative to the workspace as a POSIX string (`.` for the root)."""
    root = resolve_workspace(workspace)
    target = Path(path)
    if not target.is_absolute():
        target = root / target
    try:
        rel = target.relative_to(root)
    except ValueError:
        raise ValueError(f"Path is outside the workspace: {path}") from None
    text = rel.as_posix()
    return text if text else "."
