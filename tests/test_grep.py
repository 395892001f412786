"""grep tool: per-line semantics, limits, skips, ordering and error strings."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bareagent.core.handlers import grep_search
from bareagent.core.handlers.grep_search import MAX_FILE_BYTES, MAX_MATCHES, grep_files

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions/symlinks")


def _write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def test_output_format_and_order(tmp_path: Path) -> None:
    _write(tmp_path, "b.py", "\n".join(f"line {i}" for i in range(1, 13)) + "\n")
    _write(tmp_path, "a/z.py", "line x\n")
    _write(tmp_path, "a.txt", "no\nline a\n")
    result = grep_files(tmp_path, r"line (2|10|x|a)$")
    assert result == ["a.txt:2:line a", "a/z.py:1:line x", "b.py:2:line 2", "b.py:10:line 10"]


def test_invalid_regex_is_a_single_element_list(tmp_path: Path) -> None:
    try:
        re.compile("(unclosed")
    except re.error as exc:
        expected = f"Invalid regex pattern: {exc}"
    assert grep_files(tmp_path, "(unclosed") == [expected]
    assert grep_files(tmp_path, "a{99999999999}")[0].startswith("Invalid regex pattern: ")


def test_anchors_are_per_line(tmp_path: Path) -> None:
    _write(tmp_path, "f.txt", "foo bar\nbar foo\n  foo\nfoo")
    assert grep_files(tmp_path, "^foo") == ["f.txt:1:foo bar", "f.txt:4:foo"]
    assert grep_files(tmp_path, "foo$") == ["f.txt:2:bar foo", "f.txt:3:  foo", "f.txt:4:foo"]
    assert grep_files(tmp_path, "^foo$") == ["f.txt:4:foo"]


def test_no_cross_line_matches(tmp_path: Path) -> None:
    _write(tmp_path, "f.txt", "a\nb\na b\n")
    assert grep_files(tmp_path, r"a\sb") == ["f.txt:3:a b"]
    assert grep_files(tmp_path, r"a[^x]*b") == ["f.txt:3:a b"]


def test_cross_line_hit_does_not_hide_a_later_line(tmp_path: Path) -> None:
    # A whole-text search would consume "x\nfoo xz" in one match starting on line 1.
    _write(tmp_path, "f.txt", "x\nfoo xz\n")
    assert grep_files(tmp_path, r"x[^y]*z") == ["f.txt:2:foo xz"]


def test_line_boundary_sensitive_patterns(tmp_path: Path) -> None:
    _write(tmp_path, "f.txt", "foo one\nx foo\nfoo\n")
    assert grep_files(tmp_path, r"\Afoo") == ["f.txt:1:foo one", "f.txt:3:foo"]
    assert grep_files(tmp_path, r"foo\Z") == ["f.txt:2:x foo", "f.txt:3:foo"]
    assert grep_files(tmp_path, r"(?<!\S)foo(?!\s)") == ["f.txt:2:x foo", "f.txt:3:foo"]
    assert grep_files(tmp_path, r"(?<=x )foo") == ["f.txt:2:x foo"]
    assert grep_files(tmp_path, r"(?-m:^foo)") == ["f.txt:1:foo one", "f.txt:3:foo"]


def test_empty_lines_and_empty_pattern(tmp_path: Path) -> None:
    _write(tmp_path, "f.txt", "a\n\nb\n")
    assert grep_files(tmp_path, "^$") == ["f.txt:2:"]
    assert grep_files(tmp_path, "") == ["f.txt:1:a", "f.txt:2:", "f.txt:3:b"]
    _write(tmp_path, "empty.txt", "")
    assert not any(r.startswith("empty.txt") for r in grep_files(tmp_path, ""))


def test_crlf_lines(tmp_path: Path) -> None:
    _write(tmp_path, "w.txt", "foo\r\nbar\r\n")
    assert grep_files(tmp_path, "foo$") == ["w.txt:1:foo"]
    assert grep_files(tmp_path, "^bar$") == ["w.txt:2:bar"]


def test_bom_is_not_part_of_line_one(tmp_path: Path) -> None:
    _write(tmp_path, "b.txt", b"\xef\xbb\xbfimport x\n")
    assert grep_files(tmp_path, "^import") == ["b.txt:1:import x"]


def test_unicode_text(tmp_path: Path) -> None:
    _write(tmp_path, "u.txt", "naïve ✓\nplain\n")
    assert grep_files(tmp_path, r"ï\w") == ["u.txt:1:naïve ✓"]


def test_include_filter(tmp_path: Path) -> None:
    _write(tmp_path, "a.py", "hit\n")
    _write(tmp_path, "b.txt", "hit\n")
    _write(tmp_path, "src/c.py", "hit\n")
    _write(tmp_path, "src/deep/d.py", "hit\n")
    assert grep_files(tmp_path, "hit", include="*.py") == [
        "a.py:1:hit",
        "src/c.py:1:hit",
        "src/deep/d.py:1:hit",
    ]
    assert grep_files(tmp_path, "hit", include="src/*.py") == ["src/c.py:1:hit"]
    assert grep_files(tmp_path, "hit", path="src", include="deep/*.py") == ["src/deep/d.py:1:hit"]
    assert grep_files(tmp_path, "hit", path="b.txt", include="*.py") == []


def test_path_pointing_to_a_file(tmp_path: Path) -> None:
    _write(tmp_path, "src/one.py", "x = 1\ny = 2\n")
    _write(tmp_path, "src/two.py", "x = 3\n")
    assert grep_files(tmp_path, r"^x", path="src/one.py") == ["src/one.py:1:x = 1"]


def test_skip_dirs_and_explicit_path(tmp_path: Path) -> None:
    for skipped in (".git", ".pytest_cache", ".venv", "__pycache__", "node_modules"):
        _write(tmp_path, f"{skipped}/inner/f.py", "needle\n")
    _write(tmp_path, "src/f.py", "needle\n")
    assert grep_files(tmp_path, "needle") == ["src/f.py:1:needle"]
    assert grep_files(tmp_path, "needle", path="node_modules") == [
        "node_modules/inner/f.py:1:needle"
    ]
    assert grep_files(tmp_path, "needle", path=".venv/inner") == [".venv/inner/f.py:1:needle"]


def test_size_limit_boundary(tmp_path: Path) -> None:
    line = b"needle" + b"." * 57 + b"\n"  # 64 bytes
    body = line * (MAX_FILE_BYTES // len(line))
    assert len(body) == MAX_FILE_BYTES == 1_048_576
    _write(tmp_path, "exact.txt", body)
    _write(tmp_path, "over.txt", body + b"x")
    result = grep_files(tmp_path, "needle", include="*.txt")
    assert {r.split(":")[0] for r in result} == {"exact.txt"}


def test_non_utf8_and_binary_are_skipped(tmp_path: Path) -> None:
    _write(tmp_path, "latin1.txt", "needle café\n".encode("latin-1"))
    _write(tmp_path, "bin.dat", b"\x00\xffneedle\x89PNG")
    _write(tmp_path, "good.txt", "needle\n")
    assert grep_files(tmp_path, "needle") == ["good.txt:1:needle"]


@posix_only
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file_is_skipped(tmp_path: Path) -> None:
    _write(tmp_path, "locked.txt", "needle\n").chmod(0)
    _write(tmp_path, "open.txt", "needle\n")
    assert grep_files(tmp_path, "needle") == ["open.txt:1:needle"]


@posix_only
def test_fifo_and_symlinks_are_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("needle\n")
    (tmp_path / "link.txt").symlink_to(outside)
    _write(tmp_path, "real.txt", "needle\n")
    assert grep_files(tmp_path, "needle") == ["real.txt:1:needle"]
    with pytest.raises(PermissionError):
        grep_files(tmp_path, "needle", path="link.txt")


def test_match_cap_in_one_file(tmp_path: Path) -> None:
    _write(tmp_path, "many.txt", "hit\n" * 1500)
    result = grep_files(tmp_path, "hit")
    assert len(result) == MAX_MATCHES == 1000
    assert result[0] == "many.txt:1:hit"
    assert result[-1] == "many.txt:1000:hit"


def test_match_cap_stops_the_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        _write(tmp_path, name, "hit\n" * 600)
    opened: list[str] = []
    real = grep_search._read_small_text

    def spy(path: str) -> str | None:
        opened.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(grep_search, "_read_small_text", spy)
    result = grep_files(tmp_path, "hit")
    assert len(result) == 1000
    assert result[599] == "a.txt:600:hit"
    assert result[-1] == "b.txt:400:hit"
    assert opened == ["a.txt", "b.txt"]


def test_missing_path_and_escape(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        grep_files(tmp_path, "x", path="missing")
    with pytest.raises(PermissionError):
        grep_files(tmp_path, "x", path="../")


def _reference(text: str, pattern: str) -> list[str]:
    rx = re.compile(pattern)
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [f"f.txt:{n}:{line}" for n, line in enumerate(lines, 1) if rx.search(line)]


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="ab \n\r", max_size=40),
    pattern=st.sampled_from(
        [
            "a",
            "^a",
            "a$",
            "^$",
            r"a\sb",
            "a[^x]*b",
            r"\bb",
            r"b\B",
            "a.*b",
            "(?s)a.b",
            "(?m)^b",
            "a*",
            r"\s$",
            r"^\s",
            "b ?$",
            r"\n",
            "[^a]",
            "(?-m:^b)",
            "(?<!a)b",
            r"\Ab",
            r"a\Z",
        ]
    ),
)
def test_property_matches_per_line_reference(
    tmp_path_factory: pytest.TempPathFactory, text: str, pattern: str
) -> None:
    root = tmp_path_factory.mktemp("prop")
    (root / "f.txt").write_bytes(text.encode())
    assert grep_files(root, pattern) == _reference(text, pattern)
