"""The `grep` tool: `rel:LINE:text` for every line matching a Python regular expression.

Semantics are those of a per-line `re.search` over each file's lines (split on `\\n`,
`\\r\\n` counts as one line ending), so `^`/`$` anchor to each line and nothing matches
across a line break. Files are visited in sorted path order, lines in order, and the
walk stops at 1000 matches. Skipped: files over 1 MiB (1_048_576 bytes is still read),
files that are not valid UTF-8 or cannot be read, symlinks, and the same directories as
glob. `include` filters candidate files with the glob rules of `_walk.compile_glob`.

Speed: each file is read once with a single `os.read`; the compiled pattern (MULTILINE)
searches the whole text, and only lines where a hit starts are checked per line, with
line numbers counted from offsets. That shortcut is exact unless the pattern can see
past a line boundary in ways MULTILINE does not model (lookarounds, `\\A`, `\\Z`,
`(?-m:...)`); such
patterns fall back to searching every line.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator

from bareagent.core.handlers._walk import compile_glob, iter_candidates, resolve_search_root
from bareagent.sandbox.paths import StrPath

MAX_FILE_BYTES = 1_048_576
MAX_MATCHES = 1000

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
)
# Constructs whose meaning at a line boundary differs between a per-line search and a
# MULTILINE whole-text search; `(?-m:...)` switches MULTILINE off inside the group.
_LINE_SENSITIVE = re.compile(r"\(\?(?:=|!|<[=!])|\\[AZ]|\(\?[aiLmsux]*-")


def _read_small_text(path: str) -> str | None:
    """The file's text, or None when it is too big, not regular, unreadable or not UTF-8."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        want = st.st_size + 1
        chunks = [os.read(fd, want)]
        total = len(chunks[0])
        # A short read of a regular file means EOF; keep going only if it was full
        # (the file grew since fstat), and give up once it is over the limit.
        while len(chunks[-1]) == want and total <= MAX_FILE_BYTES:
            chunks.append(os.read(fd, 65536))
            want = 65536
            total += len(chunks[-1])
    except OSError:
        return None
    finally:
        os.close(fd)
    if total > MAX_FILE_BYTES:
        return None
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.removeprefix("\ufeff")


def _lines_by_search(
    text: str, line_rx: re.Pattern[str], whole_rx: re.Pattern[str]
) -> Iterator[tuple[int, str]]:
    """Per-line matches, visiting only lines where a whole-text MULTILINE hit starts."""
    size = len(text)
    pos = 0
    lineno = 1
    counted_to = 0
    while pos < size:
        hit = whole_rx.search(text, pos)
        if hit is None:
            return
        line_start = text.rfind("\n", 0, hit.start()) + 1
        if line_start >= size:
            return  # an empty match after the final newline is not a line
        line_end = text.find("\n", hit.start())
        if line_end < 0:
            line_end = size
        lineno += text.count("\n", counted_to, line_start)
        counted_to = line_start
        line = text[line_start:line_end]
        # The hit may span lines; the line itself decides (and may match elsewhere).
        if line_rx.search(line):
            yield lineno, line
        pos = line_end + 1


def _lines_one_by_one(text: str, line_rx: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for lineno, line in enumerate(lines, 1):
        if line_rx.search(line):
            yield lineno, line


def grep_files(workspace: StrPath, pattern: str, path: str = ".", include: str = "") -> list[str]:
    """Return up to 1000 `rel:LINE:text` matches of `pattern`, sorted by path then line."""
    if not isinstance(pattern, str):
        raise ValueError("pattern must be a string")
    try:
        line_rx = re.compile(pattern)
        whole_rx = re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        return [f"Invalid regex pattern: {exc}"]
    except (OverflowError, RecursionError) as exc:
        return [f"Invalid regex pattern: {exc}"]
    if not isinstance(include, str):
        raise ValueError("include must be a string")
    matcher = compile_glob(include) if include else None
    root = resolve_search_root(workspace, path)
    per_line = _LINE_SENSITIVE.search(pattern) is not None
    results: list[str] = []
    for rel, file_path in iter_candidates(root, matcher):
        text = _read_small_text(file_path)
        if not text:
            continue
        if "\r\n" in text:
            text = text.replace("\r\n", "\n")
        hits = (
            _lines_one_by_one(text, line_rx)
            if per_line
            else _lines_by_search(text, line_rx, whole_rx)
        )
        for lineno, line in hits:
            results.append(f"{rel}:{lineno}:{line}")
            if len(results) >= MAX_MATCHES:
                return results
    return results
