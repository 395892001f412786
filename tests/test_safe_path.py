"""Path sandbox: what safe_path accepts, what it refuses, and relative_posix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bareagent.sandbox.paths import relative_posix, safe_path

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX symlink semantics")


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "deep" / "f.txt").write_text("x")
    (root / "a.txt").write_text("a")
    return root.resolve()


@pytest.mark.parametrize(
    ("given_path", "expected"),
    [
        ("a.txt", "a.txt"),
        ("sub/deep/f.txt", "sub/deep/f.txt"),
        ("./sub/./deep", "sub/deep"),
        ("sub/../a.txt", "a.txt"),
        ("sub//deep", "sub/deep"),
        ("new/dir/file.txt", "new/dir/file.txt"),
        ("sub/deep/f.txt/nope", "sub/deep/f.txt/nope"),
    ],
)
def test_accepts_relative_paths_inside(ws: Path, given_path: str, expected: str) -> None:
    assert safe_path(given_path, ws) == ws / expected


@pytest.mark.parametrize("root_spelling", [".", "", "sub/.."])
def test_workspace_root_itself(ws: Path, root_spelling: str) -> None:
    assert safe_path(root_spelling, ws) == ws
    assert relative_posix(safe_path(root_spelling, ws), ws) == "."


def test_accepts_pathlike(ws: Path) -> None:
    assert safe_path(Path("sub") / "deep", ws) == ws / "sub" / "deep"


@pytest.mark.parametrize(
    "bad",
    [
        "/etc/passwd",
        "/",
        "~",
        "~/x",
        "~root/.ssh",
        "..",
        "../x",
        "../ws/a.txt",
        "sub/../../x",
        "sub/deep/../../../x",
        "..\\..\\etc\\passwd",
        "sub\\..\\..\\x",
        "C:foo",
        "C:\\Windows",
        "c:/x",
        "\\\\server\\share\\x",
        "//server/share",
        "\\rooted",
        "a\x00b",
    ],
)
def test_rejects_escapes_and_foreign_forms(ws: Path, bad: str) -> None:
    with pytest.raises(PermissionError):
        safe_path(bad, ws)


def test_rejects_absolute_path_even_inside_workspace(ws: Path) -> None:
    with pytest.raises(PermissionError, match="Absolute"):
        safe_path(str(ws / "a.txt"), ws)


def test_error_messages_are_specific(ws: Path) -> None:
    with pytest.raises(PermissionError, match="escapes the workspace"):
        safe_path("../x", ws)
    with pytest.raises(PermissionError, match="Home-relative"):
        safe_path("~/x", ws)
    with pytest.raises(PermissionError, match="NUL"):
        safe_path("a\x00", ws)
    with pytest.raises(PermissionError, match="UNC"):
        safe_path("//h/s", ws)
    with pytest.raises(PermissionError, match="Drive"):
        safe_path("C:x", ws)


@posix_only
def test_backslash_names_without_escape_are_plain_names_on_posix(ws: Path) -> None:
    assert safe_path("a\\b", ws) == ws / "a\\b"


@posix_only
def test_rejects_symlinked_file(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws / "a.txt")
    with pytest.raises(PermissionError, match="Symlink"):
        safe_path("link.txt", ws)


@posix_only
def test_rejects_symlinked_directory_in_the_middle(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (ws / "sub" / "jump").symlink_to(outside)
    for spelling in ("sub/jump", "sub/jump/inner", "sub/jump/inner/new.txt"):
        with pytest.raises(PermissionError, match="sub/jump"):
            safe_path(spelling, ws)


@posix_only
def test_rejects_symlink_pointing_inside_and_dangling(ws: Path) -> None:
    (ws / "inside").symlink_to(ws / "sub")
    (ws / "dangling").symlink_to(ws / "missing")
    with pytest.raises(PermissionError):
        safe_path("inside/deep/f.txt", ws)
    with pytest.raises(PermissionError):
        safe_path("dangling", ws)


@posix_only
def test_dotdot_through_symlink_is_folded_lexically(ws: Path, tmp_path: Path) -> None:
    (ws / "jump").symlink_to(tmp_path / "elsewhere")
    # `jump/..` must not be resolved through the link by the OS: the result stays inside.
    assert safe_path("jump/../a.txt", ws) == ws / "a.txt"


@posix_only
def test_workspace_reached_through_symlink(tmp_path: Path, ws: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(ws)
    assert safe_path("sub/deep/f.txt", alias) == ws / "sub" / "deep" / "f.txt"
    assert relative_posix(ws / "sub", alias) == "sub"


@pytest.mark.skipif(os.name != "nt", reason="Windows-only stream syntax")
def test_rejects_alternate_data_streams_on_windows(ws: Path) -> None:
    with pytest.raises(PermissionError):
        safe_path("a.txt:secret", ws)


def test_workspace_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        safe_path("x", tmp_path / "missing")


def test_relative_posix(ws: Path) -> None:
    assert relative_posix(ws / "sub" / "deep" / "f.txt", ws) == "sub/deep/f.txt"
    assert relative_posix(ws, ws) == "."
    assert relative_posix("sub/deep", ws) == "sub/deep"
    with pytest.raises(ValueError, match="outside"):
        relative_posix(ws.parent, ws)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["..", ".", "a", "b", "", "\\", "c:", "~"]), max_size=8))
def test_property_result_is_inside_or_refused(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str]
) -> None:
    root = tmp_path_factory.getbasetemp().resolve()
    for sep in ("/", "\\"):
        candidate = sep.join(parts)
        try:
            result = safe_path(candidate, root)
        except PermissionError:
            continue
        assert result == root or root in result.parents
