"""glob tool: matching rules, skip dirs, explicit paths, symlinks, ordering."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bareagent.core.handlers import _walk
from bareagent.core.handlers.glob_search import glob_files

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX symlinks")


def _touch(root: Path, *rels: str) -> None:
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    _touch(
        tmp_path,
        "main.py",
        "README.md",
        ".hidden.py",
        "src/app.py",
        "src/pkg/util.py",
        "src/pkg/deep/er/x.py",
        "src/pkg/data.json",
        "tests/test_app.py",
        "tests/unit/test_util.py",
        ".git/hooks/pre.py",
        ".pytest_cache/v.py",
        ".venv/lib/site.py",
        "src/__pycache__/app.cpython.py",
        "node_modules/left-pad/index.py",
        "node_modules/left-pad/node_modules/inner/i.py",
    )
    return tmp_path


def test_star_recurses_and_is_sorted(ws: Path) -> None:
    assert glob_files(ws, "*.py") == [
        ".hidden.py",
        "main.py",
        "src/app.py",
        "src/pkg/deep/er/x.py",
        "src/pkg/util.py",
        "tests/test_app.py",
        "tests/unit/test_util.py",
    ]


def test_results_sorted_and_unique_with_tricky_names(tmp_path: Path) -> None:
    _touch(tmp_path, "a.txt", "a/b.txt", "a-b.txt", "a0.txt", "A.txt")
    result = glob_files(tmp_path, "*.txt")
    assert result == sorted(set(result))
    assert result == ["A.txt", "a-b.txt", "a.txt", "a/b.txt", "a0.txt"]


@pytest.mark.parametrize(
    "skipped", [".git", ".pytest_cache", ".venv", "__pycache__", "node_modules"]
)
def test_skip_dirs_are_not_listed(ws: Path, skipped: str) -> None:
    assert not any(f"{skipped}/" in p for p in glob_files(ws, "*"))


def test_skip_dirs_are_pruned_not_filtered(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scanned: list[str] = []
    real_scandir = os.scandir

    def spy(path: str) -> object:
        scanned.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)
    glob_files(ws, "*.py")
    assert scanned
    for name in _walk.SKIP_DIRS:
        assert not any(name in Path(p).parts for p in scanned), name


def test_explicit_path_inside_skip_dir_is_searched(ws: Path) -> None:
    assert glob_files(ws, "*.py", ".venv") == [".venv/lib/site.py"]
    assert glob_files(ws, "*.py", "node_modules") == [
        "node_modules/left-pad/index.py",
        "node_modules/left-pad/node_modules/inner/i.py",
    ]
    assert glob_files(ws, "*.py", "node_modules/left-pad/node_modules") == [
        "node_modules/left-pad/node_modules/inner/i.py"
    ]


def test_path_subdirectory_results_are_workspace_relative(ws: Path) -> None:
    assert glob_files(ws, "*.py", "src/pkg") == ["src/pkg/deep/er/x.py", "src/pkg/util.py"]
    assert glob_files(ws, "pkg/*.py", "src") == ["src/pkg/util.py"]


def test_path_pointing_to_a_file(ws: Path) -> None:
    assert glob_files(ws, "*.py", "src/app.py") == ["src/app.py"]
    assert glob_files(ws, "app.py", "src/app.py") == ["src/app.py"]
    assert glob_files(ws, "*.json", "src/app.py") == []
    assert glob_files(ws, "*.py", ".venv/lib/site.py") == [".venv/lib/site.py"]


def test_patterns_with_slash_match_relative_path(ws: Path) -> None:
    assert glob_files(ws, "src/*.py") == ["src/app.py"]
    assert glob_files(ws, "src/**/*.py") == [
        "src/app.py",
        "src/pkg/deep/er/x.py",
        "src/pkg/util.py",
    ]
    assert glob_files(ws, "**/test_*.py") == ["tests/test_app.py", "tests/unit/test_util.py"]
    assert glob_files(ws, "src/**/er/*.py") == ["src/pkg/deep/er/x.py"]
    assert glob_files(ws, "src/**/**/util.py") == ["src/pkg/util.py"]
    assert glob_files(ws, "./*.py") == [".hidden.py", "main.py"]
    assert glob_files(ws, "*/*.py") == ["src/app.py", "tests/test_app.py"]


def test_trailing_slash_means_everything_below(ws: Path) -> None:
    assert glob_files(ws, "tests/") == ["tests/test_app.py", "tests/unit/test_util.py"]


def test_double_star_without_slash_matches_any_name(ws: Path) -> None:
    assert glob_files(ws, "**") == glob_files(ws, "*")
    assert "src/pkg/data.json" in glob_files(ws, "**")


def test_fnmatch_syntax_and_case(ws: Path) -> None:
    _touch(ws, "f1.txt", "f2.txt", "fa.txt", "F1.txt")
    assert glob_files(ws, "f?.txt") == ["f1.txt", "f2.txt", "fa.txt"]
    assert glob_files(ws, "f[12].txt") == ["f1.txt", "f2.txt"]
    assert glob_files(ws, "f[!12].txt") == ["fa.txt"]
    assert glob_files(ws, "F*.txt") == ["F1.txt"]


def test_directories_are_not_listed(ws: Path) -> None:
    (ws / "folder.py").mkdir()
    assert "folder.py" not in glob_files(ws, "*.py")


@pytest.mark.parametrize("bad", ["", "/etc/*", "../*.py", "src/../../*.py", "C:*.py"])
def test_invalid_patterns(ws: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        glob_files(ws, bad)


def test_missing_path(ws: Path) -> None:
    with pytest.raises(FileNotFoundError, match="Path not found: nope"):
        glob_files(ws, "*.py", "nope")


def test_path_escape_refused(ws: Path) -> None:
    with pytest.raises(PermissionError):
        glob_files(ws, "*.py", "..")
    with pytest.raises(PermissionError):
        glob_files(ws, "*.py", "/")


@posix_only
def test_symlinks_are_not_listed_or_followed(
    ws: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    _touch(outside, "secret.py")
    (ws / "src" / "linked_dir").symlink_to(outside)
    (ws / "src" / "linked.py").symlink_to(ws / "main.py")
    (ws / "loop").symlink_to(ws)
    result = glob_files(ws, "*.py")
    assert "src/linked.py" not in result
    assert not any("secret" in p or p.startswith("loop/") for p in result)
    with pytest.raises(PermissionError):
        glob_files(ws, "*.py", "src/linked_dir")


@posix_only
def test_unreadable_directory_is_skipped(ws: Path) -> None:
    locked = ws / "locked"
    _touch(ws, "locked/x.py")
    locked.chmod(0)
    try:
        result = glob_files(ws, "*.py")
    finally:
        locked.chmod(0o755)
    assert "main.py" in result
