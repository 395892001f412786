"""The `write_file` tool, and the atomic write that `edit_file` shares.

Writes go to a temporary file in the same directory which then replaces the target with
`os.replace`, so a crash leaves either the old or the new content, never half a file.
An existing file keeps its permission bits; a new one gets the usual 0o666 & ~umask.
`os.replace` swaps the directory entry, so a hard link to the old file keeps the old text.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from bareagent.sandbox.paths import StrPath, relative_posix, safe_path

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    while True:
        temp = directory / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            # Mode 0o666 lets the kernel apply the umask, like a normal open() would.
            return os.open(temp, _CREATE_FLAGS, 0o666), temp
        except FileExistsError:
            continue


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) atomically, keeping an existing file's mode."""
    try:
        existing: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        existing = None
    fd, temp = _create_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        if existing is not None:
            os.chmod(temp, existing)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def prepare_parent(path: Path, workspace: StrPath) -> None:
    """Create the parent directories of `path`; clear errors when a parent is a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        parent = relative_posix(path.parent, workspace)
        raise NotADirectoryError(f"A parent of the path is not a directory: {parent}") from None


def write_file(workspace: StrPath, file_path: str, content: str) -> str:
    """Overwrite (or create) a workspace file with `content`, creating parent directories."""
    if not isinstance(content, str):
        raise ValueError(f"content must be a string, got {type(content).__name__}")
    path = safe_path(file_path, workspace)
    rel = relative_posix(path, workspace)
    if path.is_dir():
        raise IsADirectoryError(f"Is a directory: {rel}")
    prepare_parent(path, workspace)
    if path.exists() and not path.is_file():
        raise ValueError(f"Not a regular file: {rel}")
    atomic_write_text(path, content)
    return f"Wrote {len(content)} characters to {rel}"
