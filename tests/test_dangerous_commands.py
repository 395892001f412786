"""Bash command analysis: dangerous and safe corpora, parser details, obfuscations, speed."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bareagent.permission import PermissionGuard, PermissionMode, classify_bash
from bareagent.permission.bash_analysis import classify_bash as cached_classify
from bareagent.permission.bash_code import sed_script_effects
from bareagent.permission.bash_parse import parse_script

HERE = Path(__file__).parent
# Measured on the corpora when this was written: 0 of 251 safe lines dangerous, 207 of 251
# auto-safe overall and 207 of 208 in the read-only section. Thresholds leave a little room.
MIN_AUTO_SAFE_READ_ONLY = 0.95
MIN_AUTO_SAFE_OVERALL = 0.80


def load(name: str) -> list[tuple[str, str]]:
    """(section, command) pairs of a corpus file."""
    section = ""
    out: list[tuple[str, str]] = []
    for line in (HERE / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("## section:"):
            section = line.split(":", 1)[1].strip()
        elif line.strip() and not line.startswith("#"):
            out.append((section, line))
    return out


DANGEROUS = load("dangerous_commands.txt")
SAFE = load("safe_commands.txt")


def test_corpus_sizes() -> None:
    assert len(DANGEROUS) >= 150
    assert sum("obfuscated" in section for section, _ in DANGEROUS) >= 60
    assert len(SAFE) >= 150
    assert len({c for _, c in DANGEROUS}) == len(DANGEROUS)
    assert len({c for _, c in SAFE}) == len(SAFE)


@pytest.mark.parametrize("command", [c for _, c in DANGEROUS])
def test_dangerous_command_always_needs_confirmation(command: str) -> None:
    verdict = classify_bash(command)
    assert verdict.dangerous and verdict.reasons and not verdict.auto_safe
    rules = [f"bash(prefix:{command})", "bash"]
    for mode in (PermissionMode.DEFAULT, PermissionMode.AUTO):
        assert PermissionGuard(mode).requires_confirm("bash", {"command": command})
        allowed = PermissionGuard(mode, allow_rules=rules)
        assert allowed.requires_confirm("bash", {"command": command})
        assert allowed.requires_confirm("background_run", {"command": command})


def test_safe_corpus_is_never_dangerous_and_mostly_auto_safe() -> None:
    dangerous = [(c, classify_bash(c).reasons) for _, c in SAFE if classify_bash(c).dangerous]
    assert dangerous == []
    guard = PermissionGuard(PermissionMode.DEFAULT)
    asks = [c for _, c in SAFE if guard.requires_confirm("bash", {"command": c})]
    read_only = [c for s, c in SAFE if s.startswith("read-only")]
    asks_read_only = [c for c in read_only if c in asks]
    assert 1 - len(asks) / len(SAFE) >= MIN_AUTO_SAFE_OVERALL, asks
    assert 1 - len(asks_read_only) / len(read_only) >= MIN_AUTO_SAFE_READ_ONLY, asks_read_only
    auto = PermissionGuard(PermissionMode.AUTO)
    assert not any(auto.requires_confirm("bash", {"command": c}) for _, c in SAFE)


def test_writing_section_is_not_auto_safe() -> None:
    # Those commands change the workspace: DEFAULT asks by design, so the test can fail if
    # the classifier got too lenient.
    writing = [c for s, c in SAFE if s.startswith("changes")]
    assert len(writing) >= 30
    assert not any(classify_bash(c).auto_safe for c in writing)


# --- multi-line and structural cases ---------------------------------------------------

MULTILINE_DANGEROUS = [
    "cat <<'EOF' | sh\nrm -rf /\nEOF",
    "bash <<EOF\necho hi\nEOF",
    "python3 - <<'EOF'\nimport shutil\nshutil.rmtree('src')\nEOF",
    "python3 - <<EOF\nprint('$(id)')\nEOF",
    "cat > run.sh <<'EOF'\nrm -rf ~\nEOF\nbash run.sh",
    "cat > t.py <<'EOF'\nimport os; os.remove('x')\nEOF\npython t.py",
    "psql <<'EOF'\nDROP TABLE users;\nEOF",
    "ls\nrm -rf x",
    "rm -r\\\nf build",
    "r\\\nm -rf build",
    "ls && \\\n  rm -rf x",
    "echo 'unterminated",
    "if then fi (",
    "x=1 > /dev/sda",
    "f() { rm -rf x; }; f",
    "cd /etc && echo 127.0.0.1 evil > hosts",
    "cd && rm .bashrc",
]
MULTILINE_SAFE = [
    "cat <<'EOF'\nrm -rf /\nEOF",
    "grep -n x <<< 'DROP'",
    "ls \\\n  -la",
    "# just a comment: rm -rf /",
    "",
    "pytest -q \\\n  tests/",
    "cd tests\nls",
]


@pytest.mark.parametrize("command", MULTILINE_DANGEROUS)
def test_multiline_dangerous(command: str) -> None:
    assert classify_bash(command).dangerous


@pytest.mark.parametrize("command", MULTILINE_SAFE)
def test_multiline_auto_safe(command: str) -> None:
    verdict = classify_bash(command)
    assert verdict.auto_safe and not verdict.dangerous, verdict.reasons


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("r''m -rf x", ["rm", "-rf", "x"]),
        ('"r"m x', ["rm", "x"]),
        ("\\rm x", ["rm", "x"]),
        ("$'\\x72\\x6d' x", ["rm", "x"]),
        ("$'\\162m' x", ["rm", "x"]),
        ('$"rm" x', ["rm", "x"]),
        ("ls 'a b'c\\ d", ["ls", "a bc d"]),
        ('echo "a\\"b\\$c"', ["echo", 'a"b$c']),
    ],
)
def test_words_are_normalised(command: str, words: list[str]) -> None:
    parsed = parse_script(command)
    assert not parsed.problems
    assert [w.value for w in parsed.commands[0].words] == words


def test_dynamic_words_are_marked() -> None:
    parsed = parse_script('$X "$(id)" ${y} plain')
    words = parsed.commands[-1].words
    assert [w.static for w in words] == [False, False, False, True]


@pytest.mark.parametrize(
    ("command", "normalized"),
    [
        ("sudo -u root -- nice -n 5 rm x", "rm x"),
        ("timeout -s KILL 10s env FOO=1 git push", "git push"),
        ("command -p stdbuf -oL xargs -0 rm", "rm"),
        ("/usr/bin/env rm y", "rm y"),
    ],
)
def test_wrappers_are_unwrapped(command: str, normalized: str) -> None:
    segments = classify_bash(command).segments
    assert segments[0].normalized == normalized


@pytest.mark.parametrize(
    ("script", "effects"),
    [
        ("1,20p", set()),
        ("/start/,/end/d", set()),
        ("s/a/b/g;s|x|y|", set()),
        ("s/x/y/e", {"exec"}),
        ("1e id", {"exec"}),
        ("w out.txt", {"write:out.txt"}),
        ("s/a/b/w /etc/passwd", {"write:/etc/passwd"}),
        ("s/unterminated", {"unknown"}),
    ],
)
def test_sed_script_effects(script: str, effects: set[str]) -> None:
    assert sed_script_effects(script) == effects


@pytest.mark.parametrize(
    "command",
    ["ls -la", "git status", "sed -n '1,5p' f", "awk '{print $2}' f", "find . -name x"],
)
def test_segments_report_auto_safe_commands(command: str) -> None:
    verdict = classify_bash(command)
    assert verdict.auto_safe and all(s.safe for s in verdict.segments)


# --- properties ------------------------------------------------------------------------

safe_commands = st.sampled_from([c for s, c in SAFE if classify_bash(c).auto_safe])
dangerous_commands = st.sampled_from([c for _, c in DANGEROUS if "\n" not in c])
joiners = st.sampled_from(
    [
        "{a} && {d}",
        "{a}; {d}",
        "{a} || {d}",
        "{a}\n{d}",
        "{d} && {a}",
        "{a} && ({d})",
        "{a} && {{ {d}; }}",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(safe_commands, dangerous_commands, joiners)
def test_chaining_a_dangerous_command_stays_dangerous(a: str, d: str, joiner: str) -> None:
    assert classify_bash(joiner.format(a=a, d=d)).dangerous


PLAIN_HEAD = [c for _, c in DANGEROUS if re.match(r"^[a-z][a-z0-9.]*[ \n]", c)]
HEAD_TRANSFORMS = [
    lambda w: f"'{w}'",
    lambda w: f'"{w}"',
    lambda w: "\\" + w,
    lambda w: w[0] + "''" + w[1:],
    lambda w: w[0] + '""' + w[1:],
    lambda w: "$'" + "".join(f"\\x{ord(ch):02x}" for ch in w) + "'",
    lambda w: f"/usr/bin/{w}",
    lambda w: f"command {w}",
    lambda w: f"sudo -n {w}",
    lambda w: f"nice -n 5 {w}",
    lambda w: f"timeout 10s {w}",
    lambda w: f"stdbuf -oL {w}",
    lambda w: f"env FOO=1 {w}",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PLAIN_HEAD), st.sampled_from(range(len(HEAD_TRANSFORMS))))
def test_obfuscating_the_command_word_stays_dangerous(command: str, index: int) -> None:
    head, rest = re.split(r"(?=[ \n])", command, maxsplit=1)
    assert classify_bash(HEAD_TRANSFORMS[index](head) + rest).dangerous


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_classifier_never_raises(text: str) -> None:
    verdict = classify_bash(text)
    assert not (verdict.dangerous and verdict.auto_safe)
    assert verdict.dangerous == bool(verdict.reasons)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="rm -f$'\"\\`(){};|&<>*?~/.ab\n", max_size=40))
def test_shell_metacharacter_soup_never_raises(text: str) -> None:
    classify_bash(text)


def test_huge_or_deeply_nested_input_fails_closed() -> None:
    assert classify_bash("ls " + "a" * 30_000).dangerous
    assert classify_bash("ls\x00").dangerous
    nested = "sh -c 'x'"
    for _ in range(10):
        nested = "sh -c " + repr(nested)
    assert classify_bash(nested).dangerous
    assert classify_bash("(" * 3000 + "ls" + ")" * 3000).dangerous


# Inputs that made tree-sitter-bash 0.25.1 segfault here (found by the property test
# below; upstream tree-sitter-bash issue #337). A child process runs them, so a
# regression fails this test instead of killing the whole test run.
PARSER_CRASHERS = ["{\U000c8401&", "\u0092{\U000c8401&", "{\U00031860", "echo {x} \U0001f600"]
_CLASSIFY_CRASHERS = """
import json, sys
from bareagent.permission import classify_bash
for text in json.loads(sys.argv[1]):
    verdict = classify_bash(text)
    assert verdict.dangerous and not verdict.auto_safe, (text, verdict)
    assert "parser cannot take" in verdict.reasons[0], verdict.reasons
print("ok")
"""


def test_inputs_that_crash_the_parser_are_never_parsed() -> None:
    import json
    import subprocess
    import sys

    for _ in range(3):  # the crash depended on memory layout: it did not happen every time
        result = subprocess.run(
            [sys.executable, "-c", _CLASSIFY_CRASHERS, json.dumps(PARSER_CRASHERS)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert (result.returncode, result.stdout) == (0, "ok\n"), result.stderr
    # Non-BMP characters without a `{` before them, and braces alone, are parsed as usual.
    assert classify_bash("echo \U0001f600").auto_safe
    assert classify_bash("echo \U0001f600 {a,b}").auto_safe
    assert classify_bash("ls {a,b}").auto_safe


# --- performance -----------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_classification_is_fast() -> None:
    commands = [c for _, c in SAFE + DANGEROUS]
    uncached = cached_classify.__wrapped__
    start = time.perf_counter()
    for command in commands:
        uncached(command)
    average = (time.perf_counter() - start) / len(commands)
    assert average < 0.002, f"{average * 1000:.3f} ms per command"
