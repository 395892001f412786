"""The `read_file` tool: numbered lines of a UTF-8 workspace file.

Lines are split on `\\n` only (a `\\r\\n` pair counts as one line ending), the same rule
grep uses, so line numbers agree between the two tools. A leading BOM is not shown.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from bareagent.sandbox.paths import StrPath, relative_posix, safe_path

# O_NOFOLLOW closes the race where the last component becomes a symlink after safe_path
# checked it; O_NONBLOCK stops a FIFO from blocking the open before we can reject it.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
)


def _non_negative(name: str, value: object) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return value


def read_bytes(path: Path, rel: str) -> bytes:
    """Read a regular file without following a final symlink; clear errors otherwise."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise FileNotFoundError(f"File not found: {rel}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"Is a directory: {rel}") from None
    except NotADirectoryError:
        raise FileNotFoundError(f"File not found: {rel}") from None
    except OSError as exc:
        if os.path.islink(path):
            raise PermissionError(f"Symlinks are not allowed in workspace paths: {rel}") from None
        raise OSError(f"Cannot open {rel}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"Is a directory: {rel}")
        if not stat.S_ISREG(mode):
            raise ValueError(f"Not a regular file: {rel}")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path, rel: str) -> str:
    """Read a regular file as strict UTF-8 (ValueError naming the file otherwise)."""
    data = read_bytes(path, rel)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"File is not valid UTF-8 text: {rel} (invalid byte at offset {exc.start})"
        ) from None


def split_lines(text: str) -> list[str]:
    """Split on `\\n` (and `\\r\\n`); a final line ending does not start another line."""
    if not text:
        return []
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def read_file(workspace: StrPath, file_path: str, offset: int = 0, limit: int | None = None) -> str:
    """Return lines `offset+1 ...` of a workspace file as `N: text`, at most `limit` lines."""
    start = _non_negative("offset", offset)
    count = None if limit is None else _non_negative("limit", limit)
    path = safe_path(file_path, workspace)
    rel = relative_posix(path, workspace)
    lines = split_lines(read_text(path, rel).removeprefix("\ufeff"))
    end = len(lines) if count is None else start + count
    return "\n".join(f"{n}: {line}" for n, line in enumerate(lines[start:end], start + 1))
