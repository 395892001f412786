"""Teammates as real worker processes, driven by the scripted model (real Anthropic SDK).

Every test shuts its teammates down and proves no process is left (`no_leftovers`).
"""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from bareagent.config import load_config
from bareagent.core.session import guard_from_config
from bareagent.mailbox import Protocol, ProtocolFSM, decode
from bareagent.orchestrator.registry import process_matches
from bareagent.orchestrator.supervisor import Supervisor
from bareagent.orchestrator.team import Team
from bareagent.planning.tasks import TaskManager
from bareagent.testing import ScriptedLLMServer
from bareagent.testing.wire_requests import RequestView, anthropic_view
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    supervisor,
    wait_until,
    workspace,
)

pytestmark = pytest.mark.timeout(60)


def _config(server: ScriptedLLMServer, workspace: Path, tmp_path: Path) -> Any:
    return load_config(
        workspace,
        overrides={
            "provider": {
                "name": "anthropic",
                "model": "scripted-model",
                "api_key": "test-key",
                "base_url": server.anthropic_base_url,
                "max_retries": 0,
                "timeout": 20.0,
            },
            "agent": {"stream": False},
            # Teammates are fail-closed: team_send would be denied without this rule.
            "permission": {"mode": "auto", "allow": ["team_send"]},
        },
        user_file=tmp_path / "no-user-config.toml",
    )


@contextmanager
def running_team(
    supervisor: Supervisor, server: ScriptedLLMServer, tmp_path: Path, *names: str
) -> Iterator[Team]:
    """A Team for `main`, with `names` registered; every teammate is stopped on exit."""
    config = _config(server, supervisor.workspace, tmp_path)
    team = Team(supervisor.workspace, config, guard_from_config(config), supervisor=supervisor)
    for name in names:
        team.manager.register(name, f"{name}'s role", f"You are {name}.")
    try:
        yield team
    finally:
        for name in names:
            team.shutdown(name, timeout=5.0)
        team.close()


def views(server: ScriptedLLMServer) -> list[tuple[int | None, RequestView]]:
    """(consumed turn index, request view) for every model request, in arrival order."""
    return [(r.turn, anthropic_view(r.body)) for r in server.requests if isinstance(r.body, dict)]


def wait_idle(team: Team, *names: str) -> None:
    """Until every named teammate has finished starting and sleeps in its loop."""

    def idle() -> bool:
        rows = {r["name"]: r for r in team.list()}
        return all(rows[n]["running"] and rows[n]["status"] == "idle" for n in names)

    assert wait_until(idle, 20), team.list()


def worker_log(team: Team, name: str) -> str:
    record = team.records(name)[-1]
    return Path(record.log_path).read_text()


def test_two_teammates_never_run_the_same_task(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    count = 6
    script = {
        "turns": [
            {"when": {"last_user_contains": f"Task task-{i}:"}, "text": f"finished task-{i}"}
            for i in range(1, count + 1)
        ]
    }
    with (
        ScriptedLLMServer(script) as server,
        running_team(supervisor, server, tmp_path, "alice", "bob") as team,
    ):
        assert team.spawn("alice").startswith("Spawned teammate alice (worker mate-")
        assert team.spawn("bob").startswith("Spawned teammate bob (worker mate-")
        wait_idle(team, "alice", "bob")
        # All tasks appear at once (one atomic rename): both teammates wake on the same
        # change, see the same ready list and race for every claim.
        staging = TaskManager(tmp_path / "staging.json")
        for i in range(1, count + 1):
            staging.create(f"job {i}")
        os.replace(staging.path, workspace / ".tasks.json")
        tasks = TaskManager(workspace / ".tasks.json")
        assert wait_until(lambda: all(t["status"] == "done" for t in tasks.list()), 30), (
            tasks.list()
        )
        requests = views(server)
        logs = {n: worker_log(team, n) for n in ("alice", "bob")}
        reports = _collect_inbox(team, count)
    runners: dict[str, list[str]] = {}
    for _turn, view in requests:
        match = re.search(r"Task (task-\d+):", view.last_user)
        if match:
            who = re.search(r"teammate '(\w+)'", view.system)
            assert who is not None
            runners.setdefault(match.group(1), []).append(who.group(1))
    assert sorted(runners) == sorted(f"task-{i}" for i in range(1, count + 1))
    for task_id, who in runners.items():
        assert len(who) == 1, f"{task_id} ran {len(who)} times: {who}"
        claims = [
            n for n, text in logs.items() for _ in re.finditer(rf"claimed task {task_id}:", text)
        ]
        assert claims == who, (task_id, claims, who)
    assert len(requests) == count
    done = sorted(line for line in reports if " done: finished task-" in line)
    assert len(done) == count, reports


def _collect_inbox(team: Team, expected: int, timeout: float = 10.0) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while len(lines) < expected and time.monotonic() < deadline:
        lines.extend(team.inbox.poll())
        time.sleep(0.05)
    return lines


def test_shutdown_stops_a_teammate_and_old_shutdown_mail_is_ignored(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    with (
        ScriptedLLMServer({"turns": []}) as server,
        running_team(supervisor, server, tmp_path, "alice") as team,
    ):
        bus = team.bus
        old = ProtocolFSM(bus, "main").request("alice", Protocol.SHUTDOWN, "from a past life")
        time.sleep(0.01)
        team.spawn("alice")
        # The old request is consumed (acknowledged) and ignored: alice keeps running.
        assert wait_until(lambda: bus.cursor("alice").last_id == old.id, 15)
        wait_idle(team, "alice")
        record = team.live_records("alice")[0]
        assert record.pid is not None and psutil.pid_exists(record.pid)
        assert "sent before this teammate started" in worker_log(team, "alice")
        assert ProtocolFSM(bus, "main").wait_response(old.id, 0.3) is None
        rows = Team(workspace).list()  # a fresh handle reads the same registry
        assert rows[0]["running"] is True and rows[0]["pid"] == record.pid

        assert team.shutdown("alice", timeout=10) == "Teammate alice shut down."
        assert not process_matches(record.pid, record.create_time)
        assert not psutil.pid_exists(record.pid) or (
            psutil.Process(record.pid).status() == psutil.STATUS_ZOMBIE
        )
        stored = team.registry.read(record.id)
        assert stored is not None and stored.status == "exited" and stored.exit_code == 0
        assert team.list()[0]["running"] is False
        assert team.list()[0]["status"] == "exited"
        assert not bus.has_unread("main")  # the `ack` reply was consumed by shutdown
        assert len(server.requests) == 0  # no turn was spent on either SHUTDOWN
        assert team.shutdown("alice") == "Teammate alice is not running."


def test_plan_approval_round_trips_between_two_teammates_and_main(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    plan = json.dumps({"protocol": "plan_approval", "content": "PLAN-42: add a cache"})
    alice, bob = {"system_contains": "teammate 'alice'"}, {"system_contains": "teammate 'bob'"}
    script = {
        "turns": [
            {
                "when": {**alice, "last_user_contains": "Message from main"},
                "tool_calls": [
                    {"name": "team_send", "input": {"to_agent": "bob", "content": plan}}
                ],
            },
            {
                "when": {**alice, "last_user_contains": "Sent message"},
                "text": "Asked bob to review PLAN-42.",
            },
            {
                "when": {**bob, "last_user_contains": "Review this plan from alice"},
                "text": "APPROVE: PLAN-42 is sound",
            },
            {
                "when": {**alice, "last_user_contains": "[plan_approval]: APPROVE: PLAN-42"},
                "tool_calls": [
                    {
                        "name": "team_send",
                        "input": {"to_agent": "main", "content": "bob approved PLAN-42"},
                    }
                ],
            },
            {"when": {**alice, "last_user_contains": "Sent message"}, "text": "Reported."},
            {
                "when": {**bob, "last_user_contains": "Review this plan from main"},
                "text": "REJECT: PLAN-7 has no tests",
            },
        ]
    }
    with (
        ScriptedLLMServer(script) as server,
        running_team(supervisor, server, tmp_path, "alice", "bob") as team,
    ):
        team.spawn("alice")
        team.spawn("bob")
        wait_idle(team, "alice", "bob")
        assert team.send("alice", "Get your plan reviewed by bob.").startswith("Sent message ")
        lines: list[str] = []
        assert wait_until(lambda: bool(lines.extend(team.inbox.poll())) or len(lines) >= 2, 30), (
            lines
        )
        # main <-> bob through `team review` as well.
        review = team.review("bob", "PLAN-7: ship it", timeout=20)
        bob_mail, _ = team.bus.read_from("bob", 0)
        alice_mail, _ = team.bus.read_from("alice", 0)
        requests = views(server)
    assert lines == [
        "Team response from alice: Asked bob to review PLAN-42.",
        "Team response from alice: bob approved PLAN-42",
    ]
    assert review == "REJECT: PLAN-7 has no tests"
    from_alice = [m for m in bob_mail if m.from_agent == "alice"]
    assert len(from_alice) == 1 and from_alice[0].msg_type == "request"
    assert decode(from_alice[0]) == (Protocol.PLAN_APPROVAL, "PLAN-42: add a cache")
    replies = [m for m in alice_mail if m.from_agent == "bob"]
    assert len(replies) == 1 and replies[0].in_reply_to == from_alice[0].id
    assert decode(replies[0]) == (Protocol.PLAN_APPROVAL, "APPROVE: PLAN-42 is sound")
    review_prompts = [v.last_user for _t, v in requests if "Review this plan" in v.last_user]
    assert len(review_prompts) == 2
    assert all("APPROVE or REJECT" in p for p in review_prompts)
    assert "PLAN-42: add a cache" in review_prompts[0]
    assert server.remaining_turns == 0


def test_mail_sent_mid_turn_is_injected_at_the_next_iteration(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    script = {
        "turns": [
            {
                "when": {"last_user_contains": "Task task-1:"},
                "delay": 1.0,
                "tool_calls": [{"name": "bash", "input": {"command": "echo step-one"}}],
            },
            {
                "when": {"last_user_contains": "Team message from main: MIDTURN-NOTE"},
                "text": "Saw the note; task done.",
            },
            {"when": {"last_user_contains": "Message from main:\nMIDTURN-NOTE"}, "text": "noted"},
        ]
    }
    with (
        ScriptedLLMServer(script) as server,
        running_team(supervisor, server, tmp_path, "alice") as team,
    ):
        team.spawn("alice")
        wait_idle(team, "alice")
        tasks = TaskManager(workspace / ".tasks.json")
        tasks.create("long job")
        # The first model call of the task is being answered (with a delay): send now.
        assert wait_until(lambda: len(server.requests) >= 1, 20)
        team.send("alice", "MIDTURN-NOTE: also update the changelog")
        assert wait_until(lambda: tasks.get("task-1")["status"] == "done", 20)
        lines = _collect_inbox(team, 2)
        requests = views(server)
    turns = [t for t, _v in requests]
    assert turns == [0, 1, 2], turns
    mid = requests[1][1]
    # Still the task's turn (the bash result comes back) and the note rides along with it
    # (a later system message reaches Anthropic inside the user turn).
    assert "step-one" in mid.last_user
    assert "Team message from main: MIDTURN-NOTE: also update the changelog" in mid.last_user
    assert "MIDTURN-NOTE" not in json.dumps(requests[0][1].body)
    # After the turn the request is still answered (mail is acked only once handled).
    assert "Message from main:\nMIDTURN-NOTE" in requests[2][1].last_user
    assert "Team response from alice: noted" in lines
    assert any("Task task-1 (long job) done: Saw the note" in line for line in lines)


def test_shutdown_mid_turn_stops_at_the_next_iteration_and_releases_the_task(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    script = {
        "turns": [
            {
                "when": {"last_user_contains": "Task task-1:"},
                "delay": 1.0,
                "tool_calls": [{"name": "bash", "input": {"command": "echo step-one"}}],
            },
            {"text": "never reached"},
        ]
    }
    with (
        ScriptedLLMServer(script) as server,
        running_team(supervisor, server, tmp_path, "alice") as team,
    ):
        team.spawn("alice")
        wait_idle(team, "alice")
        tasks = TaskManager(workspace / ".tasks.json")
        tasks.create("long job")
        assert wait_until(lambda: len(server.requests) >= 1, 20)
        assert wait_until(lambda: tasks.get("task-1")["status"] == "in_progress", 5)
        record = team.live_records("alice")[0]
        assert team.shutdown("alice", timeout=15) == "Teammate alice shut down."
        stored = team.registry.read(record.id)
        log_text = worker_log(team, "alice")
    assert len(server.requests) == 1  # the aborted turn made no second model call
    assert tasks.get("task-1")["status"] == "pending"  # back for someone else
    assert stored is not None and stored.status == "exited"
    assert "released task task-1" in log_text


def test_a_teammate_that_does_not_stop_is_killed_and_its_task_released(
    supervisor: Supervisor, workspace: Path, tmp_path: Path
) -> None:
    script = {
        "turns": [{"when": {"last_user_contains": "Task task-1:"}, "delay": 8.0, "text": "x"}]
    }
    with (
        ScriptedLLMServer(script) as server,
        running_team(supervisor, server, tmp_path, "alice") as team,
    ):
        team.spawn("alice")
        wait_idle(team, "alice")
        tasks = TaskManager(workspace / ".tasks.json")
        tasks.create("slow job")
        assert wait_until(lambda: len(server.requests) >= 1, 20)
        record = team.live_records("alice")[0]
        started = time.monotonic()
        out = team.shutdown("alice", timeout=1.0)
        took = time.monotonic() - started
        stored = team.registry.read(record.id)
    assert out == f"Teammate alice did not stop within 1 seconds; killed it (pid {record.pid})."
    assert took < 6, took
    assert not process_matches(record.pid, record.create_time)
    assert stored is not None and stored.status == "killed"
    assert tasks.get("task-1")["status"] == "pending"


def test_claim_conflict_moves_on_to_the_next_task(tmp_path: Path) -> None:
    """The compare-and-set claim: a task someone else claimed first is skipped."""
    from bareagent.worker.teammate import claim_next

    path = tmp_path / ".tasks.json"
    tasks = TaskManager(path)
    for title in ("first", "second"):
        tasks.create(title)
    stale = tasks.ready_tasks()  # what we saw before the other teammate claimed task-1
    TaskManager(path).update("task-1", status="in_progress", expected_status="pending")
    claimed = claim_next(tasks, stale)
    assert claimed is not None and claimed["id"] == "task-2"
    assert claim_next(tasks, stale) is None  # both are taken now
    assert [t["status"] for t in tasks.list()] == ["in_progress", "in_progress"]
