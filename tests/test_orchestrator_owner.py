"""An owner that dies: its workers stop; detached results survive and arrive once."""

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
from bareagent.orchestrator.results import ResultStore
from bareagent.orchestrator.state import state_root
from test_orchestrator_helpers import home, marker, no_leftovers, subreaper, wait_until, workspace  # noqa: F401

pytestmark = pytest.mark.timeout(40)

OWNER_SCRIPT = r"""
import json, sys, time
from bareagent.orchestrator.jobs import JobManager

def main():
    workspace, detached, commands = sys.argv[1], sys.argv[2] == "1", json.loads(sys.argv[3])
    jobs = JobManager(workspace, owner="main", max_concurrent=4, detached=detached)
    jobs.supervisor.start()
    ids = [jobs.submit(c, timeout=60) for c in commands]
    pids = {i: jobs.supervisor.registry.get(i).pid for i in ids}
    helper = jobs.supervisor.backend.helper_pid
    print(json.dumps({"ids": ids, "pids": pids, "helper": helper}), flush=True)
    time.sleep(120)

if __name__ == "__main__":
    main()
"""


def _start_owner(
    workspace: Path, commands: list[str], detached: bool
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            OWNER_SCRIPT,
            str(workspace),
            "1" if detached else "0",
            json.dumps(commands),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "owner process printed nothing"
    return proc, json.loads(line)


def _diagnose(pid: int, workspace: Path) -> str:
    """What a process that should be gone is doing, plus the spawner logs (for CI triage)."""
    lines = []
    try:
        proc = psutil.Process(pid)
        lines.append(f"pid {pid}: {proc.status()}, threads {len(proc.threads())}")
        for name in ("wchan", "stack"):
            with contextlib.suppress(OSError):
                lines.append(f"{name}: {Path(f'/proc/{pid}/{name}').read_text().strip()}")
        lines.append(f"children: {[c.pid for c in proc.children(recursive=True)]}")
    except psutil.Error as exc:
        lines.append(f"pid {pid}: {exc}")
    for log in sorted((state_root(workspace) / "logs").glob("*.log")):
        lines.append(f"--- {log.name}")
        lines.extend(log.read_text(errors="replace").splitlines()[-15:])
    return "\n".join(lines)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def test_sigkill_of_owner_stops_its_workers(
    home: Path, workspace: Path, marker: str, no_leftovers: None, subreaper: None
) -> None:
    commands = [f"sleep 60 & echo $! > gc{i}; wait # {marker}" for i in range(2)]
    owner, info = _start_owner(workspace, commands, detached=False)
    assert wait_until(lambda: all((workspace / f"gc{i}").exists() for i in range(2)), 10)
    grandchildren = [int((workspace / f"gc{i}").read_text()) for i in range(2)]
    workers = list(info["pids"].values())
    assert not any(_gone(p) for p in workers + grandchildren + [info["helper"]])
    owner.send_signal(signal.SIGKILL)
    owner.wait(5)
    killed_at = time.monotonic()
    assert wait_until(lambda: all(_gone(p) for p in workers + grandchildren), 5)
    assert time.monotonic() - killed_at < 4.0
    assert wait_until(lambda: _gone(info["helper"]), 8), _diagnose(info["helper"], workspace)
    store = ResultStore(state_root(workspace) / "jobs")
    for job_id in info["ids"]:
        record = store.read(job_id)
        assert record is not None and record["status"] == "killed"
        assert "owner" in record["error"]


def test_result_written_while_owner_down_is_delivered_once_after_restart(
    home: Path, workspace: Path, marker: str, no_leftovers: None, subreaper: None
) -> None:
    owner, info = _start_owner(workspace, [f"sleep 2; echo built # {marker}"], detached=True)
    job_id = info["ids"][0]
    owner.send_signal(signal.SIGKILL)
    owner.wait(5)
    store = ResultStore(state_root(workspace) / "jobs")
    assert store.read(job_id)["status"] == "running"  # type: ignore[index]
    assert wait_until(lambda: store.read(job_id)["status"] == "done", 15)  # type: ignore[index]
    assert store.read(job_id)["delivered"] is False  # type: ignore[index]
    restarted = JobManager(workspace, owner="main")
    other = JobManager(workspace, owner="someone-else")
    try:
        assert other.drain_notifications() == []
        notes = restarted.drain_notifications()
        assert [(n.source_id, n.status, n.result) for n in notes] == [(job_id, "done", "built\n")]
        assert restarted.drain_notifications() == []
        again = JobManager(workspace, owner="main")
        try:
            assert again.drain_notifications() == []
        finally:
            again.shutdown()
    finally:
        restarted.shutdown()
        other.shutdown()
    assert wait_until(lambda: _gone(info["helper"]), 8)


def test_stale_running_record_is_settled_on_restart(home: Path, workspace: Path) -> None:
    """A job left `running` by an owner whose worker vanished unrecorded is failed, not stuck."""
    store = ResultStore(state_root(workspace) / "jobs")
    store.create(
        {"id": "ghost", "status": "running", "owner": "main", "created_at": 0, "delivered": False},
        lambda e: None,
    )
    manager = JobManager(workspace, owner="main")
    try:
        record = manager.get("ghost")
        assert record["status"] == "failed" and "lost" in record["error"]
        assert [n.source_id for n in manager.drain_notifications()] == ["ghost"]
        # And the id is usable again now that its result was delivered.
        manager.submit("echo ok", task_id="ghost")
        assert manager.wait("ghost", 10)["result"] == "ok\n"
    finally:
        manager.shutdown()
    assert os.getpid()
