"""read_file, write_file and edit_file per SPEC §1."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bareagent.core.handlers.file_edit import edit_file
from bareagent.core.handlers.file_read import read_file
from bareagent.core.handlers.file_write import write_file

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file semantics")


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "five.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    return root


def _leftover_temps(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


# --- read_file ---------------------------------------------------------------------------


def test_read_numbers_lines_from_one(ws: Path) -> None:
    assert read_file(ws, "five.txt") == "1: one\n2: two\n3: three\n4: four\n5: five"


def test_read_offset_is_zero_based_and_shown_one_based(ws: Path) -> None:
    assert read_file(ws, "five.txt", offset=1).splitlines()[0] == "2: two"


def test_read_offset_and_limit(ws: Path) -> None:
    assert read_file(ws, "five.txt", offset=2, limit=2) == "3: three\n4: four"
    assert read_file(ws, "five.txt", limit=1) == "1: one"
    assert read_file(ws, "five.txt", limit=0) == ""
    assert read_file(ws, "five.txt", offset=5) == ""
    assert read_file(ws, "five.txt", offset=99, limit=3) == ""


@pytest.mark.parametrize(("offset", "limit"), [(-1, None), (0, -1), (-3, -3)])
def test_read_negative_offset_or_limit_raises(ws: Path, offset: int, limit: int | None) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        read_file(ws, "five.txt", offset=offset, limit=limit)


@pytest.mark.parametrize(("offset", "limit"), [("1", None), (0, 1.5), (True, None)])
def test_read_non_integer_offset_or_limit_raises(ws: Path, offset: object, limit: object) -> None:
    with pytest.raises(ValueError):
        read_file(ws, "five.txt", offset=offset, limit=limit)  # type: ignore[arg-type]


def test_read_last_line_without_newline_and_blank_lines(ws: Path) -> None:
    (ws / "x.txt").write_text("a\n\nb")
    assert read_file(ws, "x.txt") == "1: a\n2: \n3: b"


def test_read_empty_file(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    assert read_file(ws, "empty.txt") == ""


def test_read_crlf_and_bom(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"\xef\xbb\xbfa\r\nb\r\n")
    assert read_file(ws, "win.txt") == "1: a\n2: b"


def test_read_utf8_text(ws: Path) -> None:
    (ws / "u.txt").write_text("héllo ✓\n", encoding="utf-8")
    assert read_file(ws, "u.txt") == "1: héllo ✓"


def test_read_non_utf8_is_a_clear_value_error(ws: Path) -> None:
    (ws / "bin.dat").write_bytes(b"ok\n\xff\xfe")
    with pytest.raises(ValueError, match=r"not valid UTF-8 text: bin\.dat"):
        read_file(ws, "bin.dat")


def test_read_missing_file_names_relative_path(ws: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        read_file(ws, "sub/missing.txt")
    assert str(info.value) == "File not found: sub/missing.txt"


def test_read_directory(ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(IsADirectoryError, match="Is a directory: d"):
        read_file(ws, "d")


@posix_only
def test_read_fifo_is_refused_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(ValueError, match="Not a regular file: pipe"):
        read_file(ws, "pipe")


@posix_only
def test_read_symlink_is_refused(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(PermissionError):
        read_file(ws, "link.txt")


def test_read_escape_is_refused(ws: Path) -> None:
    with pytest.raises(PermissionError):
        read_file(ws, "../outside.txt")
    with pytest.raises(PermissionError):
        read_file(ws, str(ws / "five.txt"))


# --- write_file --------------------------------------------------------------------------


def test_write_summary_and_parents(ws: Path) -> None:
    assert write_file(ws, "nested/example.txt", "hello world") == (
        "Wrote 11 characters to nested/example.txt"
    )
    assert (ws / "nested" / "example.txt").read_text() == "hello world"


def test_write_counts_characters_not_bytes(ws: Path) -> None:
    assert write_file(ws, "u.txt", "héllo ✓") == "Wrote 7 characters to u.txt"
    assert (ws / "u.txt").read_bytes() == "héllo ✓".encode()


def test_write_overwrites_whole_file_byte_exact(ws: Path) -> None:
    write_file(ws, "five.txt", "a\r\nb")
    assert (ws / "five.txt").read_bytes() == b"a\r\nb"
    assert _leftover_temps(ws) == []


def test_write_normalised_path_is_shown(ws: Path) -> None:
    assert write_file(ws, "./a/../b.txt", "") == "Wrote 0 characters to b.txt"


@posix_only
def test_write_preserves_mode(ws: Path) -> None:
    target = ws / "script.sh"
    target.write_text("old")
    target.chmod(0o751)
    write_file(ws, "script.sh", "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o751


@posix_only
def test_write_new_file_gets_umask_mode(ws: Path) -> None:
    old = os.umask(0o022)
    try:
        write_file(ws, "fresh.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((ws / "fresh.txt").stat().st_mode) == 0o644


def test_write_failure_keeps_old_content_and_no_temp(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        write_file(ws, "five.txt", "new content")
    assert (ws / "five.txt").read_text().startswith("one\n")
    assert _leftover_temps(ws) == []


def test_write_to_directory(ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(IsADirectoryError, match="Is a directory: d"):
        write_file(ws, "d", "x")
    with pytest.raises(IsADirectoryError):
        write_file(ws, ".", "x")


def test_write_under_a_file_parent(ws: Path) -> None:
    with pytest.raises(NotADirectoryError, match="not a directory"):
        write_file(ws, "five.txt/child.txt", "x")


def test_write_non_string_content(ws: Path) -> None:
    with pytest.raises(ValueError, match="content must be a string"):
        write_file(ws, "x.txt", b"bytes")  # type: ignore[arg-type]


@posix_only
def test_write_through_symlinked_dir_is_refused(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "jump").symlink_to(outside)
    with pytest.raises(PermissionError):
        write_file(ws, "jump/pwned.txt", "x")
    assert not (outside / "pwned.txt").exists()


@posix_only
def test_write_over_symlinked_file_is_refused(ws: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("safe")
    (ws / "link.txt").symlink_to(victim)
    with pytest.raises(PermissionError):
        write_file(ws, "link.txt", "x")
    assert victim.read_text() == "safe"


def test_write_escape_is_refused(ws: Path, tmp_path: Path) -> None:
    with pytest.raises(PermissionError):
        write_file(ws, "../escaped.txt", "x")
    assert not (tmp_path / "escaped.txt").exists()


# --- edit_file ---------------------------------------------------------------------------


def test_edit_summary_and_first_occurrence_only(ws: Path) -> None:
    (ws / "sample.txt").write_text("foo bar foo\nfoo\n")
    assert edit_file(ws, "sample.txt", "foo", "baz") == "Edited sample.txt"
    assert (ws / "sample.txt").read_text() == "baz bar foo\nfoo\n"
    assert _leftover_temps(ws) == []


def test_edit_multiline_and_nested_path(ws: Path) -> None:
    (ws / "pkg").mkdir()
    (ws / "pkg" / "m.py").write_text("def f():\n    return 1\n")
    assert edit_file(ws, "pkg/m.py", "    return 1\n", "    return 2\n") == "Edited pkg/m.py"
    assert (ws / "pkg" / "m.py").read_text() == "def f():\n    return 2\n"


def test_edit_can_delete_text(ws: Path) -> None:
    edit_file(ws, "five.txt", "two\n", "")
    assert (ws / "five.txt").read_text() == "one\nthree\nfour\nfive\n"


def test_edit_missing_text_exact_message(ws: Path) -> None:
    before = (ws / "five.txt").read_bytes()
    with pytest.raises(ValueError) as info:
        edit_file(ws, "five.txt", "six", "6")
    assert str(info.value) == "old_text not found in file"
    assert (ws / "five.txt").read_bytes() == before


def test_edit_empty_old_text(ws: Path) -> None:
    with pytest.raises(ValueError, match="old_text must not be empty"):
        edit_file(ws, "five.txt", "", "x")


def test_edit_missing_file(ws: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"File not found: nope\.txt"):
        edit_file(ws, "nope.txt", "a", "b")


def test_edit_non_utf8_untouched(ws: Path) -> None:
    (ws / "bin.dat").write_bytes(b"\xff\xfeabc")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        edit_file(ws, "bin.dat", "abc", "x")
    assert (ws / "bin.dat").read_bytes() == b"\xff\xfeabc"


def test_edit_keeps_crlf_and_bom(ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"\xef\xbb\xbfa\r\nb\r\n")
    edit_file(ws, "w.txt", "b", "c")
    assert (ws / "w.txt").read_bytes() == b"\xef\xbb\xbfa\r\nc\r\n"


@posix_only
def test_edit_preserves_mode(ws: Path) -> None:
    (ws / "five.txt").chmod(0o600)
    edit_file(ws, "five.txt", "one", "1")
    assert stat.S_IMODE((ws / "five.txt").stat().st_mode) == 0o600


@posix_only
def test_edit_symlink_is_refused(ws: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (ws / "link.txt").symlink_to(victim)
    with pytest.raises(PermissionError):
        edit_file(ws, "link.txt", "keep", "lost")
    assert victim.read_text() == "keep"
