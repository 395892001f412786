"""Worker rows for `bareagent ps` and `top`: registry records plus psutil samples.

CPU and RSS of a row cover the worker's whole process tree (a job's shell and whatever it
runs), except subtrees that are workers themselves: every process is counted once, for
its nearest ancestor that is a registered worker.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil
from rich.table import Table
from rich.text import Text

from bareagent.orchestrator.registry import Registry, WorkerRecord
from bareagent.orchestrator.state import state_root

PRIME_SECONDS = 0.2
STATUS_STYLES = {
    "starting": "yellow",
    "running": "green",
    "idle": "cyan",
    "exited": "dim",
    "failed": "red",
    "killed": "magenta",
    "lost": "bold red",
}
PS_COLUMNS = ("ID", "KIND", "NAME", "PID", "PARENT", "STATUS", "CPU%", "RSS", "AGE", "EXIT", "CWD")


@dataclass
class WorkerRow:
    """One line of `ps`: what the registry says plus what the process uses now."""

    id: str
    kind: str
    name: str
    pid: int | None
    parent: str
    status: str
    cwd: str
    started_at: float
    ended_at: float | None
    exit_code: int | None
    cpu_percent: float | None
    rss_bytes: int | None
    age_seconds: float
    log_path: str

    def to_json(self) -> dict[str, Any]:
        """The `ps --json` object (the keys are a public contract)."""
        return asdict(self)


def read_records(workspace: Path, include_finished: bool) -> list[WorkerRecord]:
    """Registry records of a workspace with `lost` computed; [] when nothing ran there yet."""
    root = state_root(workspace)
    if not (root / "workers").is_dir():
        return []
    return Registry(root).list(include_finished=include_finished)


class Sampler:
    """Measures CPU and RSS of worker trees; keeps processes between calls (for `top`).

    `psutil.Process.cpu_percent(None)` compares with the previous call on the same object,
    so the first sample of a process only primes it. Priming all processes at once and
    sleeping once keeps `ps` at one short interval however many workers there are.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[int, float], psutil.Process] = {}

    def rows(
        self, records: Iterable[WorkerRecord], *, prime: float = 0.0, now: float | None = None
    ) -> list[WorkerRow]:
        """Rows for `records`; `prime` > 0 waits that long so new processes get a real CPU %."""
        records = list(records)
        roots = {r.pid: r.id for r in records if r.is_live_status and r.pid}
        owned = _attribute(roots)
        procs: dict[tuple[int, float], tuple[str, psutil.Process]] = {}
        fresh: list[psutil.Process] = []
        for pid, (worker_id, proc) in owned.items():
            try:
                key = (pid, proc.create_time())
            except psutil.Error:
                continue
            known = self._known.get(key)
            if known is None:
                known = proc
                fresh.append(proc)
                _cpu(proc)  # primes the counter
            procs[key] = (worker_id, known)
        if fresh and prime > 0:
            time.sleep(prime)
        cpu: dict[str, float] = {}
        rss: dict[str, int] = {}
        for worker_id, proc in procs.values():
            try:
                with proc.oneshot():
                    used = _cpu(proc)
                    memory = proc.memory_info().rss
            except psutil.Error:
                continue
            cpu[worker_id] = cpu.get(worker_id, 0.0) + used
            rss[worker_id] = rss.get(worker_id, 0) + memory
        self._known = {key: proc for key, (_wid, proc) in procs.items()}
        now = time.time() if now is None else now
        return [_row(r, cpu.get(r.id), rss.get(r.id), now) for r in records]


def _cpu(proc: psutil.Process) -> float:
    try:
        return float(proc.cpu_percent(None))
    except psutil.Error:
        return 0.0


def _attribute(roots: dict[int, str]) -> dict[int, tuple[str, psutil.Process]]:
    """Map every process below (and including) a worker root to that worker."""
    if not roots:
        return {}
    procs: dict[int, psutil.Process] = {}
    parents: dict[int, int] = {}
    for proc in psutil.process_iter(["ppid"]):
        procs[proc.pid] = proc
        parents[proc.pid] = int(proc.info.get("ppid") or 0)
    owner: dict[int, str | None] = {}

    def find(pid: int) -> str | None:
        chain: list[int] = []
        found: str | None = None
        while pid and pid not in owner:
            if pid in roots:
                found = roots[pid]
                break
            chain.append(pid)
            parent = parents.get(pid, 0)
            if parent == pid:
                break
            pid = parent
        else:
            found = owner.get(pid) if pid else None
        for item in chain:
            owner[item] = found
        return found

    out: dict[int, tuple[str, psutil.Process]] = {}
    for pid, proc in procs.items():
        worker_id = find(pid)
        if worker_id is not None:
            out[pid] = (worker_id, proc)
    return out


def _row(record: WorkerRecord, cpu: float | None, rss: int | None, now: float) -> WorkerRow:
    live = record.is_live_status
    return WorkerRow(
        id=record.id,
        kind=record.kind,
        name=record.name,
        pid=record.pid,
        parent=record.parent,
        status=record.status,
        cwd=record.cwd,
        started_at=record.started_at,
        ended_at=record.ended_at,
        exit_code=record.exit_code,
        cpu_percent=round(cpu, 1) if live and cpu is not None else None,
        rss_bytes=rss if live else None,
        age_seconds=round(max(0.0, now - record.started_at), 3),
        log_path=record.log_path,
    )


def collect_rows(
    workspace: Path, include_finished: bool, prime: float = PRIME_SECONDS
) -> list[WorkerRow]:
    """Everything `ps` shows, sampled once (one short interval for CPU %)."""
    return Sampler().rows(read_records(workspace, include_finished), prime=prime)


def sort_by_cpu(rows: Sequence[WorkerRow]) -> list[WorkerRow]:
    """Busiest first; rows without a process last, oldest first among equals."""
    return sorted(
        rows, key=lambda r: (-(r.cpu_percent or 0.0), r.cpu_percent is None, r.started_at)
    )


# -- formatting


def human_bytes(value: int | None) -> str:
    """`812K`, `12.3M`, `1.2G`; `-` for none."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "K", "M", "G", "T"):
        if size < 1024 or unit == "T":
            if unit in ("B", "K"):
                return f"{size:.0f}{unit}"
            return f"{size:.1f}{unit}"
        size /= 1024
    return f"{size:.1f}T"


def human_age(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`, `4d03h`."""
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def _cells(row: WorkerRow) -> list[str]:
    return [
        row.id,
        row.kind,
        row.name,
        "-" if row.pid is None else str(row.pid),
        row.parent,
        row.status,
        "-" if row.cpu_percent is None else f"{row.cpu_percent:.1f}",
        human_bytes(row.rss_bytes),
        human_age(row.age_seconds),
        "-" if row.exit_code is None else str(row.exit_code),
        row.cwd,
    ]


def plain_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, like `ps`; the last column is not padded."""
    lines = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = []
    for line in lines:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])]
        out.append("  ".join([*cells, line[-1]]).rstrip())
    return "\n".join(out)


def ps_plain(rows: Sequence[WorkerRow]) -> str:
    """`ps` for pipes and files."""
    return plain_table(PS_COLUMNS, [_cells(r) for r in rows])


def ps_table(rows: Sequence[WorkerRow], title: str | None = None) -> Table:
    """`ps` / `top` as a rich table."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for name in PS_COLUMNS:
        numeric = name in ("PID", "CPU%", "RSS", "AGE", "EXIT")
        table.add_column(name, justify="right" if numeric else "left", no_wrap=name != "CWD")
    for row in rows:
        cells: list[str | Text] = list(_cells(row))
        cells[5] = Text(row.status, style=STATUS_STYLES.get(row.status, ""))
        table.add_row(*cells)
    return table


@dataclass
class Totals:
    """The summary line of `top`."""

    workers: int
    cpu_percent: float
    rss_bytes: int

    def describe(self) -> str:
        """`3 workers, CPU 12.5%, RSS 80.1M`."""
        noun = "worker" if self.workers == 1 else "workers"
        return (
            f"{self.workers} {noun}, CPU {self.cpu_percent:.1f}%, RSS {human_bytes(self.rss_bytes)}"
        )


def totals(rows: Iterable[WorkerRow]) -> Totals:
    """Live workers and what they use together."""
    live = [r for r in rows if r.cpu_percent is not None or r.rss_bytes is not None]
    return Totals(
        workers=len(live),
        cpu_percent=round(sum(r.cpu_percent or 0.0 for r in live), 1),
        rss_bytes=sum(r.rss_bytes or 0 for r in live),
    )
