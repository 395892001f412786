"""Operator commands (`ps`, `top`, `logs`, `kill`, `jobs`) run as a user runs them: a
`python -m bareagent` subprocess that reads the state root only, while the workers were
started by another process (a short-lived owner that exits, or this test process)."""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from bareagent.orchestrator.jobs import JobManager
from bareagent.orchestrator.registry import Registry, WorkerRecord
from bareagent.orchestrator.results import ResultStore
from bareagent.orchestrator.state import ensure_state_root, state_root
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    started,
    subreaper,
    wait_started,
    wait_until,
    workspace,
)

pytestmark = pytest.mark.timeout(45)

PS_KEYS = {
    "id",
    "kind",
    "name",
    "pid",
    "parent",
    "status",
    "cwd",
    "started_at",
    "exit_code",
    "cpu_percent",
    "rss_bytes",
    "ended_at",
    "age_seconds",
    "log_path",
}
JOB_KEYS = {"id", "command", "status", "exit_code", "started_at", "ended_at"}

# An owner that starts one detached job, reports its worker, and dies at once without any
# cleanup: the CLI below runs in yet another process and sees only the state root.
OWNER_SCRIPT = r"""
import json, os, sys, time
from bareagent.orchestrator.jobs import JobManager

workspace, job_id, command = sys.argv[1:4]
jobs = JobManager(workspace, owner="main", detached=True)
jobs.submit(command, timeout=60, task_id=job_id)
deadline = time.monotonic() + 15
worker = None
while time.monotonic() < deadline:
    worker = jobs.supervisor.registry.get(job_id)
    if worker is not None and worker.pid and worker.status == "running":
        break
    time.sleep(0.02)
print(json.dumps({"pid": worker.pid, "helper": jobs.supervisor.backend.helper_pid}), flush=True)
os._exit(0)
"""


def cli(workspace: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `python -m bareagent ARGS -w WORKSPACE` (stdout is a pipe: not a TTY)."""
    return subprocess.run(
        [sys.executable, "-m", "bareagent", *args, "-w", str(workspace)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


def ps_json(workspace: Path, *extra: str) -> list[dict[str, Any]]:
    result = cli(workspace, "ps", "--json", *extra)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    return rows


def jobs_json(workspace: Path) -> dict[str, dict[str, Any]]:
    result = cli(workspace, "jobs", "--json")
    assert result.returncode == 0, result.stderr
    return {row["id"]: row for row in json.loads(result.stdout)}


def start_detached(workspace: Path, job_id: str, command: str) -> dict[str, int]:
    """Start a detached job from a separate owner process that then exits."""
    out = subprocess.run(
        [sys.executable, "-c", OWNER_SCRIPT, str(workspace), job_id, command],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    info: dict[str, int] = json.loads(out.stdout)
    return info


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def marked(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(marker in part for part in proc.info.get("cmdline") or []):
                found.append(proc.pid)
    return found


def named(marker: str) -> list[int]:
    """Processes whose argv[0] starts with the marker (started with `exec -a`)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.info.get("cmdline") or []
            if cmdline and cmdline[0].startswith(marker):
                found.append(proc.pid)
    return found


def kill_marked(marker: str) -> None:
    for pid in marked(marker):
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


def one_line_error(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bareagent: error: ") and needle in lines[0], lines[0]


def test_ps_jobs_and_kill_from_other_processes(
    home: Path, workspace: Path, marker: str, no_leftovers: None, subreaper: None
) -> None:
    # Two grandchildren carry the marker in argv[0], so they can be found and counted.
    command = started(
        "tree", f"(exec -a {marker}-a sleep 60) & (exec -a {marker}-b sleep 60) & wait"
    )
    info = start_detached(workspace, "tree", command)
    wait_started(workspace, "tree")
    assert wait_until(lambda: len(named(marker)) == 2, 10)
    owner_gone = not any(
        "OWNER_SCRIPT" in " ".join(p.info.get("cmdline") or [])
        for p in psutil.process_iter(["cmdline"])
    )
    assert owner_gone

    rows = ps_json(workspace)
    assert [r["id"] for r in rows] == ["tree"]
    row = rows[0]
    assert set(row) >= PS_KEYS
    assert (row["kind"], row["name"], row["status"], row["pid"]) == (
        "job",
        "tree",
        "running",
        info["pid"],
    )
    assert row["parent"] == "main" and row["cwd"] == str(workspace.resolve())
    assert row["exit_code"] is None and row["ended_at"] is None
    # The row covers the worker's tree: the worker itself, bash, and two sleeps.
    assert isinstance(row["cpu_percent"], float) and row["cpu_percent"] >= 0
    assert row["rss_bytes"] > psutil.Process(info["pid"]).memory_info().rss
    assert row["log_path"].endswith("tree.log")

    plain = cli(workspace, "ps")
    assert plain.returncode == 0
    header, line = plain.stdout.splitlines()
    assert header.split()[:6] == ["ID", "KIND", "NAME", "PID", "PARENT", "STATUS"]
    assert line.split()[:6] == ["tree", "job", "tree", str(info["pid"]), "main", "running"]

    job = jobs_json(workspace)["tree"]
    assert job["status"] == "running" and job["exit_code"] is None and job["lost"] is False
    assert job["command"] == command and job["ended_at"] is None

    killed = cli(workspace, "kill", "tree")
    assert killed.returncode == 0, killed.stderr
    assert killed.stdout.strip() == f"killed job tree (pid {info['pid']})"
    # `kill` returns once the whole tree is gone: no waiting here.
    assert marked(marker) == [] and not alive(info["pid"])

    (row,) = ps_json(workspace, "--all")
    assert row["status"] == "killed" and row["cpu_percent"] is None
    assert ps_json(workspace) == []
    job = jobs_json(workspace)["tree"]
    assert job["status"] == "killed" and job["ended_at"] is not None
    assert wait_until(lambda: not alive(info["helper"]), 8)


def test_kill_signal_kill_skips_the_grace(
    home: Path, workspace: Path, marker: str, no_leftovers: None, subreaper: None
) -> None:
    # The grandchild ignores SIGTERM: with TERM it would only die after the grace.
    command = started("stubborn", f"trap '' TERM; (exec -a {marker} sleep 60) & wait")
    info = start_detached(workspace, "stubborn", command)
    wait_started(workspace, "stubborn")
    assert wait_until(lambda: len(named(marker)) == 1, 10)
    begin = time.monotonic()
    killed = cli(workspace, "kill", "stubborn", "--signal", "KILL", "--grace", "20")
    took = time.monotonic() - begin
    assert killed.returncode == 0, killed.stderr
    assert took < 10, took
    assert marked(marker) == [] and not alive(info["pid"])
    assert jobs_json(workspace)["stubborn"]["status"] == "killed"
    again = cli(workspace, "kill", "stubborn")
    assert again.returncode == 0
    assert again.stdout.strip() == "job stubborn is not running (killed); nothing to kill"
    assert wait_until(lambda: not alive(info["helper"]), 8)


def test_term_kill_escalates_after_grace(
    home: Path, workspace: Path, marker: str, no_leftovers: None, subreaper: None
) -> None:
    command = started("slow", f"(trap '' TERM; exec -a {marker} sleep 60) & wait")
    info = start_detached(workspace, "slow", command)
    wait_started(workspace, "slow")
    assert wait_until(lambda: len(named(marker)) == 1, 10)
    begin = time.monotonic()
    killed = cli(workspace, "kill", "slow", "--grace", "1.5")
    took = time.monotonic() - begin
    assert killed.returncode == 0, killed.stderr
    assert took >= 1.5  # the TERM-proof sleep held out for the grace period
    assert marked(marker) == [] and not alive(info["pid"])
    assert wait_until(lambda: not alive(info["helper"]), 8)


def test_lost_when_nobody_recorded_the_exit(
    home: Path, workspace: Path, marker: str, no_leftovers: None, subreaper: None
) -> None:
    """Helper and worker SIGKILLed from outside: the record still says running → `lost`."""
    info = start_detached(workspace, "gone", started("gone", f"sleep 60 # {marker}"))
    wait_started(workspace, "gone")
    worker = psutil.Process(info["pid"])
    below = worker.children(recursive=True)
    os.kill(info["helper"], signal.SIGKILL)
    assert wait_until(lambda: not alive(info["helper"]), 5)
    os.kill(info["pid"], signal.SIGKILL)
    assert wait_until(lambda: not alive(info["pid"]), 5)
    try:
        stored = Registry(state_root(workspace)).read("gone")
        assert stored is not None and stored.status == "running"  # nobody updated it
        rows = ps_json(workspace)  # lost rows are listed without --all
        assert [(r["id"], r["status"], r["cpu_percent"]) for r in rows] == [("gone", "lost", None)]
        plain = cli(workspace, "ps").stdout
        assert "lost" in plain.splitlines()[1].split()
        job = jobs_json(workspace)["gone"]
        assert (job["status"], job["lost"]) == ("failed", True)
        assert "lost" in job["error"]
        result = cli(workspace, "kill", "gone")
        assert result.returncode == 0
        assert "is lost (its process is gone); nothing to kill" in result.stdout
    finally:
        for proc in below:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        kill_marked(marker)


def test_worker_sigkilled_while_its_reaper_lives_reads_failed(
    home: Path, workspace: Path, marker: str, no_leftovers: None, subreaper: None
) -> None:
    """The helper saw the exit (-9) and recorded it: `failed`, not `lost`."""
    info = start_detached(workspace, "shot", started("shot", f"sleep 60 # {marker}"))
    wait_started(workspace, "shot")
    below = psutil.Process(info["pid"]).children(recursive=True)
    os.kill(info["pid"], signal.SIGKILL)
    try:
        assert wait_until(lambda: ps_json(workspace) == [], 10)
        (row,) = ps_json(workspace, "--all")
        assert (row["status"], row["exit_code"]) == ("failed", -9)
        job = jobs_json(workspace)["shot"]
        assert (job["status"], job["lost"]) == ("failed", False)
        assert "exited with code -9" in job["error"]
        assert wait_until(lambda: not alive(info["helper"]), 8)
    finally:
        # The command's process outlives a SIGKILLed worker (nobody killed its tree).
        for proc in below:
            with contextlib.suppress(psutil.Error):
                proc.kill()


def _record(workspace: Path, worker_id: str, pid: int, create_time: float) -> None:
    Registry(ensure_state_root(workspace)).write(
        WorkerRecord(
            id=worker_id,
            kind="job",
            name=worker_id,
            pid=pid,
            create_time=create_time,
            parent="main",
            owner_pid=os.getpid(),
            cwd=str(workspace),
            status="running",
            started_at=time.time(),
        )
    )


def test_running_record_with_vanished_or_reused_pid_is_lost(
    home: Path, workspace: Path, no_leftovers: None
) -> None:
    proc = subprocess.Popen(["sleep", "0"])
    ctime = psutil.Process(proc.pid).create_time()
    proc.wait()
    _record(workspace, "vanished", proc.pid, ctime)
    me = psutil.Process()
    _record(workspace, "reused", me.pid, me.create_time() - 100)  # same pid, other process
    _record(workspace, "fine", me.pid, me.create_time())
    rows = {r["id"]: r for r in ps_json(workspace)}
    assert rows["vanished"]["status"] == "lost"
    assert rows["reused"]["status"] == "lost"
    assert rows["fine"]["status"] == "running" and rows["fine"]["rss_bytes"] > 0
    # `kill` never touches a pid that now belongs to another process.
    result = cli(workspace, "kill", "reused")
    assert result.returncode == 0 and "is lost" in result.stdout
    assert me.is_running()


def test_logs_follow_and_jobs_json_for_a_finished_job(
    home: Path, workspace: Path, marker: str, no_leftovers: None
) -> None:
    with JobManager(workspace, owner="main") as jobs:
        command = (
            f"echo first {marker}; sleep 1.5; for i in 1 2 3 4 5 6; do echo line$i; done; exit 3"
        )
        jobs.submit(command, timeout=20, task_id="build")
        assert wait_until(lambda: jobs.get("build")["status"] == "running", 10)
        follow = cli(workspace, "logs", "build", "-f")
        assert follow.returncode == 0, follow.stderr
        assert f"first {marker}" in follow.stdout and "line6" in follow.stdout
        assert follow.stdout.index("first") < follow.stdout.index("line6")
        record = jobs.wait("build", 10)
        assert record["exit_code"] == 3

    shown = cli(workspace, "logs", "build")
    assert shown.returncode == 0 and "line6" in shown.stdout and "$ echo first" in shown.stdout

    job = jobs_json(workspace)["build"]
    assert set(job) >= JOB_KEYS and {"duration_seconds", "output_tail"} <= set(job)
    assert (job["status"], job["exit_code"], job["command"]) == ("failed", 3, command)
    assert job["output_tail"] == ["line2", "line3", "line4", "line5", "line6"]
    assert job["started_at"] <= job["ended_at"]
    assert 1.4 < job["duration_seconds"] < 10
    plain = cli(workspace, "jobs", "--tail", "2").stdout.splitlines()
    assert plain[0].split() == ["ID", "STATUS", "EXIT", "DURATION", "COMMAND"]
    assert plain[1].split()[:3] == ["build", "failed", "3"]
    assert [line.strip() for line in plain[2:]] == ["line5", "line6"]


def test_logs_follow_of_a_finished_worker_returns_at_once(
    home: Path, workspace: Path, no_leftovers: None
) -> None:
    with JobManager(workspace, owner="main") as jobs:
        jobs.submit("echo done-already", timeout=10, task_id="quick")
        jobs.wait("quick", 10)
    begin = time.monotonic()
    result = cli(workspace, "logs", "-f", "quick")
    assert result.returncode == 0 and "done-already" in result.stdout
    assert time.monotonic() - begin < 10


def test_kill_a_queued_job_and_a_job_by_the_owner_in_this_process(
    home: Path, workspace: Path, marker: str, no_leftovers: None
) -> None:
    with JobManager(workspace, owner="main", max_concurrent=1) as jobs:
        jobs.submit(started("first", f"sleep 60 # {marker}"), timeout=60, task_id="first")
        jobs.submit(f"echo never {marker}", timeout=10, task_id="second")
        wait_started(workspace, "first")
        assert jobs.get("second")["status"] == "queued"
        statuses = {j: row["status"] for j, row in jobs_json(workspace).items()}
        assert statuses == {"first": "running", "second": "queued"}
        queued = cli(workspace, "kill", "second")
        assert queued.returncode == 0 and "was queued; marked killed" in queued.stdout
        result = cli(workspace, "kill", "first")
        assert result.returncode == 0, result.stderr
        assert jobs.wait("first", 5)["status"] == "killed"
        time.sleep(0.5)  # the freed slot must not start the killed queued job
        assert jobs.get("second")["status"] == "killed"
        assert not (workspace / ".started-second").exists()
    log = state_root(workspace) / "logs" / "second.log"
    assert not log.exists()


def test_top_once_and_iterations_without_a_tty(
    home: Path, workspace: Path, marker: str, no_leftovers: None
) -> None:
    with JobManager(workspace, owner="main") as jobs:
        jobs.submit(f"sleep 30 # {marker}", timeout=60, task_id="busy")
        assert wait_until(lambda: jobs.get("busy")["status"] == "running", 10)
        once = cli(workspace, "top", "--once")
        assert once.returncode == 0, once.stderr
        lines = once.stdout.splitlines()
        assert lines[0].startswith("bareagent top - ") and "1 worker, CPU" in lines[0]
        assert lines[1].split()[:3] == ["ID", "KIND", "NAME"]
        assert lines[2].split()[:2] == ["busy", "job"] and "running" in lines[2].split()
        assert len(lines) == 3
        frames = cli(workspace, "top", "-n", "2", "--interval", "0.2")
        assert frames.returncode == 0
        assert frames.stdout.count("bareagent top - ") == 2
        jobs.cancel("busy")
    bad = cli(workspace, "top", "--interval", "0")
    one_line_error(bad, "--interval must be at least 0.1")


def test_unknown_ids_and_bad_arguments_give_one_line_errors(
    home: Path, workspace: Path, no_leftovers: None
) -> None:
    one_line_error(cli(workspace, "logs", "nope"), "no worker or job 'nope'")
    one_line_error(cli(workspace, "logs", "-f", "nope"), "no worker or job 'nope'")
    one_line_error(cli(workspace, "kill", "nope"), "no worker or job 'nope'")
    one_line_error(cli(workspace, "kill", "../etc"), "invalid worker or job id")
    one_line_error(cli(workspace, "kill", "x", "--signal", "HUP"), "unsupported signal 'HUP'")
    one_line_error(cli(workspace, "kill", "x", "--grace", "-1"), "--grace")
    one_line_error(cli(workspace / "missing", "ps"), "workspace is not a directory")
    # Nothing ever ran here: empty lists, and the state root is not created by reading.
    assert ps_json(workspace) == [] and jobs_json(workspace) == {}
    assert cli(workspace, "ps").stdout.split() == list(
        ["ID", "KIND", "NAME", "PID", "PARENT", "STATUS", "CPU%", "RSS", "AGE", "EXIT", "CWD"]
    )
    assert not state_root(workspace).exists()
    assert cli(workspace, "top", "--once").returncode == 0


def test_subagent_shows_in_ps_and_is_killed(
    home: Path, workspace: Path, tmp_path: Path, marker: str, no_leftovers: None
) -> None:
    from bareagent.config import load_config
    from bareagent.orchestrator.subagents import SubagentManager
    from bareagent.orchestrator.supervisor import Supervisor
    from bareagent.permission import PermissionGuard, PermissionMode
    from bareagent.testing import ScriptedLLMServer

    script = {"turns": [{"text": "late answer", "delay": 30}]}
    with ScriptedLLMServer(script) as server, Supervisor(workspace) as supervisor:
        config = load_config(
            workspace,
            overrides={
                "provider": {
                    "name": "anthropic",
                    "model": "scripted-model",
                    "api_key": "test-key",
                    "base_url": server.anthropic_base_url,
                    "max_retries": 0,
                    "timeout": 40.0,
                },
                "agent": {"stream": False},
            },
            user_file=tmp_path / "no-user-config.toml",
        )
        manager = SubagentManager(
            workspace, config, PermissionGuard(PermissionMode.DEFAULT), supervisor=supervisor
        )
        reply = manager.run(f"think about {marker}", run_in_background=True)
        sub_id = reply.split()[1]
        assert wait_until(lambda: len(server.requests) == 1, 15)  # waiting for the model
        (row,) = ps_json(workspace)
        assert (row["id"], row["kind"], row["status"], row["parent"]) == (
            sub_id,
            "subagent",
            "running",
            "main",
        )
        handle = supervisor.handle(sub_id)
        assert handle is not None and row["pid"] == handle.pid
        result = cli(workspace, "kill", sub_id)
        assert result.returncode == 0, result.stderr
        expected = f"killed subagent general-purpose ({sub_id}) (pid {handle.pid})"
        assert result.stdout.strip() == expected
        assert handle.exited.wait(5)
        (row,) = ps_json(workspace, "--all")
        assert row["status"] == "killed"
        answer = ResultStore(state_root(workspace) / "subagents").read(sub_id)
        assert answer is not None and answer["status"] == "killed"
