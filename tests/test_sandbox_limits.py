"""Resource limits and the process-count cap of sandboxed commands (POSIX)."""

from __future__ import annotations

import os
import resource
import shlex
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bareagent.core.handlers.bash import run_bash
from bareagent.sandbox import limits_exec
from bareagent.sandbox.limits import ResourceLimits, limits_argv, not_looser
from bareagent.sandbox.policy import SandboxPolicy
from bareagent.sandbox.runner import run_shell
from bareagent.sandbox.watchdog import ProcessCap

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX resource limits")

PY = shlex.quote(sys.executable)


def _policy(**limits: int) -> SandboxPolicy:
    return SandboxPolicy(limits=ResourceLimits(**limits))


def _with_marker(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(marker in part for part in proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.fixture()
def marker() -> Iterator[str]:
    """A unique `sleep` argument; teardown kills and reports any survivor."""
    token = f"30.{uuid.uuid4().int % 10**9:09d}"
    yield token
    deadline = time.monotonic() + 3
    left = _with_marker(token)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _with_marker(token)
    for proc in left:
        proc.kill()
    assert not left, f"processes left behind: {left}"


def test_default_limits_are_applied(tmp_path: Path) -> None:
    out = run_bash(tmp_path, "ulimit -t; ulimit -v; ulimit -n; ulimit -c")
    assert out.split() == ["1800", str(4096 * 1024), "4096", "0"]
    custom = _policy(cpu_seconds=7, memory_mb=300, open_files=64)
    out = run_bash(tmp_path, "ulimit -t; ulimit -v; ulimit -n; ulimit -Hn", policy=custom)
    assert out.split() == ["7", str(300 * 1024), "64", "64"]


def test_zero_disables_a_limit_and_none_level_sets_nothing(tmp_path: Path) -> None:
    parent_as = resource.getrlimit(resource.RLIMIT_AS)[0]
    expected = "unlimited" if parent_as == resource.RLIM_INFINITY else str(parent_as // 1024)
    out = run_bash(tmp_path, "ulimit -v", policy=_policy(memory_mb=0))
    assert out.strip() == expected
    out = run_bash(tmp_path, "ulimit -v; ulimit -t", policy=SandboxPolicy(level="none"))
    assert out.split()[0] == expected


@pytest.mark.timeout(30)
def test_runaway_allocation_fails_fast_and_runner_is_unharmed(tmp_path: Path) -> None:
    before = resource.getrlimit(resource.RLIMIT_AS)
    started = time.monotonic()
    out = run_bash(
        tmp_path,
        f'{PY} -c "x = bytearray(8*1024**3)"',
        timeout=20,
        policy=_policy(memory_mb=256),
    )
    elapsed = time.monotonic() - started
    assert out.startswith("Command failed with exit code 1")
    assert "MemoryError" in out
    assert elapsed < 5
    # The limit was the child's alone.
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert run_bash(tmp_path, f'{PY} -c "x = bytearray(64*1024**2); print(len(x))"') == (
        f"{64 * 1024**2}\n"
    )


@pytest.mark.timeout(30)
def test_cpu_limit_stops_a_spinning_process(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_shell(
        f'{PY} -c "while True: pass"', cwd=tmp_path, timeout=20, policy=_policy(cpu_seconds=1)
    )
    assert not result.timed_out
    assert result.exit_code not in (0, None)
    assert time.monotonic() - started < 10


def test_open_files_limit(tmp_path: Path) -> None:
    code = (
        "import os\nfds = []\ntry:\n    for _ in range(200): fds.append(os.open(os.devnull, 0))\n"
        "except OSError as e: print('stopped', len(fds), e.strerror)\nelse: print('opened all')"
    )
    script = tmp_path / "fds.py"
    script.write_text(code)
    out = run_bash(tmp_path, f"{PY} fds.py", policy=_policy(open_files=32))
    assert out.startswith("stopped") and "Too many open files" in out
    assert run_bash(tmp_path, f"{PY} fds.py") == "opened all\n"


@pytest.mark.timeout(40)
def test_fork_loop_is_capped_and_fully_killed(tmp_path: Path, marker: str) -> None:
    started = time.monotonic()
    result = run_shell(
        f"for i in $(seq 1000); do sleep {marker} & done; wait",
        cwd=tmp_path,
        timeout=20,
        policy=_policy(max_processes=20),
    )
    elapsed = time.monotonic() - started
    assert not result.timed_out and result.exit_code is None
    assert result.error is not None
    assert result.error.startswith("command exceeded the sandbox process limit of 20 processes")
    assert elapsed < 5
    assert _with_marker(marker) == []


def test_commands_below_the_cap_run_normally(tmp_path: Path) -> None:
    out = run_bash(
        tmp_path,
        "for i in 1 2 3 4 5; do sleep 0.2 & done; wait; echo done",
        policy=_policy(max_processes=8),
    )
    assert out == "done\n"


def test_process_cap_counts_the_tree(tmp_path: Path, marker: str) -> None:
    import subprocess

    proc = subprocess.Popen(
        ["bash", "-c", f"sleep {marker} & sleep {marker} & wait"], start_new_session=True
    )
    try:
        cap = ProcessCap(proc.pid, 2)
        deadline = time.monotonic() + 5
        while cap.count() < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert cap.count() == 3 and cap.exceeded() and cap.peak == 3
        cap.kill_all()
        assert proc.wait(5) == -9
        assert cap.members() == set() or all(
            psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in cap.members()
        )
    finally:
        proc.kill()
        proc.wait()


def test_limits_wrapper_argv(tmp_path: Path) -> None:
    limits = ResourceLimits(cpu_seconds=3, memory_mb=1, open_files=0, max_processes=4)
    argv = limits_argv(limits, {}, ["bash", "-lc", "true"])
    assert argv[:3] == [sys.executable, "-I", "-S"]
    assert argv[argv.index("--cpu") + 1] == "3"
    assert argv[argv.index("--as") + 1] == str(1024 * 1024)
    assert "--nofile" not in argv and "--no-lc-ctype" in argv
    assert argv[-4:] == ["--", "bash", "-lc", "true"]


def test_nproc_backstop(monkeypatch: pytest.MonkeyPatch) -> None:
    own = limits_exec.user_task_count(os.getuid())
    assert own >= psutil.Process().num_threads()
    assert limits_exec.nproc_backstop(0) is None
    if os.getuid() == 0:
        assert limits_exec.nproc_backstop(100) is None  # root ignores RLIMIT_NPROC
    monkeypatch.setattr(os, "getuid", lambda: 2**31 - 7)
    assert limits_exec.nproc_backstop(100) == 100  # nobody runs as that uid


def test_not_looser() -> None:
    assert not_looser("memory_mb", 1024, None)
    assert not not_looser("memory_mb", 8192, None)
    assert not not_looser("memory_mb", 0, 2048)
    assert not_looser("memory_mb", 0, 0)
    assert not_looser("max_processes", None, 300)
