"""JobManager: job worker processes, queueing, cancel, timeouts, notifications."""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bareagent.orchestrator.jobs import JobManager
from bareagent.orchestrator.supervisor import Supervisor
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    started,
    wait_started,
    wait_until,
    workspace,
)

pytestmark = pytest.mark.timeout(40)


@pytest.fixture
def jobs(home: Path, workspace: Path, no_leftovers: None) -> Iterator[JobManager]:
    manager = JobManager(workspace, owner="main", max_concurrent=2)
    try:
        yield manager
    finally:
        manager.shutdown()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_job_runs_in_workspace_and_notifies_once(
    jobs: JobManager, workspace: Path, marker: str
) -> None:
    job_id = jobs.submit(f"echo {marker}; pwd; echo err >&2; exit 3", timeout=10, task_id="build-1")
    assert job_id == "build-1"
    record = jobs.wait(job_id, 15)
    assert record["status"] == "failed" and record["exit_code"] == 3
    assert record["result"].startswith("Command failed with exit code 3")
    assert marker in record["result"] and str(workspace.resolve()) in record["result"]
    assert "err" in record["result"]
    notes = jobs.drain_notifications()
    assert [(n.source_id, n.kind, n.status) for n in notes] == [("build-1", "job", "failed")]
    assert notes[0].result == record["result"]
    assert jobs.drain_notifications() == []
    # The worker's output went to its own log, its log lines to the session log.
    worker_log = jobs.state_root / "logs" / "build-1.log"
    assert marker in worker_log.read_text()
    worker = jobs.supervisor.registry.get("build-1")
    # The worker itself exited cleanly; the command's failure is the job's status.
    assert worker is not None and worker.status == "exited" and worker.exit_code == 0
    session_log = jobs.supervisor.session_log.read_text()
    assert re.search(r"\[build-1 pid=\d+\] INFO bareagent\.worker\.job", session_log)


def test_generated_id_and_record_fields(jobs: JobManager) -> None:
    job_id = jobs.submit("echo built", timeout=5)
    assert re.fullmatch(r"[A-Za-z0-9]{8}", job_id)
    record = jobs.wait(job_id, 10)
    assert record["status"] == "done" and record["result"] == "built\n"
    for key in (
        "id",
        "command",
        "status",
        "exit_code",
        "started_at",
        "ended_at",
        "owner",
        "delivered",
    ):
        assert key in record
    assert record["owner"] == "main" and record["started_at"] <= record["ended_at"]
    worker = jobs.supervisor.registry.get(job_id)
    assert worker is not None and worker.kind == "job" and worker.status == "exited"
    assert worker.extra["command"] == "echo built" and worker.cwd == str(jobs.workspace)


@pytest.mark.parametrize("timeout", [0, -1, "10", True, float("nan"), float("inf")])
def test_invalid_timeout_rejected(jobs: JobManager, timeout: object) -> None:
    with pytest.raises(ValueError, match="timeout"):
        jobs.submit("echo x", timeout=timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize("task_id", ["", "../x", ".hidden", "a b", "x" * 65])
def test_invalid_task_id_rejected(jobs: JobManager, task_id: str) -> None:
    with pytest.raises(ValueError, match="invalid task_id"):
        jobs.submit("echo x", task_id=task_id)


def test_empty_command_rejected(jobs: JobManager) -> None:
    with pytest.raises(ValueError, match="command"):
        jobs.submit("   ")


def test_duplicate_running_id_rejected(jobs: JobManager, marker: str) -> None:
    jobs.submit(started("dup", f"sleep 20 # {marker}"), timeout=30, task_id="dup")
    wait_started(jobs.workspace, "dup")
    with pytest.raises(ValueError, match="'dup' is already running"):
        jobs.submit("echo again", task_id="dup")
    assert jobs.cancel("dup") is True
    # Finished but not delivered: still refused, the result must not be overwritten.
    with pytest.raises(ValueError, match="not delivered"):
        jobs.submit("echo again", task_id="dup")
    jobs.drain_notifications()
    jobs.submit("echo again", task_id="dup")
    assert jobs.wait("dup", 10)["result"] == "again\n"


def test_timeout_kills_grandchildren(jobs: JobManager, workspace: Path, marker: str) -> None:
    script = (
        f"sleep 30 & echo $! > pids; bash -c 'sleep 31; : {marker}' & echo $! >> pids; "
        "sleep 1; wait"
    )
    job_id = jobs.submit(script, timeout=2)
    assert wait_until(
        lambda: (
            len((workspace / "pids").read_text().split()) == 2
            if (workspace / "pids").exists()
            else False
        ),
        10,
    )
    pids = [int(p) for p in (workspace / "pids").read_text().split()]
    assert all(_alive(p) for p in pids)
    started = time.monotonic()
    record = jobs.wait(job_id, 15)
    assert time.monotonic() - started < 6
    assert record["status"] == "failed"
    assert record["result"].startswith("Error: command timed out after 2 seconds")
    assert wait_until(lambda: not any(_alive(p) for p in pids), 5)


def test_queue_cap_respected(jobs: JobManager, marker: str) -> None:
    ids = [jobs.submit(f"sleep 0.8; echo {i} # {marker}", timeout=10) for i in range(5)]
    assert len(jobs.running_ids()) == 2 and jobs.queued_ids() == ids[2:]
    statuses = [jobs.get(i)["status"] for i in ids]
    assert statuses[2:] == ["queued"] * 3
    peak = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        live = [r for r in jobs.supervisor.registry.list() if r.status == "running"]
        peak = max(peak, len(live))
        if all(jobs.get(i)["status"] == "done" for i in ids):
            break
        time.sleep(0.05)
    assert peak <= 2
    assert [jobs.get(i)["result"] for i in ids] == [f"{i}\n" for i in range(5)]
    assert {n.source_id for n in jobs.drain_notifications()} == set(ids)


def test_cancel_kills_tree(jobs: JobManager, workspace: Path, marker: str) -> None:
    running = jobs.submit(f"sleep 30 & echo $! > pid; wait # {marker}", timeout=60, task_id="long")
    jobs.submit(started("long2", f"sleep 30 # {marker}"), timeout=60, task_id="long2")
    queued = jobs.submit(f"sleep 30 # {marker}", timeout=60, task_id="later")
    assert jobs.get("later")["status"] == "queued"
    assert jobs.cancel(queued) is True
    assert jobs.get("later")["status"] == "killed"
    assert wait_until(
        lambda: (workspace / "pid").exists() and (workspace / "pid").read_text().strip(), 10
    )
    grandchild = int((workspace / "pid").read_text())
    wait_started(workspace, "long2")
    worker = jobs.supervisor.registry.get(running)
    assert worker is not None and worker.pid and _alive(worker.pid)
    assert jobs.cancel(running) is True
    assert jobs.get(running)["status"] == "killed"
    assert wait_until(lambda: not _alive(grandchild) and not _alive(worker.pid), 5)  # type: ignore[arg-type]
    final = jobs.supervisor.registry.get(running)
    assert final is not None and final.status == "killed"
    assert jobs.cancel(running) is False  # already final
    with pytest.raises(ValueError, match="unknown background task"):
        jobs.cancel("nope")


def test_shutdown_stops_running_jobs(
    home: Path, workspace: Path, no_leftovers: None, marker: str
) -> None:
    manager = JobManager(workspace, owner="main", max_concurrent=1)
    manager.submit(started("a", f"sleep 30 # {marker}"), timeout=60, task_id="a")
    manager.submit(f"sleep 30 # {marker}", timeout=60, task_id="b")
    wait_started(workspace, "a")
    pid = manager.supervisor.registry.get("a").pid  # type: ignore[union-attr]
    manager.shutdown()
    assert not _alive(pid)  # type: ignore[arg-type]
    assert manager.get("a")["status"] == "killed" and manager.get("b")["status"] == "killed"
    with pytest.raises(RuntimeError):
        manager.submit("echo x")


def test_spawn_start_method_runs_jobs(home: Path, workspace: Path, no_leftovers: None) -> None:
    supervisor = Supervisor(workspace, start_method="spawn")
    supervisor.start()
    manager = JobManager(workspace, supervisor=supervisor)
    try:
        job_id = manager.submit("echo spawned; pwd", timeout=10)
        record = manager.wait(job_id, 20)
        assert record["status"] == "done"
        assert record["result"] == f"spawned\n{workspace.resolve()}\n"
        worker = supervisor.registry.get(job_id)
        assert worker is not None and worker.extra["start_method"] == "spawn"
        assert "spawned" in (supervisor.state_root / "logs" / f"{job_id}.log").read_text()
    finally:
        manager.shutdown()
        supervisor.shutdown()
