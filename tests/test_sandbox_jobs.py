"""Background jobs get exactly the bash tool's sandbox: env policy, limits, bwrap, cap."""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bareagent.orchestrator.jobs import JobManager
from bareagent.orchestrator.spawner import default_start_method
from bareagent.orchestrator.spec import SpawnSpec, build_job_spec
from bareagent.sandbox import bwrap
from bareagent.sandbox.limits import ResourceLimits
from bareagent.sandbox.policy import SandboxPolicy
from bareagent.worker.job import job_policy
from test_orchestrator_helpers import (  # noqa: F401
    _descendants,
    home,
    leftovers,
    marker,
    no_leftovers,
    started,
    wait_started,
    workspace,
)

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(os.name != "posix", reason="runs bash"),
]
REASON = bwrap.unavailable_reason(network=False)
needs_bwrap = pytest.mark.skipif(REASON is not None, reason=f"bwrap unavailable: {REASON}")
PY = shlex.quote(sys.executable)


@contextlib.contextmanager
def _jobs(workspace: Path, policy: SandboxPolicy | None) -> Iterator[JobManager]:
    manager = JobManager(workspace, owner="main", max_concurrent=2, sandbox_policy=policy)
    try:
        yield manager
    finally:
        manager.shutdown()


def _run(manager: JobManager, command: str, timeout: float = 20) -> dict[str, object]:
    job_id = manager.submit(command, timeout=timeout)
    return dict(manager.wait(job_id, timeout + 15))


def test_job_hides_secrets_and_passes_allowed(
    workspace: Path, no_leftovers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set before the manager exists: its spawner helper is forked from this process.
    monkeypatch.setenv("FAKE_SERVICE_API_KEY", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-job")
    command = 'echo "k=${FAKE_SERVICE_API_KEY-unset} o=${OPENAI_API_KEY-unset}"'
    with _jobs(workspace, None) as manager:
        record = _run(manager, command)
        assert record["status"] == "done" and record["result"] == "k=unset o=unset\n"
        # The worker itself (outside the sandbox) still had the variables.
    allowed = SandboxPolicy(env_allow=("FAKE_SERVICE_API_KEY",))
    with _jobs(workspace, allowed) as manager:
        record = _run(manager, command)
        assert record["result"] == "k=s3cret o=unset\n"


def test_job_spec_carries_the_policy(workspace: Path, home: Path) -> None:
    policy = SandboxPolicy(level="bwrap", limits=ResourceLimits(memory_mb=300)).for_workspace(
        workspace
    )
    spec = build_job_spec(
        "true",
        timeout=5,
        job_id="j1",
        workspace=workspace,
        state_root=home / "s",
        sandbox=policy.to_dict(),
    )
    again = SpawnSpec.from_dict(spec.to_dict())
    assert job_policy(again) == policy
    bad = spec.to_dict()
    bad["payload"]["sandbox"] = {"level": "chroot"}
    with pytest.raises(ValueError, match="sandbox level"):
        SpawnSpec.from_dict(bad)
    # A spec without a policy still runs under the secure default.
    bare = build_job_spec("true", timeout=5, job_id="j2", workspace=workspace, state_root=home)
    default = job_policy(bare)
    assert default.level == "process" and default.limits == ResourceLimits()
    assert default.workspace == str(workspace.resolve())


def test_job_manager_puts_its_policy_in_the_spec(workspace: Path, no_leftovers: None) -> None:
    policy = SandboxPolicy(limits=ResourceLimits(open_files=99))
    with _jobs(workspace, policy) as manager:
        assert manager.sandbox_policy.workspace == str(workspace.resolve())
        assert manager.sandbox_policy.state_root == str(manager.state_root)
        record = _run(manager, "ulimit -n; ulimit -v")
        assert record["result"] == f"99\n{4096 * 1024}\n"


def test_job_memory_limit(workspace: Path, no_leftovers: None) -> None:
    with _jobs(workspace, SandboxPolicy(limits=ResourceLimits(memory_mb=256))) as manager:
        started_at = time.monotonic()
        record = _run(manager, f'{PY} -c "x = bytearray(8*1024**3)"')
        assert record["status"] == "failed" and record["exit_code"] == 1
        assert "MemoryError" in str(record["result"])
        assert time.monotonic() - started_at < 10


def test_job_fork_loop_is_capped(workspace: Path, marker: str, no_leftovers: None) -> None:
    policy = SandboxPolicy(limits=ResourceLimits(max_processes=20))
    with _jobs(workspace, policy) as manager:
        # `exec -a` puts the marker into every sleep's command line.
        record = _run(manager, f"for i in $(seq 1000); do (exec -a {marker} sleep 30) & done; wait")
        assert record["status"] == "failed"
        result = str(record["result"])
        assert result.startswith("Error: command exceeded the sandbox process limit of 20")
        assert float(record["duration"]) < 5  # type: ignore[arg-type]


@pytest.fixture()
def var_home(marker: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """BAREAGENT_HOME outside /tmp, so the private /tmp alone cannot hide the state root."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    path = Path(tempfile.mkdtemp(prefix="bareagent-jobhome-", dir=base))
    monkeypatch.setenv("BAREAGENT_HOME", str(path))
    before = _descendants()
    try:
        yield path
    finally:
        deadline = time.monotonic() + 8
        left = leftovers(before, path, marker)
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = leftovers(before, path, marker)
        for pid in left:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        shutil.rmtree(path, ignore_errors=True)
        assert not left, f"processes left behind: {sorted(left)}"


@needs_bwrap
def test_bwrap_job_isolation(workspace: Path, var_home: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    escape_dir = Path(tempfile.mkdtemp(prefix="bareagent-escape-", dir=var_home.parent))
    escape = escape_dir / "escape.txt"
    hidden_write = var_home / "written-into-hidden.txt"
    try:
        with _jobs(workspace, SandboxPolicy(level="bwrap")) as manager:
            secret = manager.state_root / "jobs" / "planted-secret.txt"
            secret.write_text("STATE-SECRET")
            command = (
                "echo in > inside.txt && echo wrote-inside; "
                f"echo x > {escape} || echo outside-refused; "
                f"echo x > {hidden_write} || echo hidden-refused; "
                f"cat {secret} || echo state-hidden; "
                f"{PY} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), "
                'timeout=3)" 2>/dev/null || echo net-refused'
            )
            record = _run(manager, command)
            result = str(record["result"])
            assert record["status"] == "done", result
            words = ("wrote-inside", "outside-refused", "hidden-refused", "state-hidden")
            for word in (*words, "net-refused"):
                assert word in result
            assert "STATE-SECRET" not in result
            assert (workspace / "inside.txt").read_text() == "in\n"
            assert not escape.exists() and not hidden_write.exists()
            # Control run at the process level: the same command reaches all three.
            with _jobs(workspace, SandboxPolicy()) as plain:
                control = str(_run(plain, command)["result"])
            assert "STATE-SECRET" in control and "net-refused" not in control
            assert escape.exists()
    finally:
        listener.close()
        shutil.rmtree(escape_dir, ignore_errors=True)


@needs_bwrap
def test_bwrap_job_cancel_kills_the_namespace(workspace: Path, var_home: Path, marker: str) -> None:
    with _jobs(workspace, SandboxPolicy(level="bwrap")) as manager:
        job_id = manager.submit(
            started("box", f"(exec -a {marker} setsid sleep 30) & exec -a {marker} sleep 30"),
            timeout=60,
        )
        wait_started(workspace, "box")
        assert manager.cancel(job_id) is True
        assert manager.get(job_id)["status"] == "killed"


@pytest.mark.skipif(default_start_method() != "fork", reason="patch reaches workers by fork")
def test_bwrap_unavailable_job_fails_closed(
    workspace: Path, no_leftovers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bwrap, "find_bwrap", lambda: None)
    with _jobs(workspace, SandboxPolicy(level="bwrap")) as manager:
        record = _run(manager, "touch ran")
        assert record["status"] == "failed"
        assert str(record["result"]).startswith(
            "Error: sandbox level 'bwrap' is unavailable: bwrap is not installed"
        )
        assert not (workspace / "ran").exists()
