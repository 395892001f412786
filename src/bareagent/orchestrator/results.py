"""Durable result records of jobs and subagents, and their exactly-once delivery.

One JSON file per piece of work (`<state_root>/jobs/<id>.json`,
`<state_root>/subagents/<id>.json`). Every read-modify-write holds the directory's
file lock, so marking a result delivered and handing it out is one atomic step even with
several processes (a restarted owner, the CLI, the workers) touching the same store.
"""

from __future__ import annotations

import builtins
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

from bareagent.orchestrator.state import write_json_atomic

log = logging.getLogger(__name__)

FINAL_STATUSES = frozenset({"done", "failed", "killed"})
PENDING_STATUSES = frozenset({"queued", "running"})

Record = dict[str, Any]


class ResultStore:
    """Result records of one kind of work under one directory."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.lock = FileLock(str(self.directory / ".lock"))

    def path(self, record_id: str) -> Path:
        """File of one record."""
        return self.directory / f"{record_id}.json"

    def read(self, record_id: str) -> Record | None:
        """One record, or None when missing or corrupt."""
        return self._load(self.path(record_id))

    def write(self, record: Record) -> None:
        """Create or replace a record (caller holds `lock` when it must be atomic)."""
        write_json_atomic(self.path(str(record["id"])), record, durable=True)

    def create(self, record: Record, conflict: Callable[[Record], str | None]) -> None:
        """Write a new record unless `conflict(existing)` returns a reason (ValueError)."""
        with self.lock:
            existing = self.read(str(record["id"]))
            if existing is not None:
                reason = conflict(existing)
                if reason:
                    raise ValueError(reason)
            self.write(record)

    def update(self, record_id: str, **changes: Any) -> Record | None:
        """Change fields of a record; None when it does not exist."""
        with self.lock:
            record = self.read(record_id)
            if record is None:
                return None
            record.update(changes)
            self.write(record)
            return record

    def start(self, record_id: str, **changes: Any) -> Record | None:
        """Mark a record running unless it is already final (a cancel won the race)."""
        with self.lock:
            record = self.read(record_id)
            if record is None or record.get("status") in FINAL_STATUSES:
                return None
            record.update(changes, status="running")
            self.write(record)
            return record

    def finalize(
        self,
        record_id: str,
        status: str,
        *,
        result: str | None = None,
        error: str | None = None,
        exit_code: int | None = None,
        **extra: Any,
    ) -> Record | None:
        """Set a final status once; a record that is already final is left alone (None)."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"not a final status: {status!r}")
        with self.lock:
            record = self.read(record_id)
            if record is None or record.get("status") in FINAL_STATUSES:
                return None
            record.update(extra)
            record.update(
                status=status,
                result=result,
                error=error,
                exit_code=exit_code,
                ended_at=time.time(),
                delivered=False,
            )
            self.write(record)
            return record

    def list(self) -> list[Record]:
        """Every readable record, oldest first."""
        records = [r for p in sorted(self.directory.glob("*.json")) if (r := self._load(p))]
        records.sort(key=lambda r: (r.get("created_at") or 0, str(r.get("id"))))
        return records

    def drain(
        self, owner: str, where: Callable[[Record], bool] | None = None
    ) -> builtins.list[Record]:
        """Final, undelivered records of `owner`, marked delivered in the same locked step."""
        out: builtins.list[Record] = []
        with self.lock:
            for record in self.list():
                if (
                    record.get("owner") != owner
                    or record.get("status") not in FINAL_STATUSES
                    or record.get("delivered")
                    or (where is not None and not where(record))
                ):
                    continue
                record["delivered"] = True
                record["delivered_at"] = time.time()
                self.write(record)
                out.append(record)
        return out

    @staticmethod
    def _load(path: Path) -> Record | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("skipping corrupt result record %s: %s", path, exc)
            return None
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            log.warning("skipping corrupt result record %s: not a record object", path)
            return None
        return data
