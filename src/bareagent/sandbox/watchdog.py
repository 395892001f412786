"""Process-count cap for one command: count its processes, kill them all past the cap.

Why a watchdog and not RLIMIT_NPROC alone: RLIMIT_NPROC counts every task (threads too)
of the real user id, not the command's processes, so a small value breaks the first fork
of a user who already runs a few hundred processes, and root ignores it entirely. The
runner polls instead (`ProcessCap.interval()`: every 20 ms for the first 0.5 s, 50 ms
up to 2 s, 100 ms up to 30 s, then 250 ms, and every 20 ms while the count is above
half the cap; one poll costs ~1.3 ms with 80 processes on the machine) and counts:

- the process tree under the command (psutil, parent links), which under bwrap includes
  everything in the pid namespace, since orphans are re-parented to its init;
- on POSIX, also every member of the process groups of those processes, so
  double-forked orphans still count until they call `setsid`.

Past the cap the whole set is SIGKILLed: the process groups first (one `killpg` reaches
a fork loop's members atomically), then every remaining process, repeatedly until none
is left. Between two polls a fast fork loop can overshoot the cap; the Linux limits wrapper
adds a kernel RLIMIT_NPROC ceiling for non-root users (see limits_exec.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

# (seconds since start, poll interval) steps; a short command is watched closely, a
# long background job cheaply.
POLL_SCHEDULE = ((0.5, 0.02), (2.0, 0.05), (30.0, 0.1))
POLL_SLOW = 0.25
POLL_BUSY = 0.02
KILL_ROUNDS = 50
FULL_SCAN_EVERY = 0.25
_IS_POSIX = os.name == "posix"


def _tree(root_pid: int) -> set[int]:
    try:
        root = psutil.Process(root_pid)
        return {root_pid, *(child.pid for child in root.children(recursive=True))}
    except psutil.Error:
        return set()


def _in_groups(pgids: set[int]) -> set[int]:
    """Processes whose process group is one of `pgids` (one getpgid per pid: cheap)."""
    members = set()
    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if os.getpgid(pid) in pgids:
                members.add(pid)
    return members


def _groups_of(pids: set[int]) -> set[int]:
    found = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            found.add(os.getpgid(pid))
    return found


def _live(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.Error:
            continue
    return alive


class ProcessCap:
    """Counts a command's processes against `cap` (plus `overhead` wrapper processes).

    A full scan (process tree plus the process groups of its members) runs every
    `FULL_SCAN_EVERY` seconds; in between, only the process groups seen last time are
    counted (about 40x cheaper: 0.7 ms against 28 ms with 580 processes). `new_group`
    says the command moves into a group of its own (bwrap's `--new-session`): full scans
    continue until that group has been seen.
    """

    def __init__(
        self, root_pid: int, cap: int, *, overhead: int = 0, new_group: bool = False
    ) -> None:
        self.root_pid = root_pid
        self.cap = cap
        self.overhead = overhead
        self.pgids: set[int] = {root_pid} if _IS_POSIX else set()
        self._groups_wanted = 2 if new_group else 1
        self.peak = 0
        self.last = 0
        self.started = time.monotonic()
        self._last_full = float("-inf")

    def interval(self) -> float:
        """Seconds until the next poll."""
        if self.last * 2 > self.cap:
            return POLL_BUSY
        elapsed = time.monotonic() - self.started
        for until, step in POLL_SCHEDULE:
            if elapsed < until:
                return step
        return POLL_SLOW

    def members(self) -> set[int]:
        """Every process attributed to the command now (full scan; zombies included)."""
        pids = _tree(self.root_pid)
        if _IS_POSIX:
            # Only groups of current members: a stale pgid could be reused by a stranger.
            self.pgids = {self.root_pid} | _groups_of(pids)
            pids |= _in_groups(self.pgids)
        pids.discard(os.getpid())
        self._last_full = time.monotonic()
        return pids

    def _needs_full_scan(self) -> bool:
        if not _IS_POSIX or len(self.pgids) < self._groups_wanted:
            return True
        return time.monotonic() - self._last_full >= FULL_SCAN_EVERY

    def count(self) -> int:
        """Live processes of the command, not counting the sandbox's own wrappers."""
        if self._needs_full_scan():
            pids = self.members()
        else:
            pids = _in_groups(self.pgids) - {os.getpid()}
            if len(pids) - self.overhead > self.cap:
                pids = self.members()  # confirm with the full view before killing
        # Zombies are cheap to count but must not trigger a kill on their own.
        if len(pids) - self.overhead > self.cap:
            pids = _live(pids)
        n = max(len(pids) - self.overhead, 0)
        self.last = n
        self.peak = max(self.peak, n)
        return n

    def exceeded(self) -> bool:
        """True if the command holds more than `cap` processes right now."""
        return self.count() > self.cap

    def kill_all(self) -> None:
        """SIGKILL every process of the command until none is left."""
        # Groups first, before any slow scan: one killpg reaches every member of a fork
        # loop's group atomically, so it stops growing at once.
        for pgid in sorted(self.pgids):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        for _ in range(KILL_ROUNDS):
            pids = _live(self.members())
            if not pids:
                break
            # Lowest pid first, which is mostly parents first: a dead parent cannot fork
            # replacements for its killed children.
            for pid in sorted(pids):
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()
            time.sleep(0.02)
