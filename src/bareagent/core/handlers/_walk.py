"""Shared file walking and glob matching for the glob and grep tools.

Walking: `os.scandir`, never following symlinks (symlinked files and directories are not
listed and not entered), never descending into SKIP_DIRS — they are pruned, not filtered
afterwards. Files are produced in the sorted order of their relative POSIX paths, so a
search that stops early (grep's match cap) is still deterministic. Only regular files
are produced; FIFOs, sockets and devices are ignored.

Skip dirs: when the search path itself lies inside a skipped directory (e.g. `.venv` or
`node_modules/pkg`), the caller chose it explicitly and nothing below it is pruned.

Pattern rules: see `compile_glob`.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bareagent.sandbox.paths import StrPath, relative_posix, safe_path

SKIP_DIRS: frozenset[str] = frozenset(
    {".git", ".pytest_cache", ".venv", "__pycache__", "node_modules"}
)

Matcher = Callable[[tuple[str, ...], str], bool]
"""`matcher(dir_parts, name)`: dir_parts are the directories from the search root."""

_SUFFIX_ONLY = re.compile(r"\*[^*?\[\]]+")
_IS_WINDOWS = os.name == "nt"
_REPARSE = getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0)


@dataclass(frozen=True)
class SearchRoot:
    """A resolved, sandbox-checked search path."""

    path: Path
    rel: str
    is_file: bool
    prune: bool

    def output_path(self, rel_dir: str, name: str) -> str:
        """Workspace-relative POSIX path of a file found below this root."""
        if self.is_file:
            return self.rel
        return f"{rel_dir}{name}" if self.rel == "." else f"{self.rel}/{rel_dir}{name}"


def resolve_search_root(workspace: StrPath, path: str) -> SearchRoot:
    """Check `path` with the sandbox and describe it as a search root."""
    target = safe_path(path, workspace)
    rel = relative_posix(target, workspace)
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"Path not found: {rel}") from None
    prune = not any(part in SKIP_DIRS for part in rel.split("/"))
    return SearchRoot(target, rel, stat.S_ISREG(mode), prune)


def _segment_matcher(segment: str) -> Callable[[str], bool]:
    if _SUFFIX_ONLY.fullmatch(segment):
        suffix = segment[1:]
        return lambda name: name.endswith(suffix)
    if not any(c in segment for c in "*?["):
        return segment.__eq__
    regex = re.compile(fnmatch.translate(segment))
    return lambda name: regex.match(name) is not None


def _split_pattern(pattern: str) -> list[str]:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("pattern must be a non-empty string")
    if "\x00" in pattern:
        raise ValueError("pattern must not contain NUL bytes")
    if pattern.startswith("/") or re.match(r"^[A-Za-z]:", pattern):
        raise ValueError(f"glob pattern must be relative to the search path: {pattern}")
    segments: list[str] = []
    for seg in pattern.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            raise ValueError(f"glob pattern must not contain '..': {pattern}")
        if seg == "**" and segments and segments[-1] == "**":
            continue
        segments.append(seg)
    if not segments:
        raise ValueError(f"glob pattern matches no files: {pattern}")
    return segments


def compile_glob(pattern: str) -> Matcher:
    """Compile a glob pattern into a matcher for files below a search root.

    - No `/` in the pattern: it is matched against the file's base name at any depth, so
      `*.py` finds `a.py` and `src/pkg/b.py`.
    - With `/`: it is matched against the path relative to the search root, segment by
      segment. `*`, `?` and `[...]` never cross a `/`; a segment that is exactly `**`
      matches zero or more directories. `src/*.py` matches `src/a.py` but not
      `src/x/a.py`; `src/**/*.py` matches both; `**/test_*.py` matches at any depth.
    - `./*.py` has a `/`, so it matches only the search root's own `.py` files. A
      trailing `/` means everything below: `src/` is `src/**`.
    - fnmatch syntax, case-sensitive; `*` also matches names starting with a dot.
      Absolute patterns and `..` segments raise ValueError.
    """
    segments = _split_pattern(pattern)
    if pattern.endswith("/") and segments[-1] != "**":
        segments.append("**")
    if "/" not in pattern:
        match_name = _segment_matcher(segments[0])
        return lambda _parts, name: match_name(name)
    matchers = [None if seg == "**" else _segment_matcher(seg) for seg in segments]
    fixed_length = None not in matchers
    size = len(matchers)

    def closure(states: set[int]) -> set[int]:
        # `**` may match zero directories: a state at `**` also stands for the one after.
        result = set(states)
        for state in states:
            while state < size and matchers[state] is None:
                state += 1
                result.add(state)
        return result

    def match_path(parts: tuple[str, ...], name: str) -> bool:
        if fixed_length and len(parts) + 1 != size:
            return False
        states = closure({0})
        for part in (*parts, name):
            advanced: set[int] = set()
            for state in states:
                if state >= size:
                    continue
                seg_match = matchers[state]
                if seg_match is None:
                    advanced.add(state)
                elif seg_match(part):
                    advanced.add(state + 1)
            if not advanced:
                return False
            states = closure(advanced)
        return size in states

    return match_path


def _is_reparse(entry: os.DirEntry[str]) -> bool:
    try:
        attrs = getattr(entry.stat(follow_symlinks=False), "st_file_attributes", 0)
    except OSError:
        return True
    return bool(attrs & _REPARSE)


def _entries(directory: str, skip: frozenset[str]) -> list[tuple[str, str, bool, str]]:
    """(sort key, name, is_dir, path) for the subdirectories and regular files here."""
    found: list[tuple[str, str, bool, str]] = []
    try:
        with os.scandir(directory) as it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name in skip or (_IS_WINDOWS and _is_reparse(entry)):
                            continue
                        # `name/` sorts a directory's files where their full paths sort.
                        found.append((entry.name + "/", entry.name, True, entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        found.append((entry.name, entry.name, False, entry.path))
                except OSError:
                    continue
    except OSError:
        return []
    found.sort()
    return found


def walk_files(root: str, *, prune: bool) -> Iterator[tuple[tuple[str, ...], str, str, str]]:
    """Yield (dir_parts, rel_dir, name, path) per regular file, in sorted path order.

    `rel_dir` is `""` or the POSIX directory prefix ending in `/`, relative to `root`.
    """
    skip = SKIP_DIRS if prune else frozenset()
    stack: list[tuple[Iterator[tuple[str, str, bool, str]], tuple[str, ...], str]] = [
        (iter(_entries(root, skip)), (), "")
    ]
    while stack:
        entries, parts, rel_dir = stack[-1]
        for _key, name, is_dir, path in entries:
            if is_dir:
                stack.append((iter(_entries(path, skip)), (*parts, name), f"{rel_dir}{name}/"))
                break
            yield parts, rel_dir, name, path
        else:
            stack.pop()


def iter_candidates(root: SearchRoot, matcher: Matcher | None) -> Iterator[tuple[str, str]]:
    """Yield (workspace-relative output path, filesystem path) of matching files."""
    if root.is_file:
        if matcher is None or matcher((), root.path.name):
            yield root.rel, str(root.path)
        return
    for parts, rel_dir, name, path in walk_files(str(root.path), prune=root.prune):
        if matcher is None or matcher(parts, name):
            yield root.output_path(rel_dir, name), path
