"""`bareagent team ...` and the REPL's `/team` as a user runs them: subprocesses, the real
Anthropic SDK and the scripted server (through ANTHROPIC_BASE_URL).

Teammates spawned by the CLI are detached and outlive the command, so their spawner
helper is orphaned when the command exits; `subreaper` adopts and reaps it, and
`no_leftovers` proves every process is gone at the end.
"""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from bareagent.orchestrator.team import Team
from bareagent.testing import ScriptedLLMServer
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    subreaper,
    wait_until,
    workspace,
)

pytestmark = pytest.mark.timeout(90)

SCRIPT: dict[str, Any] = {
    "turns": [
        {"when": {"last_user_contains": "Message from main:\nhello"}, "text": "hi main"},
        {
            "when": {"last_user_contains": "PLAN-1: add a flag"},
            "text": "APPROVE: PLAN-1 is small and tested",
        },
        {"when": {"last_user_contains": "Message from main:\nrepl-ping"}, "text": "repl-pong"},
        {
            "when": {"last_user_contains": "PLAN-2: rename the API"},
            "text": "REJECT: PLAN-2 breaks the API",
        },
    ]
}


def team_cli(
    args: list[str], env: dict[str, str], workspace: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bareagent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=workspace,
        timeout=60,
    )


def one_line_error(result: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bareagent: error: "), lines
    assert re.search(pattern, lines[0]), lines[0]


@pytest.fixture
def env(home: Path, marker: str) -> dict[str, str]:
    values = dict(os.environ)
    values["BAREAGENT_HOME"] = str(home)
    values["ANTHROPIC_API_KEY"] = "test-key"
    values["BAREAGENT_TEST_MARKER"] = marker
    return values


def test_team_subcommands_end_to_end(
    workspace: Path, env: dict[str, str], no_leftovers: None, subreaper: None
) -> None:
    with ScriptedLLMServer(SCRIPT) as server:
        env["ANTHROPIC_BASE_URL"] = server.anthropic_base_url
        out = team_cli(
            ["team", "register", "alice", "reviewer", "You review plans."], env, workspace
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "Registered teammate alice (reviewer)."
        one_line_error(
            team_cli(["team", "register", "alice", "x", "y"], env, workspace), "already registered"
        )
        one_line_error(team_cli(["team", "register", "main", "x", "y"], env, workspace), "main")
        one_line_error(
            team_cli(["team", "send", "alice", "hello"], env, workspace), "alice is not running"
        )

        spawned = team_cli(["team", "spawn", "alice", "--model", "m"], env, workspace)
        assert spawned.returncode == 0, spawned.stderr
        found = re.fullmatch(
            r"Spawned teammate alice \(worker (mate-\w+), pid (\d+)\)\.", spawned.stdout.strip()
        )
        assert found, spawned.stdout
        worker_id, pid = found.group(1), int(found.group(2))
        again = team_cli(["team", "spawn", "alice", "--model", "m"], env, workspace)
        assert again.stdout.strip() == "Teammate alice is already running."
        # The command that spawned it has exited; the teammate runs on, in another process.
        assert psutil.pid_exists(pid)
        with Team(workspace) as team:
            assert team.list()[0]["running"] is True
            assert team.list()[0]["worker_id"] == worker_id

        listed = team_cli(["team", "list", "--json"], env, workspace)
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        assert [(r["name"], r["running"], r["pid"]) for r in rows] == [("alice", True, pid)]

        sent = team_cli(["team", "send", "alice", "hello", "--wait", "30"], env, workspace)
        assert sent.returncode == 0, sent.stderr
        first, second = sent.stdout.strip().splitlines()
        assert re.fullmatch(r"Sent message [0-9a-f]{12}-[0-9a-f]{16} to alice", first), first
        assert second == "Team response from alice: hi main"

        review = team_cli(
            ["team", "review", "alice", "PLAN-1: add a flag", "--timeout", "30"], env, workspace
        )
        assert review.returncode == 0, review.stderr
        assert review.stdout.strip() == "APPROVE: PLAN-1 is small and tested"
        prompts = [json.dumps(r.body) for r in server.requests]
        assert sum("Review this plan from main" in p for p in prompts) == 1

        for verb in (["spawn", "ghost"], ["send", "ghost", "x"], ["review", "ghost", "p"]):
            one_line_error(team_cli(["team", *verb], env, workspace), "Unknown teammate 'ghost'")
        one_line_error(team_cli(["team", "shutdown", "ghost"], env, workspace), "Unknown teammate")
        one_line_error(team_cli(["team"], env, workspace), "team needs a verb")
        one_line_error(team_cli(["team", "remove", "alice"], env, workspace), "alice is running")

        down = team_cli(["team", "shutdown", "alice", "--timeout", "15"], env, workspace)
        assert down.returncode == 0, down.stderr
        assert down.stdout.strip() == "Teammate alice shut down."
        assert wait_until(lambda: not psutil.pid_exists(pid) or _zombie(pid), 5)
        rows = json.loads(team_cli(["team", "list", "--json"], env, workspace).stdout)
        assert rows[0]["running"] is False and rows[0]["status"] == "exited"
        with Team(workspace) as team:
            assert team.list()[0]["running"] is False
        assert team_cli(["team", "shutdown", "alice"], env, workspace).stdout.strip() == (
            "Teammate alice is not running."
        )
        removed = team_cli(["team", "remove", "alice"], env, workspace)
        assert removed.stdout.strip() == "Removed teammate alice."


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def test_repl_team_commands(
    workspace: Path, env: dict[str, str], no_leftovers: None, subreaper: None
) -> None:
    stdin = "\n".join(
        [
            "/team list",
            '/team register bob reviewer "You review plans carefully."',
            "/team list",
            "/team spawn bob",
            "/team spawn bob",
            "/team send bob repl-ping",
            "/team review bob PLAN-2: rename the API",
            "/team send ghost hi",
            "/team list",
            "/team shutdown bob",
            "/exit",
            "",
        ]
    )
    with ScriptedLLMServer(SCRIPT) as server:
        env["ANTHROPIC_BASE_URL"] = server.anthropic_base_url
        result = team_cli(["-w", str(workspace), "--model", "m"], env, workspace, stdin)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "No teammates registered" in out
    assert "Registered teammate bob (reviewer)." in out
    assert "bob (reviewer): stopped" in out
    assert re.search(r"Spawned teammate bob \(worker mate-\w+, pid \d+\)\.", out)
    assert "Teammate bob is already running." in out
    assert re.search(r"Sent message \S+ to bob", out)
    assert "Review from bob: REJECT: PLAN-2 breaks the API" in out
    # bob answered the message before it took the review: shown at the next prompt.
    assert "Team response from bob: repl-pong" in out
    assert out.count("REJECT: PLAN-2") == 1  # the review reply is not shown twice
    assert "Unknown teammate 'ghost'" in out
    assert re.search(r"bob \(reviewer\): running, (idle|running), pid \d+", out)
    assert "Teammate bob shut down." in out
    with Team(workspace) as team:
        assert team.list()[0]["running"] is False
        assert team.manager.get("bob").system_prompt == "You review plans carefully."
