"""Teammate definitions (`.team.json`), team mail formatting and the `main` inbox.

No processes: these tests only touch files (the team's processes are in
test_team_processes.py and test_team_cli.py).
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from bareagent.mailbox import MessageBus, Protocol, ProtocolFSM
from bareagent.orchestrator.team import Team
from bareagent.orchestrator.team_mail import TeamInbox, mail_line, team_mailbox_dir
from bareagent.orchestrator.teammates import (
    TEAM_FILE,
    TeamError,
    TeammateManager,
    TeamStoreError,
)

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("BAREAGENT_HOME", str(path))
    return path


def test_register_persists_and_round_trips(workspace: Path) -> None:
    manager = TeammateManager(workspace)
    manager.register("alice", "  code   reviewer ", "Review diffs.", {"model": "m-1"})
    manager.register("bob_2", "tester")
    again = TeammateManager(workspace)
    assert again.names() == ["alice", "bob_2"]
    alice = again.get("alice")
    assert alice.role == "code reviewer"
    assert alice.system_prompt == "Review diffs."
    assert alice.provider_config == {"model": "m-1"}
    data = json.loads((workspace / TEAM_FILE).read_text())
    assert data["version"] == 1
    assert [t["name"] for t in data["teammates"]] == ["alice", "bob_2"]


def test_update_and_remove(workspace: Path) -> None:
    manager = TeammateManager(workspace)
    manager.register("alice", "reviewer", "old")
    updated = manager.update("alice", system_prompt="new", provider_config={"max_tokens": 100})
    assert updated.system_prompt == "new" and updated.role == "reviewer"
    assert manager.get("alice").provider_config == {"max_tokens": 100}
    with pytest.raises(TeamError, match="required"):
        manager.update("alice")
    assert manager.remove("alice").name == "alice"
    assert manager.list() == []
    with pytest.raises(TeamError, match="Unknown teammate 'alice'"):
        manager.remove("alice")
    with pytest.raises(TeamError, match="Unknown teammate"):
        manager.update("ghost", role="x")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("main", "'main' is the user's session"),
        ("MAIN", "'main' is the user's session"),
        ("a b", "letters, digits"),
        ("../x", "letters, digits"),
        ("", "letters, digits"),
        ("x" * 65, "at most 64"),
    ],
)
def test_bad_names_are_rejected(workspace: Path, name: str, problem: str) -> None:
    with pytest.raises(TeamError, match=problem):
        TeammateManager(workspace).register(name, "role")
    assert not (workspace / TEAM_FILE).exists()


def test_duplicates_roles_and_provider_config_are_validated(workspace: Path) -> None:
    manager = TeammateManager(workspace)
    manager.register("alice", "reviewer")
    with pytest.raises(TeamError, match="already registered"):
        manager.register("Alice", "other")  # case-insensitive: same mailbox on macOS
    with pytest.raises(TeamError, match="role"):
        manager.register("bob", "   ")
    with pytest.raises(TeamError, match="unknown key 'colour'"):
        manager.register("bob", "r", provider_config={"colour": "red"})
    with pytest.raises(TeamError, match="max_tokens"):
        manager.register("bob", "r", provider_config={"max_tokens": "many"})
    with pytest.raises(TeamError, match="api_key_env"):
        manager.register("bob", "r", provider_config={"api_key": "sk-secret"})
    assert manager.names() == ["alice"]


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"teammates": 3}',
        "[1, 2]",
        '{"teammates": [{"name": "a b", "role": "r"}]}',
        '{"teammates": [{"name": "a", "role": "r", "extra": 1}]}',
        '{"teammates": [{"name": "a", "role": "r"}, {"name": "A", "role": "r"}]}',
    ],
)
def test_corrupt_file_is_a_clear_error_and_never_overwritten(workspace: Path, content: str) -> None:
    path = workspace / TEAM_FILE
    path.write_text(content)
    manager = TeammateManager(workspace)
    with pytest.raises(TeamStoreError) as info:
        manager.list()
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)
    with pytest.raises(TeamStoreError):
        manager.register("zed", "role")
    with pytest.raises(TeamStoreError):
        manager.remove("a")
    assert path.read_text() == content


def test_empty_or_missing_file_is_an_empty_team(workspace: Path) -> None:
    assert TeammateManager(workspace).list() == []
    (workspace / TEAM_FILE).write_text("  \n")
    assert TeammateManager(workspace).list() == []


def _register_many(workspace: str, prefix: str, count: int) -> None:
    manager = TeammateManager(workspace)
    for i in range(count):
        manager.register(f"{prefix}{i}", "worker")


def test_concurrent_registrations_from_processes_lose_nothing(workspace: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_register_many, args=(str(workspace), p, 15)) for p in ("a", "b", "c")
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(20)
        assert proc.exitcode == 0
    names = TeammateManager(workspace).names()
    assert sorted(names) == sorted(f"{p}{i}" for p in "abc" for i in range(15))


def test_send_to_unknown_or_stopped_agents_is_an_error(workspace: Path, home: Path) -> None:
    TeammateManager(workspace).register("alice", "reviewer")
    with Team(workspace) as team:
        with pytest.raises(TeamError, match="Unknown teammate 'ghost'"):
            team.send("ghost", "hello")
        with pytest.raises(TeamError, match="alice is not running"):
            team.send("alice", "hello")
        with pytest.raises(TeamError, match="yourself"):
            team.send("main", "hello")
        with pytest.raises(TeamError, match="team shutdown"):
            team.send("alice", '{"protocol": "shutdown", "content": "x"}')
        with pytest.raises(TeamError, match="Unknown teammate"):
            team.spawn("ghost")
        with pytest.raises(TeamError, match="Unknown teammate"):
            team.shutdown("ghost")
        assert team.shutdown("alice") == "Teammate alice is not running."
        rows = team.list()
        assert rows == [
            {
                "name": "alice",
                "role": "reviewer",
                "system_prompt": "",
                "provider_config": {},
                "running": False,
                "worker_id": None,
                "pid": None,
                "status": None,
                "current_task": None,
            }
        ]
    mailbox = team_mailbox_dir(team.state_root)
    assert not list(mailbox.glob("*.jsonl"))  # nothing was written for refused sends


def test_main_inbox_shows_each_message_once(workspace: Path, home: Path) -> None:
    TeammateManager(workspace).register("bob", "reviewer")
    with Team(workspace) as team:
        bus = team.bus
        request = ProtocolFSM(bus, "main").request("bob", Protocol.PLAN_APPROVAL, "the plan")
        ProtocolFSM(bus, "bob").respond(request, "APPROVE: fine")
        bus.send("bob", "main", "plain note")
        shown: list[str] = []
        team.inbox.listeners.append(shown.append)
        assert team.inbox.poll() == shown
        assert shown == [
            "Team response from bob [plan_approval]: APPROVE: fine",
            "Team response from bob: plain note",
        ]
        notes = team.drain_notifications()
        assert [n.render() for n in notes] == shown
        assert team.drain_notifications() == []
        assert not bus.has_unread("main")


def test_mail_line_labels(tmp_path: Path) -> None:
    bus = MessageBus(tmp_path / "mb")
    plain = bus.send("alice", "bob", "hi")
    assert mail_line(plain) == "Team message from alice: hi"
    reply = bus.send("bob", "alice", "yo", "response", in_reply_to=plain.id)
    assert mail_line(reply) == "Team response from bob: yo"
    inbox = TeamInbox(bus, "alice")
    assert inbox.poll() == ["Team response from bob: yo"]


def test_teammates_are_detached_unless_their_owner_takes_them_down(
    workspace: Path, tmp_path: Path
) -> None:
    from bareagent.config import load_config
    from bareagent.orchestrator.team import build_teammate_spec
    from bareagent.orchestrator.teammates import TeammateDefinition
    from bareagent.permission import PermissionGuard, PermissionMode

    config = load_config(workspace, user_file=tmp_path / "none.toml")
    common = {
        "config": config,
        "parent_guard": PermissionGuard(PermissionMode.DEFAULT),
        "workspace": workspace,
        "state_root": tmp_path / "state",
        "worker_id": "mate-test",
    }
    definition = TeammateDefinition("alice", "reviewer")
    assert build_teammate_spec(definition, **common).detached  # type: ignore[arg-type]
    owned = build_teammate_spec(definition, detached=False, **common)  # type: ignore[arg-type]
    assert not owned.detached and owned.fail_closed
    assert Team(workspace, detach_teammates=False).detach_teammates is False
