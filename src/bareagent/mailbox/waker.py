"""Wake readers when their mailbox file changes, without polling.

`MailboxWaker` runs one watchdog observer on the mailbox directory (non-recursive) and
keeps, per agent that someone waits for, a change counter with a condition variable and
a `threading.Event`. A modify/create/move event for `<agent>.jsonl` bumps exactly that
agent's counter and sets exactly that agent's event; other agents are untouched.

The native observer (inotify on Linux) blocks in the kernel while nothing happens. On
network filesystems a writer on another machine produces no local inotify event, so
there (or when asked) a `PollingObserver` compares directory snapshots instead.

Fork rule: observer threads do not survive `fork()`. Create (start) a waker inside the
process that uses it, after any fork; `MessageBus` does this lazily and per pid.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Literal

import psutil
from watchdog.events import (
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

log = logging.getLogger("bareagent.mailbox")

ObserverMode = Literal["auto", "native", "polling"]
OBSERVER_MODES: tuple[str, ...] = ("auto", "native", "polling")

#: Filesystems where changes made by other machines raise no local inotify event.
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb",
        "smb2",
        "smb3",
        "smbfs",
        "9p",
        "virtiofs",
        "sshfs",
        "fuse.sshfs",
        "afs",
        "openafs",
        "ceph",
        "fuse.ceph",
        "glusterfs",
        "fuse.glusterfs",
        "lustre",
        "gpfs",
        "beegfs",
        "davfs",
        "fuse.davfs2",
        "fuse.rclone",
        "fuse.s3fs",
        "fuse.gcsfuse",
        "fuse.juicefs",
        "vboxsf",
        "vmhgfs",
        "fuse.vmhgfs-fuse",
        "ncpfs",
        "coda",
        "ocfs2",
        "gfs2",
        "panfs",
        "orangefs",
        "webdav",
    }
)

_WATCHED_EVENTS: list[type[FileSystemEvent]] = [FileModifiedEvent, FileCreatedEvent, FileMovedEvent]
_SUFFIX = ".jsonl"
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape_mount(field: str) -> str:
    """Decode the octal escapes (`\\040` for space) used in /proc/mounts."""
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def _mounts_from_proc() -> Iterable[tuple[str, str]]:
    for source in ("/proc/self/mounts", "/proc/mounts"):
        try:
            text = Path(source).read_text(errors="replace")
        except OSError:
            continue
        pairs = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3:
                pairs.append((_unescape_mount(parts[1]), parts[2]))
        return pairs
    return []


def filesystem_type(path: str | os.PathLike[str]) -> str | None:
    """Return the filesystem type of the mount holding `path` (None if unknown)."""
    target = os.path.realpath(path)
    if sys.platform.startswith("linux"):
        mounts: Iterable[tuple[str, str]] = _mounts_from_proc()
    else:
        try:
            mounts = [(p.mountpoint, p.fstype) for p in psutil.disk_partitions(all=True)]
        except (OSError, RuntimeError):
            return None
    best: tuple[int, str] | None = None
    for mountpoint, fstype in mounts:
        mp = mountpoint.rstrip(os.sep) or os.sep
        inside = target == mp or target.startswith(mp if mp.endswith(os.sep) else mp + os.sep)
        if inside and (best is None or len(mp) > best[0]):
            best = (len(mp), fstype)
    return best[1].lower() if best else None


def resolve_observer_kind(mode: str, path: str | os.PathLike[str]) -> Literal["native", "polling"]:
    """Pick `native` or `polling` for `mode` (`auto` polls on network filesystems)."""
    if mode not in OBSERVER_MODES:
        raise ValueError(f"Invalid observer {mode!r}; expected one of: {', '.join(OBSERVER_MODES)}")
    if mode == "native":
        return "native"
    if mode == "polling":
        return "polling"
    fstype = filesystem_type(path)
    if fstype is not None and fstype in NETWORK_FILESYSTEMS:
        log.info("Mailbox %s is on %s; using the polling observer", path, fstype)
        return "polling"
    return "native"


class _Slot:
    """Change counter, condition and event for one agent."""

    __slots__ = ("cond", "event", "seq")

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.event = threading.Event()
        self.seq = 0


class _Handler(FileSystemEventHandler):
    def __init__(self, waker: MailboxWaker) -> None:
        self._waker = waker

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._waker._notify_path(os.fsdecode(event.src_path))
        if event.dest_path:
            self._waker._notify_path(os.fsdecode(event.dest_path))


class MailboxWaker:
    """Per-agent wake-ups driven by a watchdog observer on one mailbox directory."""

    def __init__(
        self,
        mailbox_dir: str | os.PathLike[str],
        *,
        observer: ObserverMode | str = "auto",
        poll_interval: float = 0.25,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval!r}")
        self.mailbox_dir = Path(mailbox_dir)
        self.mailbox_dir.mkdir(parents=True, exist_ok=True)
        self.kind: Literal["native", "polling"] = resolve_observer_kind(observer, self.mailbox_dir)
        self.poll_interval = poll_interval
        self.pid = os.getpid()
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.Lock()
        self._observer: BaseObserver | None = None

    # lifecycle -----------------------------------------------------------------
    def start(self) -> MailboxWaker:
        """Start the observer thread (idempotent); falls back to polling if native fails."""
        with self._lock:
            if self._observer is not None:
                return self
            try:
                self._observer = self._start_observer(self.kind)
            except OSError as exc:
                if self.kind != "native":
                    raise
                # e.g. inotify watch/instance limits: still correct, just slower wakes.
                log.warning("Native file watching failed (%s); using the polling observer", exc)
                self.kind = "polling"
                self._observer = self._start_observer("polling")
        return self

    def _start_observer(self, kind: str) -> BaseObserver:
        observer: BaseObserver
        if kind == "polling":
            observer = PollingObserver(timeout=self.poll_interval)
        else:
            from watchdog.observers import Observer

            observer = Observer()
        observer.daemon = True
        try:
            observer.schedule(
                _Handler(self), str(self.mailbox_dir), recursive=False, event_filter=_WATCHED_EVENTS
            )
            observer.start()
        except BaseException:
            with contextlib.suppress(Exception):  # release its inotify instance and threads
                observer.stop()
            raise
        return observer

    def stop(self) -> None:
        """Stop the observer thread; waiting agents are woken once."""
        with self._lock:
            observer, self._observer = self._observer, None
        if observer is not None and self.pid == os.getpid():
            observer.stop()
            observer.join(timeout=5)
        for agent in list(self._slots):
            self.notify(agent)

    @property
    def running(self) -> bool:
        """True while the observer thread is alive in this process."""
        obs = self._observer
        return obs is not None and self.pid == os.getpid() and obs.is_alive()

    def __enter__(self) -> MailboxWaker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # per-agent state -------------------------------------------------------------
    def _slot(self, agent: str) -> _Slot:
        with self._lock:
            slot = self._slots.get(agent)
            if slot is None:
                slot = self._slots[agent] = _Slot()
            return slot

    def event(self, agent: str) -> threading.Event:
        """Return the Event set whenever `agent`'s mailbox file changes (caller clears it)."""
        return self._slot(agent).event

    def sequence(self, agent: str) -> int:
        """Return `agent`'s change counter; read it *before* checking for mail."""
        slot = self._slot(agent)
        with slot.cond:
            return slot.seq

    def wait_for_change(self, agent: str, seen: int, timeout: float | None) -> bool:
        """Block until `agent`'s counter differs from `seen`; False on timeout."""
        slot = self._slot(agent)
        with slot.cond:
            return slot.cond.wait_for(lambda: slot.seq != seen, timeout)

    def notify(self, agent: str) -> None:
        """Wake `agent`'s waiters (also called by the observer)."""
        with self._lock:
            slot = self._slots.get(agent)
        if slot is None:
            return  # nobody in this process waits for this agent
        with slot.cond:
            slot.seq += 1
            slot.cond.notify_all()
        slot.event.set()

    def _notify_path(self, path: str) -> None:
        name = os.path.basename(path)
        if name.endswith(_SUFFIX) and not name.startswith("."):
            self.notify(name[: -len(_SUFFIX)])
