"""The demo's parts: its script fits the real tools and permissions, its project works,
the progress waiter and the leftover sweep behave."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from bareagent.core.tools import get_handlers, get_tools
from bareagent.demo import scenario
from bareagent.demo.driver import worker_story
from bareagent.demo.leftovers import descendants, find_leftovers, kill_leftovers
from bareagent.demo.project import write_project
from bareagent.demo.safety import DemoInterrupted, SignalGuard, demo_environment
from bareagent.demo.watch import Status, WaitTimeout, Watch, wait_all
from bareagent.permission import PermissionGuard, PermissionMode
from bareagent.testing import load_script

pytestmark = pytest.mark.timeout(30)


def _calls(turns: list[dict[str, object]]) -> list[dict[str, object]]:
    return [call for turn in turns for call in turn.get("tool_calls", [])]  # type: ignore[attr-defined]


def test_script_is_valid_and_every_turn_says_whose_it_is() -> None:
    script = load_script(scenario.demo_script())
    assert all(turn.get("when") for turn in script["turns"])


def test_every_scripted_call_names_a_real_tool_with_its_required_arguments() -> None:
    schemas = {s["name"]: s["parameters"] for s in get_tools()}
    for call in _calls(scenario.demo_script()["turns"]):
        params = schemas[str(call["name"])]
        given = set(call["input"])  # type: ignore[arg-type]
        assert set(params["required"]) <= given, call
        assert given <= set(params["properties"]), call


def test_the_allow_rules_let_exactly_the_scripted_calls_run_in_default_mode() -> None:
    lead = PermissionGuard(PermissionMode.DEFAULT, allow_rules=scenario.allow_rules())
    teammate = lead.for_subagent("general-purpose", background=True)
    assert teammate.fail_closed
    for call in _calls(scenario._lead_turns()):
        decision = lead.decide(str(call["name"]), call["input"])  # type: ignore[arg-type]
        assert not decision.confirm, (call, decision)
    for call in _calls(scenario._teammate_turns()):
        decision = teammate.decide(str(call["name"]), call["input"])  # type: ignore[arg-type]
        assert not decision.confirm, (call, decision)
    # Nothing beyond them: another command or teammate would still ask.
    assert lead.decide("bash", {"command": "rm -rf build"}).confirm
    assert lead.decide("team_spawn", {"name": "mallory"}).confirm
    assert lead.decide("background_run", {"command": "make deploy"}).confirm


def test_the_explore_answer_matches_what_grep_finds(tmp_path: Path) -> None:
    write_project(tmp_path)
    (grep_call,) = _calls(scenario._subagent_turns())
    found = get_handlers(tmp_path)["grep"](**grep_call["input"])  # type: ignore[arg-type]
    lines = found if isinstance(found, list) else str(found).splitlines()
    hits = {":".join(str(line).split(":")[:2]) for line in lines}
    answer = scenario._explore_answer()
    callers = answer.split("called from ", 1)[1].split(". ", 1)[0].split(", ")
    assert callers and set(callers) <= hits
    assert {h for h in hits if not h.startswith("calc.py")} == set(callers)


def test_the_project_tests_pass_as_bob_runs_them(tmp_path: Path) -> None:
    write_project(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 0, result.stderr
    assert "\nOK" in result.stderr  # the text bob's scripted ending waits for


def test_wait_all_returns_when_every_watch_is_done() -> None:
    polls = {"n": 0}

    def slow() -> Status:
        polls["n"] += 1
        return Status(polls["n"] >= 3, f"poll {polls['n']}")

    watches = [Watch("fast", lambda: Status(True, "done")), Watch("slow", slow)]
    console = Console(record=True, width=100, force_terminal=False)
    wait_all(console, watches, timeout=5, interval=0.01)
    assert all(w.finished is not None for w in watches)
    assert "poll 3" in console.export_text()


def test_wait_all_times_out_naming_the_late_ones() -> None:
    watches = [Watch("done", lambda: Status(True, "ok")), Watch("stuck", lambda: Status(False, ""))]
    console = Console(record=True, width=100, force_terminal=False)
    with pytest.raises(WaitTimeout, match=r"after 0\.2 s: stuck$"):
        wait_all(console, watches, timeout=0.2, interval=0.01)


def test_worker_story_keeps_what_the_worker_did(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    prefix = "2026-11-30 22:12:06,495 [mate-x pid=1] INFO bareagent.worker.teammate: "
    log.write_text(
        f"{prefix}teammate bob (tester) is up; mode default\n"
        f"{prefix}waiting for mail\n"
        f'{prefix}tool bash {{"command": "ls"}}\n'
        "$ raw job output without a prefix done\n",
        encoding="utf-8",
    )
    assert worker_story(log) == [
        "teammate bob (tester) is up; mode default",
        'tool bash {"command": "ls"}',
        "$ raw job output without a prefix done",
    ]
    assert worker_story(tmp_path / "missing.log") == []


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def test_the_sweep_finds_children_and_orphans_inside_the_demo_dir(tmp_path: Path) -> None:
    before = descendants()
    child = subprocess.Popen(["sleep", "30"], cwd=tmp_path)
    # An orphan: its shell exits at once, so it is nobody's child of ours any more.
    out = subprocess.run(
        ["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=10,
    )
    orphan = int(out.stdout.strip())
    outside = subprocess.Popen(["sleep", "30"])  # a child outside the dir, listed as ours
    try:
        found = {p.pid for p in find_leftovers(tmp_path, before)}
        assert {child.pid, orphan} <= found
        killed = kill_leftovers(tmp_path, before | {outside.pid})
        assert {child.pid, orphan} <= set(killed)
        child.wait(timeout=5)
        deadline = time.monotonic() + 5
        while not _gone(orphan) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(orphan)
        assert outside.poll() is None  # excluded: the sweep never touches it
        assert find_leftovers(tmp_path, before | {outside.pid}) == []
    finally:
        for proc in (child, outside):
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait(timeout=5)
        with contextlib.suppress(psutil.Error):
            psutil.Process(orphan).kill()


def test_demo_environment_bypasses_proxies_for_localhost_and_restores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    monkeypatch.setenv("NO_PROXY", "example.com, localhost")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("BAREAGENT_HOME", "/elsewhere")
    with demo_environment(tmp_path / "state"):
        assert os.environ["BAREAGENT_HOME"] == str(tmp_path / "state")
        assert os.environ["NO_PROXY"] == "example.com,localhost,127.0.0.1"
        assert os.environ["no_proxy"] == "127.0.0.1,localhost"
    assert os.environ["NO_PROXY"] == "example.com, localhost"
    assert "no_proxy" not in os.environ
    assert os.environ["BAREAGENT_HOME"] == "/elsewhere"


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_signal_guard_unwinds_once_and_never_during_cleanup() -> None:
    import os

    hangups: list[bool] = []
    guard = SignalGuard(on_hangup=lambda: hangups.append(True))
    before = signal.getsignal(signal.SIGTERM)
    guard.install()
    try:
        with pytest.raises(DemoInterrupted):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs between bytecodes; this is never reached
        assert guard.exit_status == 128 + signal.SIGTERM
        guard.cleaning = True
        os.kill(os.getpid(), signal.SIGHUP)  # noted, and the console is let go, no raise
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert guard.received == [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]
        assert hangups == [True]
        assert guard.exit_status == 128 + signal.SIGTERM  # the first one decides
    finally:
        guard.restore()
    assert signal.getsignal(signal.SIGTERM) == before
