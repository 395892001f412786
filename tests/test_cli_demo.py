"""`bareagent demo` run as a user runs it: a subprocess, no API key, no network.

Each run must exit as documented and leave no process behind: the test process is a
child subreaper (detached teammates would be re-parented to it) and also looks for any
process whose working directory is inside the demo's directory.
"""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bareagent.orchestrator.registry import Registry
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    subreaper,
    wait_until,
)

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process checks use /proc"),
]


DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens on the discard port


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"  # keep the plain ps table on one line per worker
    # A proxy in the user's environment must not catch the requests for 127.0.0.1.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env[name] = DEAD_PROXY
    return env


def errors(stderr: str) -> list[str]:
    """The one-line errors the CLI printed (logged warnings are allowed around them)."""
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("bareagent: error:")]


def running_inside(root: Path) -> list[int]:
    """Pids of live processes whose working directory is inside `root`."""
    found = []
    for proc in psutil.process_iter(["cwd", "status"]):
        cwd = proc.info.get("cwd")
        if cwd and Path(cwd).is_relative_to(root) and proc.info["status"] != "zombie":
            found.append(proc.pid)
    return found


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The --dir the demo creates its temporary directory in."""
    path = tmp_path / "demo"
    path.mkdir()
    return path


def demo(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bareagent", "demo", "--dir", str(base), *args],
        capture_output=True,
        text=True,
        timeout=80,
        env=_env(),
    )


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_demo_runs_every_step_and_leaves_nothing(
    base: Path, provider: str, no_leftovers: None, subreaper: None
) -> None:
    started = time.monotonic()
    result = demo(base, "--provider", provider)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert errors(result.stderr) == []
    out = result.stdout
    # The lead's own calls, in order, each with its real result.
    for expected in (
        "team_spawn(name='alice')",
        "Spawned teammate alice",
        "Spawned teammate bob",
        "team_send(to_agent='alice'",
        "background_run(",
        "Submitted background task build",
        "subagent(agent_type='explore'",
        "mean() is defined in calc.py",
    ):
        assert expected in out, expected
    # Work done in the other processes, reported back.
    assert "Team response from alice [plan_approval]: APPROVE" in out
    assert "Team response from bob: All unit tests pass" in out
    assert "job build finished: done" in out
    # The results reach the lead as notifications in its report turn, in every run.
    report = out.index("[demo:report]")
    for line in ("job build finished", "Team response from alice", "Team response from bob"):
        assert out.index(line) > report, line
    assert "exit 0: build ok" in out
    assert 'tool bash {"command"' in out  # bob's log excerpt
    assert 'tool grep {"pattern"' in out  # the subagent's log excerpt
    # The final ps table: both teammates, the job and the subagent, with real pids.
    table = out.split("bareagent ps --all", 1)[1].split("Clean up", 1)[0]
    cells = [line.split() for line in table.splitlines()]
    assert ["ID", "KIND", "NAME", "PID"] in [c[:4] for c in cells], table
    rows = {c[2]: c for c in cells if len(c) == 11 and c[0] != "ID"}
    assert set(rows) == {"alice", "bob", "build", "explore"}, table
    assert rows["alice"][1] == rows["bob"][1] == "teammate"
    assert rows["build"][1] == "job" and rows["build"][5] == "exited" and rows["build"][9] == "0"
    assert rows["explore"][1] == "subagent"
    assert all(row[3].isdigit() for row in rows.values())
    assert "Teammate alice shut down." in out and "Teammate bob shut down." in out
    assert "no process left: 4 workers started, all ended" in out
    assert took < 60
    # Nothing of the demo remains: no process in its directory, no directory.
    assert running_inside(base) == []
    assert list(base.iterdir()) == []


def test_keep_leaves_the_workspace_and_a_finished_registry(
    base: Path, no_leftovers: None, subreaper: None
) -> None:
    result = demo(base, "--keep")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    (root,) = base.iterdir()
    assert f"Kept {root} (--keep)." in result.stdout.replace("\n", "")
    assert (root / "calc" / "dist" / "calc-0.1.tar.gz").is_file()  # the build really ran
    (state,) = (root / "state" / "workspaces").iterdir()
    records = Registry(state).list(include_finished=True)
    assert sorted(r.kind for r in records) == ["job", "subagent", "teammate", "teammate"]
    assert not any(r.is_live_status for r in records)
    assert running_inside(base) == []


BROKEN_BOB = r"""
import sys
from bareagent.cli.main import main
from bareagent.demo import scenario

original = scenario._teammate_turns

def without_passing_tests():
    # bob's tests "fail": only the FAILED ending is left, and it never matches.
    return [t for t in original() if "\nOK" not in t["when"].get("last_user_contains", "")]

scenario._teammate_turns = without_passing_tests
sys.exit(main(sys.argv[1:]))
"""


def test_a_failing_step_is_one_line_and_still_cleans_up(
    base: Path, no_leftovers: None, subreaper: None
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", BROKEN_BOB, "demo", "--dir", str(base)],
        capture_output=True,
        text=True,
        timeout=80,
        env=_env(),
    )
    assert result.returncode == 1, result.stdout[-3000:]
    (error,) = errors(result.stderr)
    assert error.startswith("bareagent: error: demo failed: ")
    # Which check sees it first depends on timing: the off-script request after the
    # lead's turn, or bob's answer in the progress view.
    if "✗ bob" in result.stdout:
        assert "background work went wrong: bob (tests: (script exhausted))" in error
    else:
        assert "the scripted model got 1 request(s) it had no answer for" in error
    assert running_inside(base) == []
    assert list(base.iterdir()) == []


def start_demo(
    base: Path, trigger: str = "Spawned teammate bob"
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start the demo; return once it printed `trigger` and both teammates run."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bareagent", "demo", "--dir", str(base)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if trigger in line:
            break
    # The teammates' processes, and soon the build and the subagent, run in the workspace.
    assert wait_until(lambda: len(running_inside(base)) >= 2, 20), "".join(seen)
    return proc, seen


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize(
    "trigger",
    # Between model calls, and inside a tool call (the subagent takes a second or two),
    # where the agent loop turns any interrupt into a plain KeyboardInterrupt.
    ["Spawned teammate bob", "subagent(agent_type='explore'"],
)
def test_ctrl_c_or_sigterm_stops_everything(
    base: Path, signum: int, code: int, trigger: str, no_leftovers: None, subreaper: None
) -> None:
    proc, seen = start_demo(base, trigger)
    try:
        proc.send_signal(signum)
        rest, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, "".join(seen) + rest
    assert "Demo cancelled; everything it started was stopped." in rest
    assert running_inside(base) == []
    assert list(base.iterdir()) == []


def test_sigkill_of_the_demo_still_takes_its_teammates_down(
    base: Path, no_leftovers: None, subreaper: None
) -> None:
    proc, _ = start_demo(base)
    try:
        proc.kill()  # no cleanup code of the demo runs
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Its teammates are not detached: the spawner helper stops them when its owner is gone.
    assert wait_until(lambda: running_inside(base) == [], 20), running_inside(base)


def test_closing_the_terminal_stops_everything(
    base: Path, no_leftovers: None, subreaper: None
) -> None:
    """SIGHUP with the terminal gone: writes fail with EIO, the cleanup must not."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bareagent", "demo", "--dir", str(base)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_env(),
    )
    os.close(slave)
    try:
        seen = b""
        deadline = time.monotonic() + 40
        # While the subagent runs, a spinner is on the screen: stopping it must write.
        trigger = b"subagent(agent_type='explore'"
        while trigger not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                seen += os.read(master, 65536)
        assert trigger in seen, seen.decode(errors="replace")
        os.close(master)  # the terminal goes away, then the hang-up arrives
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGHUP
    assert running_inside(base) == []
    assert list(base.iterdir()) == []


def test_bad_arguments_are_one_line_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    result = demo(missing)
    assert result.returncode == 1
    assert result.stderr.strip() == f"bareagent: error: --dir {missing} is not a directory"
    result = demo(Path("/proc"))  # a directory nobody can create anything in
    assert result.returncode == 1
    assert errors(result.stderr) == [result.stderr.strip()]
    assert result.stderr.startswith("bareagent: error: cannot create the demo directory in /proc")
    result = demo(tmp_path, "--provider", "nope")
    assert result.returncode == 2 and "invalid choice: 'nope'" in result.stderr
