"""Wait for background work with a live progress display (rich; final state only off a TTY)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn
from rich.table import Column


@dataclass
class Status:
    """What one watched piece of work is doing now."""

    done: bool
    detail: str
    ok: bool = True


@dataclass
class Watch:
    """One piece of background work: a label and how to ask whether it is finished."""

    label: str
    check: Callable[[], Status]
    finished: float | None = None
    last: Status = field(default_factory=lambda: Status(False, "starting"))


class WaitTimeout(Exception):
    """Some watched work did not finish in time; the message names it."""


def _mark(watch: Watch) -> str:
    if watch.finished is None:
        return f"[bold]{escape(watch.label)}[/bold]"
    colour, sign = ("green", "✓") if watch.last.ok else ("red", "✗")
    return f"[{colour}]{sign}[/{colour}] [bold]{escape(watch.label)}[/bold]"


def wait_all(
    console: Console,
    watches: Sequence[Watch],
    *,
    timeout: float,
    tick: Callable[[], object] | None = None,
    interval: float = 0.1,
) -> None:
    """Poll every watch (after `tick`) until all are done; WaitTimeout after `timeout` s."""
    deadline = time.monotonic() + timeout
    width = max(len(w.label) for w in watches) + 3  # room for the ✓ mark
    columns = (
        SpinnerColumn(finished_text=""),
        TextColumn("{task.description}", table_column=Column(no_wrap=True, min_width=width)),
        TextColumn(
            "{task.fields[detail]}",
            table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1),
        ),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        ids = [progress.add_task(_mark(w), total=None, detail="") for w in watches]
        while True:
            if tick is not None:
                tick()
            for watch, task_id in zip(watches, ids, strict=True):
                if watch.finished is None:
                    watch.last = watch.check()
                    if watch.last.done:
                        watch.finished = time.monotonic()
                progress.update(task_id, description=_mark(watch), detail=escape(watch.last.detail))
                if watch.finished is not None:
                    progress.update(task_id, total=1, completed=1)
            if all(w.finished is not None for w in watches):
                return
            if time.monotonic() >= deadline:
                late = ", ".join(w.label for w in watches if w.finished is None)
                raise WaitTimeout(f"still not finished after {timeout:g} s: {late}")
            time.sleep(interval)
