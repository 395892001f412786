"""Wake an idle teammate when `<workspace>/.tasks.json` changes.

One watchdog observer on the workspace directory, **non-recursive**, reacting only to
events whose source or destination is the task file (the task store writes a temp file
and renames it over `.tasks.json`, which arrives as a move). With inotify an idle watch
costs no CPU: the observer thread blocks in the kernel. Events for other top-level
files of the workspace are dropped after a basename comparison. On network filesystems
(same detection as the mailbox waker) a polling observer stats the directory every
`poll_interval` seconds instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from bareagent.mailbox import resolve_observer_kind

log = logging.getLogger(__name__)

TASK_FILE = ".tasks.json"


class _Handler(FileSystemEventHandler):
    def __init__(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        names = {os.path.basename(os.fsdecode(event.src_path))}
        if event.dest_path:
            names.add(os.path.basename(os.fsdecode(event.dest_path)))
        if TASK_FILE in names:
            self._on_change()


class TaskFileWatch:
    """Calls `on_change()` (from the observer thread) whenever the task file changes."""

    def __init__(
        self, workspace: str | Path, on_change: Callable[[], None], *, poll_interval: float = 1.0
    ) -> None:
        self.workspace = Path(workspace)
        self.on_change = on_change
        self.poll_interval = poll_interval
        self.kind = resolve_observer_kind("auto", self.workspace)
        self._observer: BaseObserver | None = None

    def start(self) -> TaskFileWatch:
        """Start watching; falls back to polling when native watching cannot start."""
        try:
            self._observer = self._start(self.kind)
        except OSError as exc:
            if self.kind != "native":
                raise
            log.warning("cannot watch %s natively (%s); polling it", self.workspace, exc)
            self.kind = "polling"
            self._observer = self._start("polling")
        return self

    def _start(self, kind: str) -> BaseObserver:
        observer: BaseObserver
        if kind == "polling":
            observer = PollingObserver(timeout=self.poll_interval)
        else:
            from watchdog.observers import Observer

            observer = Observer()
        observer.daemon = True
        try:
            observer.schedule(
                _Handler(self.on_change),
                str(self.workspace),
                recursive=False,
                event_filter=[FileModifiedEvent, FileCreatedEvent, FileMovedEvent],
            )
            observer.start()
        except BaseException:
            with contextlib.suppress(Exception):
                observer.stop()
            raise
        return observer

    def stop(self) -> None:
        """Stop the observer thread."""
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)
