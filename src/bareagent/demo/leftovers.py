"""Find (and as a last resort kill) processes the demo started that are still there.

A demo process counts when it descends from this process (the spawner helper and what
it forked) or runs inside the demo's directory (every worker and job has its cwd in the
workspace; detached teammates are re-parented away from us, but not out of their cwd).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import psutil

from bareagent.sandbox.process_tree import kill_process_tree

LEFTOVER_GRACE = 5.0


def _tracker_pid() -> int | None:
    """multiprocessing's resource tracker lives as long as we do; it is not the demo's."""
    from multiprocessing import resource_tracker

    pid = getattr(resource_tracker._resource_tracker, "_pid", None)
    return pid if isinstance(pid, int) else None


def _counts(proc: psutil.Process, me: int) -> bool:
    """A zombie is ours to reap only when we are its parent; others' zombies are theirs."""
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return proc.ppid() == me
        return True
    except psutil.Error:
        return False


def descendants() -> set[int]:
    """Pids of our descendants now (taken before the demo starts, to leave them alone)."""
    with contextlib.suppress(psutil.Error):
        return {p.pid for p in psutil.Process().children(recursive=True)}
    return set()


def find_leftovers(
    root: Path, before: set[int] | frozenset[int] = frozenset()
) -> list[psutil.Process]:
    """New descendants of ours, or processes running inside `root` (never ourselves)."""
    me = os.getpid()
    skip = {me, _tracker_pid(), *before}
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(me).children(recursive=True):
            found[child.pid] = child
    resolved = root.resolve()
    for proc in psutil.process_iter(["cwd"]):
        cwd = proc.info.get("cwd")
        if cwd and Path(cwd).is_relative_to(resolved):
            found.setdefault(proc.pid, proc)
    return [p for pid, p in sorted(found.items()) if pid not in skip and _counts(p, me)]


def kill_leftovers(
    root: Path, before: set[int] | frozenset[int] = frozenset(), grace: float = 1.0
) -> list[int]:
    """Kill every leftover's process tree and wait for them; returns their pids."""
    leftovers = find_leftovers(root, before)
    for proc in leftovers:
        kill_process_tree(proc.pid, grace=grace)
    with contextlib.suppress(psutil.Error):
        psutil.wait_procs(leftovers, timeout=LEFTOVER_GRACE)
    return [p.pid for p in leftovers]
