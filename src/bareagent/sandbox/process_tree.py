"""Kill a process and all of its descendants (psutil; POSIX and Windows).

Zombies count as gone: a reparented grandchild may wait for an init that never reaps it,
and our own direct child stays a zombie until its `Popen` reaps it. Waiting is done by
polling rather than `psutil.wait_procs`, which would reap our child behind `Popen`'s back
and lose its exit status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

_POLL = 0.02


def _gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Poll until every process is gone or `timeout` passes; return the survivors."""
    deadline = time.monotonic() + max(timeout, 0.0)
    alive = [p for p in procs if not _gone(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(_POLL)
        alive = [p for p in alive if not _gone(p)]
    return alive


def kill_process_tree(pid: int, *, grace: float = 1.0) -> None:
    """Terminate `pid` and its descendants (children first), then kill survivors."""
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    try:
        children = root.children(recursive=True)
    except psutil.Error:
        children = []
    # Deepest first so a parent cannot notice a dead child and respawn it before it dies.
    procs = [*reversed(children), root]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    survivors = _wait_gone(procs, grace)
    for proc in survivors:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _wait_gone(survivors, grace)


def _group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid:
                members.append(psutil.Process(pid))
        except (OSError, psutil.Error):
            continue
    return members


def kill_process_group(pgid: int, *, grace: float = 0.5) -> bool:
    """POSIX: SIGTERM a process group, wait up to `grace`, SIGKILL; True if it existed."""
    if os.name != "posix":
        return False
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return False
    # Poll the members rather than killpg(pgid, 0): an exited member stays in the group as
    # a zombie until init reaps it, which can take seconds.
    _wait_gone(_group_members(pgid), grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    return True
