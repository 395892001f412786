"""bash tool and shell runner: output, errors, timeouts and process cleanup."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bareagent.core.handlers.bash import run_bash
from bareagent.sandbox.runner import (
    ShellResult,
    format_seconds,
    format_shell_result,
    run_shell,
    validate_timeout,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="runs bash")


def _alive_with(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if marker in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _wait_none_alive(marker: str, timeout: float = 3.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    alive = _alive_with(marker)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = _alive_with(marker)
    return alive


@pytest.fixture()
def marker() -> Iterator[str]:
    """A unique `sleep` argument; teardown proves (and enforces) that nothing survived."""
    token = f"300.{uuid.uuid4().int % 10**9:09d}"
    yield token
    leftovers = _wait_none_alive(token, timeout=1.0)
    for proc in leftovers:
        proc.kill()
    assert not leftovers, f"processes left behind: {leftovers}"


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return tmp_path


def test_success_returns_raw_output(ws: Path) -> None:
    assert run_bash(ws, "echo hello") == "hello\n"


def test_empty_output_is_empty_string(ws: Path) -> None:
    assert run_bash(ws, "true") == ""


def test_cwd_is_workspace(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    (ws / "marker-file").write_text("")
    assert run_bash(ws, "pwd").strip() == str(ws.resolve())
    assert "marker-file" in run_bash(ws, "ls")


def test_stderr_is_merged_in_order(ws: Path) -> None:
    assert run_bash(ws, "echo out; echo err >&2; echo out2") == "out\nerr\nout2\n"


def test_nonzero_exit_message_with_output(ws: Path) -> None:
    assert run_bash(ws, "echo oops >&2; exit 3") == "Command failed with exit code 3\noops\n"


def test_nonzero_exit_message_without_output(ws: Path) -> None:
    assert run_bash(ws, "exit 7") == "Command failed with exit code 7"


def test_invalid_utf8_is_replaced(ws: Path) -> None:
    assert run_bash(ws, r"printf 'a\377b'") == "a\ufffdb"


def test_valid_utf8_is_kept(ws: Path) -> None:
    assert run_bash(ws, "printf 'h\\303\\251 \\342\\234\\223'") == "hé ✓"


def test_stdin_is_closed(ws: Path) -> None:
    # `cat` with no input must not hang waiting for a terminal.
    assert run_bash(ws, "cat; echo done", timeout=5) == "done\n"


@pytest.mark.timeout(10)
def test_timeout_kills_background_and_foreground(ws: Path, marker: str) -> None:
    started = time.monotonic()
    out = run_bash(ws, f"echo partial; sleep {marker} & sleep {marker}", timeout=1)
    elapsed = time.monotonic() - started
    assert out.startswith("Error: command timed out after 1 seconds\n")
    assert "partial" in out
    assert elapsed < 3.0
    assert not _wait_none_alive(marker)


@pytest.mark.timeout(10)
def test_timeout_kills_processes_ignoring_sigterm(ws: Path, marker: str) -> None:
    started = time.monotonic()
    out = run_bash(ws, f"(trap '' TERM; sleep {marker}) & sleep {marker}", timeout=1)
    assert out.startswith("Error: command timed out after 1 seconds")
    assert time.monotonic() - started < 4.0
    assert not _wait_none_alive(marker)


@pytest.mark.timeout(10)
def test_timeout_returns_even_if_escaped_grandchild_holds_pipe(ws: Path, marker: str) -> None:
    # A double fork into a new session escapes both the psutil tree and the process
    # group, and keeps our pipe open; the call must still come back promptly.
    started = time.monotonic()
    out = run_bash(ws, f"(setsid sleep {marker} &); echo before; sleep {marker}", timeout=1)
    elapsed = time.monotonic() - started
    assert out.startswith("Error: command timed out after 1 seconds")
    assert "before" in out
    assert elapsed < 3.5
    for proc in _alive_with(marker):  # the documented escapee; clean it up ourselves
        proc.kill()


@pytest.mark.timeout(10)
def test_exit_with_background_child_holding_pipe_returns_and_cleans_up(
    ws: Path, marker: str
) -> None:
    started = time.monotonic()
    out = run_bash(ws, f"sleep {marker} & echo started", timeout=20)
    assert out == "started\n"
    assert time.monotonic() - started < 3.0
    assert not _wait_none_alive(marker)


@pytest.mark.timeout(10)
def test_exit_with_redirected_background_child_cleans_up(ws: Path, marker: str) -> None:
    out = run_bash(ws, f"sleep {marker} >/dev/null 2>&1 & echo ok", timeout=20)
    assert out == "ok\n"
    assert not _wait_none_alive(marker)


def test_waited_background_output_is_kept(ws: Path) -> None:
    assert run_bash(ws, "(sleep 0.1; echo late) & echo early; wait") == "early\nlate\n"


def test_fractional_timeout_is_formatted(ws: Path, marker: str) -> None:
    out = run_bash(ws, f"sleep {marker}", timeout=0.5)
    assert out == "Error: command timed out after 0.5 seconds"


@pytest.mark.parametrize("bad", [0, -1, -0.5, "30", None, True, float("nan"), float("inf")])
def test_invalid_timeout_raises(ws: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="timeout"):
        run_bash(ws, "echo x", timeout=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_invalid_command_raises(ws: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="command"):
        run_bash(ws, bad)  # type: ignore[arg-type]


def test_run_shell_result_fields(ws: Path) -> None:
    result = run_shell("echo hi; exit 4", cwd=ws, timeout=5)
    assert result.output == "hi\n"
    assert result.exit_code == 4
    assert result.timed_out is False
    assert 0 < result.duration < 5


def test_run_shell_timeout_fields(ws: Path, marker: str) -> None:
    result = run_shell(f"sleep {marker}", cwd=ws, timeout=0.3)
    assert result.timed_out is True
    assert result.exit_code is None
    assert result.duration < 2.5


def test_run_shell_env(ws: Path) -> None:
    env = {**os.environ, "BAREAGENT_TEST_VAR": "value-42"}
    assert run_shell("echo $BAREAGENT_TEST_VAR", cwd=ws, timeout=5, env=env).output == "value-42\n"


def test_huge_output_keeps_head_and_tail(ws: Path) -> None:
    cmd = "printf 'HEAD'; head -c 100000 /dev/zero | tr '\\0' a; printf 'TAIL'"
    result = run_shell(cmd, cwd=ws, timeout=10, max_output_bytes=1000)
    assert result.output.startswith("HEAD")
    assert result.output.endswith("TAIL")
    assert "[... 99008 bytes of output omitted ...]" in result.output
    assert len(result.output) < 1100


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (ShellResult("out\n", 0, False, 0.1), "out\n"),
        (ShellResult("", 0, False, 0.1), ""),
        (ShellResult("boom\n", 2, False, 0.1), "Command failed with exit code 2\nboom\n"),
        (ShellResult("", -9, False, 0.1), "Command failed with exit code -9"),
        (ShellResult("part", None, True, 30), "Error: command timed out after 30 seconds\npart"),
        (ShellResult("", None, True, 30), "Error: command timed out after 30 seconds"),
    ],
)
def test_format_shell_result(result: ShellResult, expected: str) -> None:
    assert format_shell_result(result, 30.0) == expected


def test_format_seconds() -> None:
    assert format_seconds(30.0) == "30"
    assert format_seconds(30) == "30"
    assert format_seconds(2.5) == "2.5"
    assert validate_timeout(3) == 3.0


def test_on_output_streams_decoded_text(ws: Path) -> None:
    seen: list[str] = []
    cmd = r"printf 'one\n'; sleep 0.1; printf 'h\303'; sleep 0.1; printf '\251\n'"
    result = run_shell(cmd, cwd=ws, timeout=5, on_output=seen.append)
    assert "".join(seen) == result.output == "one\nhé\n"
    assert len(seen) >= 2


def test_on_output_failure_does_not_break_the_run(ws: Path) -> None:
    def broken(_text: str) -> None:
        raise RuntimeError("listener died")

    result = run_shell("echo a; echo b", cwd=ws, timeout=5, on_output=broken)
    assert result.output == "a\nb\n"
