"""Live worker registry: one JSON record per worker under `<state_root>/workers/`."""

from __future__ import annotations

import builtins
import json
import logging
import secrets
import string
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil
from filelock import FileLock

from bareagent.orchestrator.state import write_json_atomic

log = logging.getLogger(__name__)

KINDS = ("teammate", "job", "subagent")
STATUSES = ("starting", "running", "idle", "exited", "failed", "killed", "lost")
LIVE_STATUSES = frozenset({"starting", "running", "idle"})
_ID_ALPHABET = string.ascii_lowercase + string.digits
_JOB_ID_ALPHABET = string.ascii_letters + string.digits
_KIND_PREFIX = {"teammate": "mate", "job": "job", "subagent": "sub"}
# psutil derives create_time from clock ticks (10 ms on Linux); equal processes agree exactly.
_CREATE_TIME_TOLERANCE = 0.01


def random_suffix(length: int = 8, alphabet: str = _ID_ALPHABET) -> str:
    """Random characters for ids."""
    return "".join(secrets.choice(alphabet) for _ in range(length))


def new_worker_id(kind: str) -> str:
    """`<prefix>-<8 random>`, e.g. `sub-ab12cd34`."""
    return f"{_KIND_PREFIX.get(kind, kind)}-{random_suffix()}"


def new_job_id() -> str:
    """8 random alphanumerics, as `background_run` promises."""
    return random_suffix(8, _JOB_ID_ALPHABET)


@dataclass
class WorkerRecord:
    """What the registry knows about one worker process."""

    id: str
    kind: str
    name: str
    pid: int | None
    create_time: float | None
    parent: str
    owner_pid: int
    cwd: str
    status: str
    started_at: float
    ended_at: float | None = None
    exit_code: int | None = None
    log_path: str = ""
    detached: bool = False
    kill_requested: bool = False
    owner_create_time: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON object: the fixed fields plus the kind-specific extras."""
        data = asdict(self)
        extra = data.pop("extra")
        return {**extra, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerRecord:
        """Inverse of `to_dict`; unknown keys become extras. KeyError/TypeError if broken."""
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        record = cls(**values, extra=extra)
        if record.status not in STATUSES or not isinstance(record.id, str):
            raise ValueError(f"bad status {record.status!r}")
        return record

    @property
    def is_live_status(self) -> bool:
        """The record claims the process is still there."""
        return self.status in LIVE_STATUSES


def process_matches(pid: int | None, create_time: float | None) -> bool:
    """True when `pid` runs, is not a zombie, and (if given) started at `create_time`."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if (
            create_time is not None
            and abs(proc.create_time() - create_time) > _CREATE_TIME_TOLERANCE
        ):
            return False
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return False


class Registry:
    """Reads and writes worker records; writes are atomic, updates hold a file lock."""

    def __init__(self, state_root: str | Path) -> None:
        self.directory = Path(state_root) / "workers"
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = FileLock(str(self.directory / ".lock"))

    def path(self, worker_id: str) -> Path:
        """Record file of one worker."""
        return self.directory / f"{worker_id}.json"

    def write(self, record: WorkerRecord) -> None:
        """Create or replace a record."""
        with self._lock:
            write_json_atomic(self.path(record.id), record.to_dict())

    def read(self, worker_id: str) -> WorkerRecord | None:
        """One record as stored (no liveness check); None when missing or corrupt."""
        return self._load(self.path(worker_id))

    def get(self, worker_id: str) -> WorkerRecord | None:
        """One record with `lost` computed."""
        record = self.read(worker_id)
        return self._with_liveness(record) if record is not None else None

    def update(self, worker_id: str, **changes: Any) -> WorkerRecord | None:
        """Read-modify-write under the lock; None when the record does not exist."""
        with self._lock:
            record = self.read(worker_id)
            if record is None:
                return None
            for key, value in changes.items():
                if hasattr(record, key) and key != "extra":
                    setattr(record, key, value)
                else:
                    record.extra[key] = value
            write_json_atomic(self.path(worker_id), record.to_dict())
            return record

    def mark_running(self, worker_id: str, pid: int, create_time: float | None) -> None:
        """Fill in the pid; `starting` becomes `running` unless the exit was recorded first."""
        with self._lock:
            record = self.read(worker_id)
            if record is None:
                return
            record.pid, record.create_time = pid, create_time
            if record.status == "starting":
                record.status = "running"
            write_json_atomic(self.path(worker_id), record.to_dict())

    def finish(self, worker_id: str, exit_code: int | None) -> WorkerRecord | None:
        """Record a reaped worker: exited (0), killed (asked or by signal), else failed."""
        with self._lock:
            record = self.read(worker_id)
            if record is None:
                return None
            if record.kill_requested:
                record.status = "killed"
            elif exit_code == 0:
                record.status = "exited"
            else:
                record.status = "failed"
            record.exit_code = exit_code
            record.ended_at = record.ended_at or time.time()
            write_json_atomic(self.path(worker_id), record.to_dict())
            return record

    def list(self, include_finished: bool = False) -> list[WorkerRecord]:
        """Records sorted by start time; live-status records whose process is gone read `lost`.

        Without `include_finished` the live and the lost ones are listed.
        """
        records: builtins.list[WorkerRecord] = []
        for path in sorted(self.directory.glob("*.json")):
            record = self._load(path)
            if record is None:
                continue
            record = self._with_liveness(record)
            if include_finished or record.is_live_status or record.status == "lost":
                records.append(record)
        records.sort(key=lambda r: (r.started_at, r.id))
        return records

    def find_pid(self, pid: int) -> WorkerRecord | None:
        """The live record whose process is `pid`, if any."""
        for record in self.list():
            if record.pid == pid and record.is_live_status:
                return record
        return None

    @staticmethod
    def _with_liveness(record: WorkerRecord) -> WorkerRecord:
        if record.status == "starting" and record.pid is None:
            # Not forked yet: the owner fills the pid in, unless it died first.
            if not process_matches(record.owner_pid, record.owner_create_time):
                record.status = "lost"
            return record
        if record.is_live_status and not process_matches(record.pid, record.create_time):
            record.status = "lost"
        return record

    @staticmethod
    def _load(path: Path) -> WorkerRecord | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return WorkerRecord.from_dict(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("skipping corrupt worker record %s: %s", path, exc)
            return None
