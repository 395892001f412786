"""What the reaper of a worker records when the process is gone."""

from __future__ import annotations

import logging
from pathlib import Path

from bareagent.orchestrator.registry import Registry
from bareagent.orchestrator.results import ResultStore

log = logging.getLogger(__name__)

RESULT_DIRS = {"job": "jobs", "subagent": "subagents"}


def describe_exit(exit_code: int | None) -> str:
    """`exited with code N` / `exited (exit code unknown)`."""
    if exit_code is None:
        return "exited (exit code unknown)"
    return f"exited with code {exit_code}"


def record_exit(state_root: str | Path, kind: str, worker_id: str, exit_code: int | None) -> None:
    """Finish the registry record; fail a result the worker never wrote.

    Runs in whichever process reaps the worker (the spawner helper, or the owner), so a
    crash is recorded even when the owner is gone.
    """
    root = Path(state_root)
    record = Registry(root).finish(worker_id, exit_code)
    sub = RESULT_DIRS.get(kind)
    if sub is None:
        return
    killed = record is not None and record.kill_requested
    if kind == "subagent":
        reason = (
            "killed before answering."
            if killed
            else f"{describe_exit(exit_code)} before answering."
        )
    else:
        reason = f"job worker {describe_exit(exit_code)} before reporting a result"
    store = ResultStore(root / sub)
    if store.finalize(worker_id, "killed" if killed else "failed", error=reason) is not None:
        log.warning("%s %s: %s", kind, worker_id, reason)
