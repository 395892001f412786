"""`ps` and `kill` on teammates: a SHUTDOWN request first, a tree kill when it is ignored.

Teammates talk to a scripted model (the real SDK against a local server); they are
started by a short-lived owner process, as `bareagent team spawn` starts them.
"""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from bareagent.orchestrator.registry import Registry
from bareagent.orchestrator.state import state_root
from bareagent.testing import ScriptedLLMServer
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    subreaper,
    wait_until,
    workspace,
)

pytestmark = pytest.mark.timeout(60)

SPAWN_SCRIPT = r"""
import os, sys
from bareagent.config import load_config
from bareagent.core.session import guard_from_config
from bareagent.orchestrator.team import Team

workspace, name = sys.argv[1:3]
config = load_config(workspace)
team = Team(workspace, config, guard_from_config(config))
print(team.spawn(name), flush=True)
os._exit(0)  # the teammate is detached: it stays after its spawner is gone
"""


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    script = {"turns": [{"text": "Looking into it.", "delay": 30}]}
    with ScriptedLLMServer(script) as srv:
        yield srv


@pytest.fixture
def env(server: ScriptedLLMServer, home: Path) -> dict[str, str]:
    values = dict(os.environ)
    values["ANTHROPIC_API_KEY"] = "test-key"
    values["ANTHROPIC_BASE_URL"] = server.anthropic_base_url
    return values


def cli(workspace: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bareagent", *args, "-w", str(workspace)],
        capture_output=True,
        text=True,
        timeout=40,
        env=env,
    )


def spawn_teammate(workspace: Path, env: dict[str, str], name: str, marker: str) -> int:
    registered = cli(workspace, env, "team", "register", name, "reviewer", f"Review. {marker}")
    assert registered.returncode == 0, registered.stderr
    out = subprocess.run(
        [sys.executable, "-c", SPAWN_SCRIPT, str(workspace), name],
        capture_output=True,
        text=True,
        timeout=40,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"Spawned teammate {name}"), out.stdout
    return int(out.stdout.rsplit("pid ", 1)[1].rstrip(").\n"))


def ps_row(workspace: Path, env: dict[str, str], *extra: str) -> dict[str, Any]:
    result = cli(workspace, env, "ps", "--json", *extra)
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert isinstance(row, dict)
    return row


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def test_idle_teammate_stops_on_the_shutdown_request(
    home: Path,
    workspace: Path,
    env: dict[str, str],
    marker: str,
    no_leftovers: None,
    subreaper: None,
) -> None:
    pid = spawn_teammate(workspace, env, "alice", marker)
    row = ps_row(workspace, env)
    assert (row["kind"], row["name"], row["pid"]) == ("teammate", "alice", pid)
    assert row["status"] in ("running", "idle") and row["rss_bytes"] > 0
    result = cli(workspace, env, "kill", "alice", "--grace", "15")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"teammate alice ({row['id']}) shut down on request"
    assert gone(pid)
    row = ps_row(workspace, env, "--all")
    assert (row["status"], row["exit_code"]) == ("killed", 0)  # it exited by itself, asked to
    log = cli(workspace, env, "logs", "alice")
    assert "SHUTDOWN from main" in log.stdout


def test_busy_teammate_is_killed_after_the_grace(
    home: Path,
    workspace: Path,
    env: dict[str, str],
    server: ScriptedLLMServer,
    marker: str,
    no_leftovers: None,
    subreaper: None,
) -> None:
    pid = spawn_teammate(workspace, env, "bob", marker)
    sent = cli(workspace, env, "team", "send", "bob", "please review src/x.py")
    assert sent.returncode == 0, sent.stderr
    # The model takes 30 s to answer: the SHUTDOWN cannot be read before the grace ends.
    assert wait_until(lambda: len(server.requests) == 1, 20)
    worker_id = ps_row(workspace, env)["id"]
    result = cli(workspace, env, "kill", "bob", "--grace", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"killed teammate bob ({worker_id}) (pid {pid})"
    assert gone(pid)
    record = Registry(state_root(workspace)).get(worker_id)
    assert record is not None and record.status == "killed" and record.exit_code != 0
