"""Property: no generated path makes safe_path or a file tool touch anything outside.

Every example throws one generated path (`..` chains, absolute and drive paths, `~`, NUL,
Unicode look-alikes of `/` and `.`, mixed separators, symlinks created on the fly that
point outside) at safe_path, read_file, write_file, edit_file, glob and grep. Outside
the workspace sit sentinel files with known content; after every example their content
and mtime must be unchanged, no new entry may have appeared outside the workspace, and
no tool output may contain a sentinel's content.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bareagent.core.handlers.file_edit import edit_file
from bareagent.core.handlers.file_read import read_file
from bareagent.core.handlers.file_write import write_file
from bareagent.core.handlers.glob_search import glob_files
from bareagent.core.handlers.grep_search import grep_files
from bareagent.sandbox.paths import safe_path

SENTINEL = "SENTINEL-OUTSIDE"
LINK_NAMES = ("link_dir", "link_file", "link_abs", "link_up", "sub/link_deep")
SEGMENTS = (
    "..",
    ".",
    "",
    "...",
    "a.txt",
    "sub",
    "b.txt",
    "new.txt",
    "outside",
    "secret.txt",
    "ws2",
    "sibling.txt",
    *LINK_NAMES,
    "~",
    "~root",
    "\uff0e\uff0e",  # fullwidth full stops
    "\u2025",  # two dot leader
    "\u2024",  # one dot leader
    "\u2024\u2024",
    "\uff0f",  # fullwidth solidus
    "\u2215",  # division slash
    "\u2044",  # fraction slash
    "\uff3c",  # fullwidth reverse solidus
    "..\u200b",  # zero-width space
    ".\u0338",
    "\x00",
    "a\x00b",
    "C:",
    "con",
    "%2e%2e",
    "a.txt:stream",
)
SEPARATORS = ("/", "\\", "//", "/./", "\\\\", "\uff0f", "\u2215", "\u2044")


@dataclass
class Arena:
    """A workspace with sentinels around it (siblings, a prefix-named dir, HOME)."""

    base: Path
    ws: Path
    outside: Path

    def prefixes(self) -> list[str]:
        return [
            "",
            "",
            "./",
            "/",
            "\\",
            "~/",
            "~",
            "C:",
            "C:\\",
            "c:/",
            "\\\\server\\share\\",
            "//server/share/",
            "\\\\?\\C:\\",
            "file:",
            f"{self.base}/",
            f"{self.outside}/",
            f"{self.ws}/",
            f"{self.ws}/../",
            f"{self.ws}2/",
        ]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshot(arena: Arena) -> dict[str, tuple[Any, ...]]:
    """Everything outside the workspace: entries under base, plus HOME's top level."""
    state: dict[str, tuple[Any, ...]] = {}
    for root, dirs, files in os.walk(arena.base, followlinks=False):
        if Path(root) == arena.ws:
            dirs[:] = []
            continue
        for name in dirs + files:
            path = Path(root) / name
            if path == arena.ws:
                continue
            st = path.lstat()
            if path.is_file() and not path.is_symlink():
                state[str(path)] = ("f", st.st_mtime_ns, st.st_size, _digest(path))
            else:
                state[str(path)] = ("d", st.st_mode)
    home = Path(os.environ["HOME"])
    for entry in home.iterdir():
        st = entry.lstat()
        state[f"HOME:{entry.name}"] = (st.st_mode, st.st_mtime_ns if entry.is_file() else 0)
    return state


@pytest.fixture()
def arena(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Arena:
    base = tmp_path.resolve()
    ws = base / "ws"
    outside = base / "outside"
    (ws / "sub").mkdir(parents=True)
    (ws / "a.txt").write_text("alpha\n")
    (ws / "sub" / "b.txt").write_text("beta\n")
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text(f"{SENTINEL} secret\n")
    (outside / "sub" / "secret2.txt").write_text(f"{SENTINEL} deep\n")
    (base / "sibling.txt").write_text(f"{SENTINEL} sibling\n")
    (base / "ws2").mkdir()  # shares the workspace's name as a prefix
    (base / "ws2" / "a.txt").write_text(f"{SENTINEL} prefix\n")
    home = Path(os.environ["HOME"])
    (home / "secret.txt").write_text(f"{SENTINEL} home\n")
    # Relative paths must never be resolved against the process's cwd.
    cwd = base / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return Arena(base, ws, outside)


def _link_targets(arena: Arena) -> list[str]:
    return [
        str(arena.outside),
        str(arena.outside / "secret.txt"),
        "../outside",
        "../outside/secret.txt",
        "../../outside",
        "/",
        str(arena.base),
        str(arena.base / "ws2"),
    ]


paths = st.tuples(
    st.integers(0, 18),  # prefix index
    st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=6),
    st.sampled_from(SEPARATORS),
    st.one_of(st.none(), st.tuples(st.sampled_from(LINK_NAMES), st.integers(0, 7))),
    st.one_of(st.none(), st.text(min_size=1, max_size=12)),
)


def _calls(ws: Path, p: str) -> list[tuple[str, Callable[[], Any]]]:
    return [
        ("read_file", lambda: read_file(ws, p)),
        ("write_file", lambda: write_file(ws, p, "PWNED\n")),
        ("edit_file", lambda: edit_file(ws, p, SENTINEL, "PWNED")),
        ("glob pattern", lambda: glob_files(ws, p)),
        ("glob path", lambda: glob_files(ws, "**/*", path=p)),
        ("grep path", lambda: grep_files(ws, "SENTINEL", path=p)),
        ("grep include", lambda: grep_files(ws, "SENTINEL", include=p)),
    ]


def _check_output(name: str, p: str, out: Any, ws: Path) -> None:
    text = out if isinstance(out, str) else "\n".join(map(str, out or []))
    assert SENTINEL not in text, f"{name}({p!r}) leaked outside content: {text[:200]!r}"
    if name.startswith(("glob", "grep")):
        for line in out:
            rel = str(line).split(":", 1)[0] if name.startswith("grep") else str(line)
            real = Path(os.path.realpath(ws / rel))
            assert real.is_relative_to(ws), f"{name}({p!r}) listed {line!r} outside"


@pytest.mark.timeout(60)
@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=paths)
def test_no_path_escapes_the_workspace(arena: Arena, case: tuple[Any, ...]) -> None:
    prefix_i, segments, sep, link, raw = case
    ws = arena.ws
    if link is not None:
        name, target_i = link
        link_path = ws / name
        if not os.path.lexists(link_path):
            os.symlink(_link_targets(arena)[target_i], link_path)
    p = raw if raw is not None else arena.prefixes()[prefix_i] + sep.join(segments)
    before = _snapshot(arena)

    try:
        result = safe_path(p, ws)
    except (PermissionError, ValueError, TypeError):
        event("safe_path: refused")
    else:
        event("safe_path: accepted")
        assert result.is_relative_to(ws)
        assert Path(os.path.realpath(result)).is_relative_to(ws), f"safe_path({p!r}) -> {result}"

    for name, call in _calls(ws, p):
        try:
            out = call()
        except (OSError, ValueError, TypeError, UnicodeError) as exc:
            event(f"{name}: {type(exc).__name__}")
            continue
        event(f"{name}: ok")
        _check_output(name, p, out, ws)

    after = _snapshot(arena)
    assert after == before, f"outside changed for {p!r}: " + str(
        {
            k: (before.get(k), after.get(k))
            for k in set(before) | set(after)
            if before.get(k) != after.get(k)
        }
    )
