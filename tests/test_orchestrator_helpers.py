"""Shared fixtures for the orchestrator/worker tests (imported by those test files).

`no_leftovers` proves that a test leaves no process behind: new descendants of the
test process, processes whose command line carries the test's marker, and every pid in
the test's worker registry must all be gone (zombies count as still there when they are
our own children, which we are responsible for reaping).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bareagent.orchestrator.supervisor import Supervisor

LEFTOVER_WAIT = 8.0


def _descendants() -> set[int]:
    try:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def _registry_pids(home: Path) -> set[int]:
    pids: set[int] = set()
    for path in home.glob("workspaces/*/workers/*.json"):
        try:
            pid = json.loads(path.read_text()).get("pid")
        except (OSError, ValueError):
            continue
        if isinstance(pid, int):
            pids.add(pid)
    return pids


def _marked(marker: str) -> set[int]:
    found = set()
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(marker in part for part in cmdline):
            found.add(proc.pid)
    return found


def _present(pid: int) -> bool:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            # Our own zombie child is a leak (we must reap it); anybody else's is not ours.
            return proc.ppid() == os.getpid()
        return True
    except psutil.Error:
        return False


def leftovers(before: set[int], home: Path, marker: str) -> set[int]:
    """Processes of this test that still exist."""
    suspects = (_descendants() - before) | _registry_pids(home) | _marked(marker)
    suspects.discard(os.getpid())
    # The spawn start method starts multiprocessing's resource tracker, one per process
    # for its whole life; it is not ours to stop.
    from multiprocessing import resource_tracker

    tracker_pid = getattr(resource_tracker._resource_tracker, "_pid", None)
    suspects.discard(tracker_pid)  # type: ignore[arg-type]
    return {pid for pid in suspects if _present(pid)}


@pytest.fixture
def marker() -> str:
    """A unique string to put into commands so their processes can be found."""
    return f"BAREAGENT_TEST_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """BAREAGENT_HOME in a temp dir."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("BAREAGENT_HOME", str(path))
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def no_leftovers(home: Path, marker: str) -> Iterator[None]:
    """Fail the test if any of its processes survive it (after a short grace)."""
    before = _descendants()
    yield
    deadline = time.monotonic() + LEFTOVER_WAIT
    remaining = leftovers(before, home, marker)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.1)
        remaining = leftovers(before, home, marker)
    for pid in remaining:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    assert not remaining, f"processes left behind: {sorted(remaining)}"


@pytest.fixture
def supervisor(home: Path, workspace: Path, no_leftovers: None) -> Iterator[Supervisor]:
    """A started Supervisor for the workspace, shut down after the test.

    Tests that also run a scripted server request this fixture first, so the spawner
    helper is forked while the test process has one thread.
    """
    sup = Supervisor(workspace)
    sup.start()
    try:
        yield sup
    finally:
        sup.shutdown()


_PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture
def subreaper() -> Iterator[None]:
    """Make the test process adopt orphans (this machine's init never reaps them)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("child subreaper is Linux-only")
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    before = {c.pid for c in psutil.Process().children()}
    try:
        yield
    finally:
        deadline = time.monotonic() + LEFTOVER_WAIT
        while time.monotonic() < deadline:
            adopted = [
                c
                for c in psutil.Process().children()
                if c.pid not in before and c.status() != psutil.STATUS_ZOMBIE
            ]
            _reap_zombies()
            if not adopted:
                break
            time.sleep(0.1)
        _reap_zombies()
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _reap_zombies() -> None:
    for child in psutil.Process().children():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError):
            pass


def wait_until(predicate: object, timeout: float, interval: float = 0.05) -> bool:
    """Poll `predicate()` until true or `timeout` seconds pass."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def started(name: str, command: str) -> str:
    """`command` that first drops a `.started-<name>` file in its cwd.

    Tests that kill a job wait for it first: `bash -lc` runs the login scripts, and on
    this machine those run `pyenv rehash`, whose lock file stays behind (and stalls every
    later login shell for a minute) if the shell is killed in the middle of it.
    """
    return f"touch .started-{name}; {command}"


def wait_started(workspace: Path, name: str, timeout: float = 15.0) -> None:
    """Wait until a command from `started(name, ...)` got past shell startup."""
    assert wait_until(lambda: (workspace / f".started-{name}").exists(), timeout), name
