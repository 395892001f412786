"""Worker process hygiene: session, cwd, fds, owner watch, light imports."""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from bareagent.orchestrator.jobs import JobManager
from bareagent.orchestrator.supervisor import Supervisor
from bareagent.worker.common import OwnerWatch, neutralize_inherited_fds
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    started,
    wait_started,
    wait_until,
    workspace,
)

pytestmark = pytest.mark.timeout(30)


def test_job_worker_modules_do_not_import_llm_sdks() -> None:
    code = (
        "import sys\n"
        "import bareagent.worker.job, bareagent.worker.common\n"
        "import bareagent.orchestrator.jobs, bareagent.orchestrator.helper\n"
        "print(sorted(m for m in ('anthropic', 'openai', 'httpx') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_worker_has_own_session_cwd_and_no_inherited_files(
    home: Path, workspace: Path, tmp_path: Path, marker: str, no_leftovers: None
) -> None:
    secret = tmp_path / "owner-only.txt"
    with secret.open("w") as held:  # open in the owner before the spawner helper forks
        supervisor = Supervisor(workspace)
        supervisor.start()
        jobs = JobManager(workspace, supervisor=supervisor)
        try:
            job_id = jobs.submit(started("s", f"sleep 20 # {marker}"), timeout=30)
            wait_started(workspace, "s")
            pid = supervisor.registry.get(job_id).pid  # type: ignore[union-attr]
            assert pid is not None
            proc = psutil.Process(pid)
            assert os.getsid(pid) == pid  # own session, own process group
            assert os.getpgid(pid) == pid
            assert proc.cwd() == str(workspace.resolve())
            assert str(secret) not in {f.path for f in proc.open_files()}
            assert held.fileno() >= 3
            helper = psutil.Process(supervisor.backend.helper_pid)  # type: ignore[union-attr]
            assert str(secret) not in {f.path for f in helper.open_files()}
            assert proc.ppid() == helper.pid and helper.ppid() == os.getpid()
            # stdout/stderr go to the worker's log file.
            log_path = supervisor.state_root / "logs" / f"{job_id}.log"
            assert os.readlink(f"/proc/{pid}/fd/1") == str(log_path)
            assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
        finally:
            jobs.shutdown()
            supervisor.shutdown()


def _hold_pipe(write_fd: int, neutralize: bool) -> None:
    if neutralize:
        neutralize_inherited_fds(set())
    time.sleep(3)


@pytest.mark.parametrize("neutralize", [True, False])
def test_neutralized_fds_release_inherited_pipes(neutralize: bool) -> None:
    read_fd, write_fd = os.pipe()
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_hold_pipe, args=(write_fd, neutralize))
    child.start()
    time.sleep(0.3)
    os.close(write_fd)
    got_eof = threading.Event()

    def reader() -> None:
        if os.read(read_fd, 1) == b"":
            got_eof.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        # With the child's copy re-pointed to /dev/null, EOF arrives at once; otherwise
        # only when the child exits.
        assert got_eof.wait(1.0) is neutralize
    finally:
        child.kill()
        child.join(5)
        thread.join(5)
        os.close(read_fd)


def test_owner_watch_fires_when_owner_dies() -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    fired = threading.Event()
    try:
        ctime = psutil.Process(owner.pid).create_time()
        watch = OwnerWatch(owner.pid, ctime, fired.set, interval=0.1)
        watch.start()
        assert not fired.wait(0.5)
        owner.kill()
        owner.wait(5)
        assert fired.wait(2.0)
    finally:
        owner.kill()
        owner.wait(5)


def test_owner_watch_detects_reused_pid() -> None:
    fired = threading.Event()
    me = psutil.Process()
    OwnerWatch(me.pid, me.create_time() - 50, fired.set, interval=0.1).start()
    assert fired.wait(1.0)
    stopped = threading.Event()
    watch = OwnerWatch(me.pid, me.create_time(), stopped.set, interval=0.05)
    watch.start()
    time.sleep(0.2)
    watch.stop()
    watch.join(1)
    assert not stopped.is_set() and not watch.is_alive()


def test_job_output_streams_into_log_while_running(
    home: Path, workspace: Path, marker: str, no_leftovers: None
) -> None:
    jobs = JobManager(workspace)
    try:
        job_id = jobs.submit(f"echo first-{marker}; sleep 3; echo second", timeout=10)
        log_path = jobs.state_root / "logs" / f"{job_id}.log"
        assert wait_until(lambda: f"first-{marker}" in log_path.read_text(), 2.5)
        assert jobs.get(job_id)["status"] == "running"
        assert "second" in jobs.wait(job_id, 10)["result"]
    finally:
        jobs.shutdown()
