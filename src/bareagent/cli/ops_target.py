"""Find what `logs ID` / `kill ID` mean: a worker id, a job id, or a worker's name."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from bareagent.cli.common import CLIError
from bareagent.orchestrator.registry import Registry, WorkerRecord
from bareagent.orchestrator.results import Record
from bareagent.orchestrator.state import state_root

# Worker ids, job ids and teammate names all fit this; it also keeps ids out of paths.
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass
class Target:
    """A worker and/or the job record behind an id given on the command line."""

    id: str
    root: Path
    worker: WorkerRecord | None
    job: Record | None

    @property
    def kind(self) -> str:
        """`job`, `subagent`, `teammate`."""
        return self.worker.kind if self.worker is not None else "job"

    @property
    def log_path(self) -> Path:
        """The worker's log file (a job's output goes there too)."""
        if self.worker is not None and self.worker.log_path:
            return Path(self.worker.log_path)
        return self.root / "logs" / f"{self.id}.log"

    def describe(self) -> str:
        """`job build-1`, `teammate alice (mate-ab12cd34)`."""
        if self.worker is not None and self.worker.name != self.worker.id:
            return f"{self.kind} {self.worker.name} ({self.id})"
        return f"{self.kind} {self.id}"


def read_record(path: Path) -> Record | None:
    """A result record file, or None when missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("id"), str) else None


def registry_of(root: Path) -> Registry | None:
    """The registry of a state root, or None when no worker was ever started there."""
    return Registry(root) if (root / "workers").is_dir() else None


def resolve(workspace: Path, ident: str) -> Target:
    """The worker/job for `ident` (an id, or a worker name); CLIError when there is none.

    A name matching several records (a teammate restarted over time) picks the live one,
    else the most recently started.
    """
    if not _ID_RE.match(ident):
        raise CLIError(f"invalid worker or job id: {ident!r}")
    root = state_root(workspace)
    registry = registry_of(root)
    worker = registry.get(ident) if registry is not None else None
    job = read_record(root / "jobs" / f"{ident}.json")
    if worker is None and job is None and registry is not None:
        named = [r for r in registry.list(include_finished=True) if r.name == ident]
        if named:
            named.sort(key=lambda r: (r.is_live_status, r.started_at))
            worker = named[-1]
            ident = worker.id
            job = read_record(root / "jobs" / f"{ident}.json")
    if worker is None and job is None:
        raise CLIError(f"no worker or job {ident!r} in workspace {workspace}")
    return Target(ident, root, worker, job)
