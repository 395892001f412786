"""Rows for `bareagent jobs`: durable job records, their effective status and output tail.

A job record that still says `running` while its worker process is gone (nobody was left
to record the exit) is shown as `failed` with `lost: true`; a `queued` record whose owner
is gone is shown `killed` with `lost: true`. The records themselves are not rewritten by a
read-only command; the owner settles them the same way when it restarts.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from bareagent.cli.ops_view import STATUS_STYLES, human_age, plain_table
from bareagent.orchestrator.registry import Registry, process_matches
from bareagent.orchestrator.results import Record, ResultStore
from bareagent.orchestrator.state import state_root

TAIL_LINES = 5
_TAIL_BYTES = 64 * 1024
_COMMAND_WIDTH = 60
# A log record line as written by bareagent.orchestrator.logsetup (LOG_FORMAT).
_LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[\S+ pid=\d+\] [A-Z]+ \S+: ")
_RESULT_HEADER = re.compile(r"^(Command failed with exit code -?\d+|Error: command timed out.*)$")
JOB_STATUS_STYLES = {**STATUS_STYLES, "queued": "yellow", "done": "green"}


@dataclass
class JobRow:
    """One line of `jobs`."""

    id: str
    command: str
    status: str
    exit_code: int | None
    created_at: float | None
    started_at: float | None
    ended_at: float | None
    duration_seconds: float | None
    output_tail: list[str]
    error: str | None
    owner: str | None
    lost: bool
    log_path: str

    def to_json(self) -> dict[str, Any]:
        """The `jobs --json` object (id, command, status, exit_code, started_at, ended_at
        are a public contract)."""
        return asdict(self)


def job_store(workspace: Path) -> ResultStore | None:
    """The workspace's job store, or None when no job ever ran there."""
    directory = state_root(workspace) / "jobs"
    return ResultStore(directory) if directory.is_dir() else None


def effective_status(record: Record, registry: Registry | None) -> tuple[str, bool, str | None]:
    """(status, lost, error): the stored status unless the process behind it is gone."""
    status = str(record.get("status"))
    error = record.get("error")
    if status == "queued":
        if not process_matches(record.get("owner_pid"), record.get("owner_create_time")):
            return "killed", True, "owner exited before it started"
    elif status == "running":
        worker = registry.get(str(record["id"])) if registry is not None else None
        if worker is None or not worker.is_live_status:
            return "failed", True, "job worker lost (its exit was not recorded)"
    return status, False, error if isinstance(error, str) else None


def read_tail(path: Path, command: str, lines: int = TAIL_LINES) -> list[str] | None:
    """The last `lines` lines of a job's output from its log; None when there is no log.

    The worker's log also holds its own log records and the `$ command` echo; both are
    left out so only what the command printed remains.
    """
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL_BYTES))
            data = fh.read()
    except OSError:
        return None
    text = data.decode("utf-8", "replace")
    if size <= _TAIL_BYTES:
        echo = f"$ {command}\n"
        at = text.find(echo)
        if at >= 0:
            text = text[at + len(echo) :]
    else:
        text = text.split("\n", 1)[-1]  # the first line is probably cut
    kept = [line for line in text.splitlines() if not _LOG_RECORD.match(line)]
    while kept and not kept[-1].strip():
        kept.pop()
    return kept[-lines:] if lines > 0 else []


def _tail_from_record(record: Record, lines: int) -> list[str]:
    text = record.get("result")
    if not isinstance(text, str):
        return []
    out = text.splitlines()
    if out and _RESULT_HEADER.match(out[0]):
        out = out[1:]
    while out and not out[-1].strip():
        out.pop()
    return out[-lines:] if lines > 0 else []


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def job_row(
    record: Record, root: Path, registry: Registry | None, tail_lines: int, now: float
) -> JobRow:
    """One job's row (reads the tail of its log)."""
    job_id = str(record["id"])
    command = str(record.get("command", ""))
    status, lost, error = effective_status(record, registry)
    started, ended = _num(record.get("started_at")), _num(record.get("ended_at"))
    duration = None
    if started is not None:
        end = ended if ended is not None else (now if status == "running" else None)
        duration = round(max(0.0, end - started), 3) if end is not None else None
    log_path = root / "logs" / f"{job_id}.log"
    tail = read_tail(log_path, command, tail_lines)
    if tail is None:
        tail = _tail_from_record(record, tail_lines)
    exit_code = record.get("exit_code")
    return JobRow(
        id=job_id,
        command=command,
        status=status,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        created_at=_num(record.get("created_at")),
        started_at=started,
        ended_at=ended,
        duration_seconds=duration,
        output_tail=tail,
        error=error,
        owner=record.get("owner") if isinstance(record.get("owner"), str) else None,
        lost=lost,
        log_path=str(log_path) if log_path.exists() else "",
    )


def collect_jobs(workspace: Path, tail_lines: int = TAIL_LINES) -> list[JobRow]:
    """Every job of the workspace, oldest first."""
    store = job_store(workspace)
    if store is None:
        return []
    root = store.directory.parent
    registry = Registry(root) if (root / "workers").is_dir() else None
    now = time.time()
    return [job_row(r, root, registry, tail_lines, now) for r in store.list()]


def human_duration(seconds: float | None) -> str:
    """`0.4s`, `12.0s`, `3m05s`; `-` for none."""
    if seconds is None:
        return "-"
    return f"{seconds:.1f}s" if seconds < 60 else human_age(seconds)


def _short(command: str) -> str:
    one = " ".join(command.split())
    return one if len(one) <= _COMMAND_WIDTH else one[: _COMMAND_WIDTH - 1] + "…"


def _status_text(row: JobRow) -> str:
    return f"{row.status} (lost)" if row.lost else row.status


def _cells(row: JobRow) -> list[str]:
    return [
        row.id,
        _status_text(row),
        "-" if row.exit_code is None else str(row.exit_code),
        human_duration(row.duration_seconds),
        _short(row.command),
    ]


JOB_COLUMNS = ("ID", "STATUS", "EXIT", "DURATION", "COMMAND")


def jobs_plain(rows: Sequence[JobRow]) -> str:
    """`jobs` for pipes and files: the table, each job followed by its indented output tail."""
    table = plain_table(JOB_COLUMNS, [_cells(r) for r in rows]).split("\n")
    out = [table[0]]
    for line, row in zip(table[1:], rows, strict=True):
        out.append(line)
        extra = row.output_tail or ([f"({row.error})"] if row.error else [])
        out.extend(f"    {text}" for text in extra)
    return "\n".join(out)


def jobs_table(rows: Sequence[JobRow]) -> Table:
    """`jobs` as a rich table with the output tail in the last column."""
    table = Table(header_style="bold", show_lines=True)
    for name in JOB_COLUMNS:
        table.add_column(name, justify="right" if name in ("EXIT", "DURATION") else "left")
    table.add_column("OUTPUT (tail)", style="dim")
    for row in rows:
        cells: list[str | Text] = list(_cells(row))
        cells[1] = Text(_status_text(row), style=JOB_STATUS_STYLES.get(row.status, ""))
        cells[4] = Text(row.command)
        tail = "\n".join(row.output_tail) or (f"({row.error})" if row.error else "")
        table.add_row(*cells, Text(tail))
    return table


def jobs_json(rows: Sequence[JobRow]) -> str:
    """`jobs --json`."""
    return json.dumps([r.to_json() for r in rows], indent=2, ensure_ascii=False)
