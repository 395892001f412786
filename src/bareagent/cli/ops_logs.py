"""`bareagent logs ID [-f]`: print (and follow) a worker's log, which holds a job's output."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import BinaryIO

from bareagent.cli.ops_jobs import effective_status
from bareagent.cli.ops_target import Target, read_record, registry_of, resolve

FOLLOW_POLL_SECONDS = 0.2
_CHUNK = 64 * 1024


def still_running(target: Target) -> bool:
    """The worker is live in the registry, or its job is queued/running (and not lost)."""
    registry = registry_of(target.root)
    if registry is not None:
        worker = registry.get(target.id)
        if worker is not None:
            return worker.is_live_status
    job = read_record(target.root / "jobs" / f"{target.id}.json")
    if job is None:
        return False
    status, _lost, _error = effective_status(job, registry)
    return status in ("queued", "running")


def _copy_from(path: Path, offset: int, out: BinaryIO) -> int:
    """Write what the file holds past `offset`; returns the new offset."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            if fh.tell() < offset:  # truncated or replaced: start over
                offset = 0
            fh.seek(offset)
            while chunk := fh.read(_CHUNK):
                out.write(chunk)
                offset += len(chunk)
    except FileNotFoundError:
        return offset
    out.flush()
    return offset


def _record_text(target: Target) -> str | None:
    """What a job record says when there is no log file (queued, or cancelled early)."""
    job = target.job
    if job is None:
        return None
    text = job.get("result") or job.get("error")
    return str(text) if text else None


def show_logs(workspace: Path, ident: str, *, follow: bool, out: BinaryIO | None = None) -> int:
    """Print the log; with `follow`, keep printing until the worker is no longer live."""
    out = out if out is not None else sys.stdout.buffer
    target = resolve(workspace, ident)
    path = target.log_path
    if not path.exists() and not follow:
        text = _record_text(target)
        if text is None:
            print(f"bareagent: no log yet for {target.describe()}", file=sys.stderr)
        else:
            out.write(text.encode("utf-8") + (b"" if text.endswith("\n") else b"\n"))
            out.flush()
        return 0
    offset = _copy_from(path, 0, out)
    if not follow:
        return 0
    try:
        while still_running(target):
            time.sleep(FOLLOW_POLL_SECONDS)
            offset = _copy_from(path, offset, out)
    except KeyboardInterrupt:
        return 130
    # The last lines may land between the final read and the status change.
    _copy_from(path, offset, out)
    return 0
