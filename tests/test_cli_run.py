"""`bareagent run` and the REPL as a user runs them: a subprocess, the real SDKs, the
scripted server standing in for the model through the SDKs' base-URL variables."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from bareagent.testing import ScriptedLLMServer

pytestmark = pytest.mark.timeout(60)


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bareagent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=45,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def base_env() -> dict[str, str]:
    env = dict(os.environ)
    env["ANTHROPIC_API_KEY"] = "test-key"
    env["OPENAI_API_KEY"] = "test-key"
    return env


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    _gone, alive = psutil.wait_procs(
        [p for p in psutil.Process().children(recursive=True) if p.pid not in before], timeout=5
    )
    assert not alive, f"processes left behind: {alive}"


WRITE_SCRIPT: dict[str, Any] = {
    "models": ["test-model"],
    "turns": [
        {
            "tool_calls": [
                {"name": "write_file", "input": {"file_path": "out/hello.txt", "content": "hi!"}}
            ]
        },
        {"text": "I wrote out/hello.txt.", "when": {"last_user_contains": "Wrote 3 characters"}},
    ],
}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_run_writes_a_file_end_to_end(
    provider: str, workspace: Path, base_env: dict[str, str]
) -> None:
    with ScriptedLLMServer(WRITE_SCRIPT) as server:
        base_env["ANTHROPIC_BASE_URL"] = server.anthropic_base_url
        base_env["OPENAI_BASE_URL"] = server.openai_base_url
        result = run_cli(
            [
                "run",
                "--workspace",
                str(workspace),
                "--mode",
                "auto",
                "--provider",
                provider,
                "--model",
                "test-model",
                "write a greeting",
            ],
            base_env,
            workspace,
        )
    assert result.returncode == 0, result.stderr
    assert (workspace / "out" / "hello.txt").read_text() == "hi!"
    assert result.stdout.strip() == "I wrote out/hello.txt."
    assert "write_file" in result.stderr
    assert len(server.requests) == 2


def test_default_mode_without_tty_denies_write(workspace: Path, base_env: dict[str, str]) -> None:
    script = {
        "turns": [
            WRITE_SCRIPT["turns"][0],
            {"text": "denied as expected", "when": {"last_user_contains": "User denied."}},
        ]
    }
    with ScriptedLLMServer(script) as server:
        base_env["ANTHROPIC_BASE_URL"] = server.anthropic_base_url
        result = run_cli(
            ["run", "-w", str(workspace), "--model", "m", "write it"], base_env, workspace
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "denied as expected"
    assert not (workspace / "out").exists()


def test_plan_mode_blocks_bash(workspace: Path, base_env: dict[str, str]) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "bash", "input": {"command": "touch made-it"}}]},
            {"text": "blocked", "when": {"last_user_contains": "User denied."}},
        ]
    }
    with ScriptedLLMServer(script) as server:
        base_env["ANTHROPIC_BASE_URL"] = server.anthropic_base_url
        result = run_cli(
            ["run", "-w", str(workspace), "--mode", "plan", "--model", "m", "go"],
            base_env,
            workspace,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "blocked"
    assert not (workspace / "made-it").exists()


def assert_one_line_error(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bareagent: error: ")
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


def test_missing_key_is_one_line(workspace: Path, base_env: dict[str, str]) -> None:
    del base_env["ANTHROPIC_API_KEY"]
    result = run_cli(["run", "-w", str(workspace), "--model", "m", "hi"], base_env, workspace)
    assert_one_line_error(result, "ANTHROPIC_API_KEY")


def test_unreachable_server_is_one_line(workspace: Path, base_env: dict[str, str]) -> None:
    (workspace / ".bareagent.toml").write_text("[provider]\nmax_retries = 0\n")
    base_env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"
    result = run_cli(["run", "-w", str(workspace), "--model", "m", "hi"], base_env, workspace)
    assert_one_line_error(result, "LLM call failed")


def test_bad_model_is_one_line(workspace: Path, base_env: dict[str, str]) -> None:
    with ScriptedLLMServer({"models": ["real-model"], "turns": [{"text": "x"}]}) as server:
        base_env["OPENAI_BASE_URL"] = server.openai_base_url
        result = run_cli(
            ["run", "-w", str(workspace), "--provider", "openai", "--model", "nope", "hi"],
            base_env,
            workspace,
        )
    assert_one_line_error(result, "nope")


def test_bad_config_is_one_line(workspace: Path, base_env: dict[str, str]) -> None:
    (workspace / ".bareagent.toml").write_text("[provider]\nmodle = 'x'\n")
    result = run_cli(["run", "-w", str(workspace), "hi"], base_env, workspace)
    assert_one_line_error(result, "unknown key 'modle'")


def test_bad_workspace_is_one_line(tmp_path: Path, base_env: dict[str, str]) -> None:
    result = run_cli(["run", "-w", str(tmp_path / "missing"), "hi"], base_env, tmp_path)
    assert_one_line_error(result, "workspace is not a directory")


def test_repl_slash_commands_and_a_turn(workspace: Path, base_env: dict[str, str]) -> None:
    script = {"turns": [{"text": "pong"}]}
    with ScriptedLLMServer(script) as server:
        base_env["ANTHROPIC_BASE_URL"] = server.anthropic_base_url
        stdin = "/mode\n/plan\n/mode\n/bogus\nping\n/clear\n/help\n/exit\n"
        result = run_cli(["-w", str(workspace), "--model", "m"], base_env, workspace, stdin)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Permission mode: default" in out
    assert "Permission mode: plan" in out
    assert "Unknown command /bogus" in out
    assert "pong" in out
    assert "Conversation cleared." in out
    assert "/bypass" in out  # help text
    assert len(server.requests) == 1


def test_help_lists_commands(workspace: Path, base_env: dict[str, str]) -> None:
    result = run_cli(["--help"], base_env, workspace)
    assert result.returncode == 0
    assert "run" in result.stdout
