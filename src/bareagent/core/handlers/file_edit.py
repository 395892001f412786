"""The `edit_file` tool: replace the first occurrence of a text, written atomically."""

from __future__ import annotations

from bareagent.core.handlers.file_read import read_text
from bareagent.core.handlers.file_write import atomic_write_text
from bareagent.sandbox.paths import StrPath, relative_posix, safe_path


def edit_file(workspace: StrPath, file_path: str, old_text: str, new_text: str) -> str:
    """Replace the first occurrence of `old_text` with `new_text` in a workspace file."""
    if not isinstance(old_text, str) or not isinstance(new_text, str):
        raise ValueError("old_text and new_text must be strings")
    if not old_text:
        raise ValueError("old_text must not be empty")
    path = safe_path(file_path, workspace)
    rel = relative_posix(path, workspace)
    text = read_text(path, rel)
    if old_text not in text:
        raise ValueError("old_text not found in file")
    atomic_write_text(path, text.replace(old_text, new_text, 1))
    return f"Edited {rel}"
