"""Supervisor: lost workers, a dead spawner helper, spawn failures."""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from bareagent.orchestrator.results import ResultStore
from bareagent.orchestrator.spawner import SpawnError
from bareagent.orchestrator.spec import SpawnSpec, build_job_spec
from bareagent.orchestrator.supervisor import Supervisor
from bareagent.sandbox.process_tree import kill_process_tree
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

pytestmark = pytest.mark.timeout(40)


def _job(supervisor: Supervisor, job_id: str, command: str) -> SpawnSpec:
    ResultStore(supervisor.state_root / "jobs").create(
        {"id": job_id, "status": "queued", "owner": "t", "created_at": time.time()},
        lambda existing: None,
    )
    return build_job_spec(
        command,
        timeout=60,
        job_id=job_id,
        workspace=supervisor.workspace,
        state_root=supervisor.state_root,
        session_id=supervisor.session_id,
        owner_create_time=supervisor.owner_create_time,
    )


def test_killed_worker_without_a_reaper_reads_lost_and_helper_is_replaced(
    home: Path, workspace: Path, marker: str, no_leftovers: None, subreaper: None
) -> None:
    supervisor = Supervisor(workspace)
    supervisor.start()
    try:
        handle = supervisor.spawn(_job(supervisor, "w1", started("w1", f"sleep 30 # {marker}")))
        wait_started(workspace, "w1")
        assert supervisor.registry.get("w1").status == "running"  # type: ignore[union-attr]
        helper_pid = supervisor.backend.helper_pid  # type: ignore[union-attr]
        os.kill(helper_pid, signal.SIGKILL)  # nobody left to reap or record the worker
        assert wait_until(lambda: not supervisor.backend.alive, 5)  # type: ignore[union-attr]
        assert handle.pid is not None
        for child in psutil.Process(handle.pid).children():
            kill_process_tree(child.pid)
        os.kill(handle.pid, signal.SIGKILL)
        assert wait_until(lambda: psutil.Process(handle.pid).status() == psutil.STATUS_ZOMBIE, 5)
        record = supervisor.registry.get("w1")
        assert record is not None and record.status == "lost"
        assert [r.id for r in supervisor.registry.list()] == ["w1"]
        # The next spawn starts a new helper.
        again = supervisor.spawn(_job(supervisor, "w2", f"echo again # {marker}"))
        assert supervisor.backend.helper_pid != helper_pid  # type: ignore[union-attr]
        assert supervisor.wait(again.id, 10)
        assert supervisor.registry.get("w2").status == "exited"  # type: ignore[union-attr]
    finally:
        supervisor.shutdown()


def test_worker_that_dies_before_ready_is_a_spawn_error(
    home: Path, workspace: Path, no_leftovers: None
) -> None:
    supervisor = Supervisor(workspace)
    supervisor.start()
    try:
        spec = _job(supervisor, "w3", "echo x")
        spec.workspace = str(workspace / "gone")  # chdir fails in the child
        with pytest.raises(SpawnError, match="w3 exited with code 1 before it was ready"):
            supervisor.spawn(spec)
        record = supervisor.registry.get("w3")
        assert record is not None and record.status == "failed"
    finally:
        supervisor.shutdown()


def test_shutdown_reaps_everything_and_closes_the_session_log(
    home: Path, workspace: Path, marker: str, no_leftovers: None
) -> None:
    supervisor = Supervisor(workspace)
    supervisor.start()
    handles = [
        supervisor.spawn(_job(supervisor, f"s{i}", started(f"s{i}", f"sleep 30 # {marker}")))
        for i in range(3)
    ]
    for i in range(3):
        wait_started(workspace, f"s{i}")
    helper = supervisor.backend.helper_pid  # type: ignore[union-attr]
    supervisor.shutdown()
    for handle in handles:
        assert handle.exited.is_set()
        assert supervisor.registry.get(handle.id).status == "killed"  # type: ignore[union-attr]
    assert not psutil.pid_exists(helper)
    lines = supervisor.session_log.read_text().splitlines()
    assert any("[spawner pid=" in line for line in lines)
    assert any(f"[s0 pid={handles[0].pid}]" in line for line in lines)
