"""The `glob` tool: sorted, de-duplicated workspace-relative paths of matching files.

Pattern rules (see `_walk.compile_glob`): a pattern without `/` matches base names at any
depth (`*.py` recurses); a pattern with `/` matches the path relative to the search path,
where `*`/`?`/`[...]` stay within one segment and a `**` segment spans any number of
directories. `path` may be a directory or a single file. .git, .pytest_cache, .venv,
__pycache__ and node_modules are pruned unless `path` itself lies inside one of them.
Symlinks are neither followed nor listed.
"""

from __future__ import annotations

from bareagent.core.handlers._walk import compile_glob, iter_candidates, resolve_search_root
from bareagent.sandbox.paths import StrPath


def glob_files(workspace: StrPath, pattern: str, path: str = ".") -> list[str]:
    """Return the sorted workspace-relative POSIX paths of files matching `pattern`."""
    matcher = compile_glob(pattern)
    root = resolve_search_root(workspace, path)
    return sorted({rel for rel, _ in iter_candidates(root, matcher)})
