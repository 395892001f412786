"""`bareagent kill ID`: stop a worker and its whole process tree, from any terminal.

Teammates are first asked to stop with a SHUTDOWN request (they answer and exit 0); one
still running after the grace period is killed as a tree through the team code (which also
hands its claimed task back). Jobs and subagents are killed as a tree at once (SIGTERM,
then SIGKILL after the grace). `--signal KILL` skips both the request and the grace.
The registry record ends `killed`, and so does a job's or subagent's result record.
A worker that already ended is reported and left alone with exit status 0 (it is not
running, which is what was asked for).
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

import psutil

from bareagent.cli.common import CLIError
from bareagent.cli.ops_jobs import effective_status
from bareagent.cli.ops_target import Target, registry_of, resolve
from bareagent.orchestrator.reaping import RESULT_DIRS, record_exit
from bareagent.orchestrator.registry import Registry, WorkerRecord, process_matches
from bareagent.orchestrator.results import ResultStore

log = logging.getLogger(__name__)

SIGNALS = ("TERM", "KILL")
DEFAULT_GRACE = 3.0
# How long the worker's reaper (the spawner helper) gets to record the exit itself.
REAPER_WAIT_SECONDS = 2.0
_POLL = 0.05
KILL_REASON = "killed by `bareagent kill`"


def parse_signal(value: str) -> str:
    """`TERM`/`KILL` from `term`, `SIGKILL`, `9`, ...; CLIError otherwise."""
    name = value.strip().upper().removeprefix("SIG")
    name = {"15": "TERM", "9": "KILL"}.get(name, name)
    if name not in SIGNALS:
        raise CLIError(f"unsupported signal {value!r}: use TERM or KILL")
    return name


def request_shutdown(workspace: Path, name: str) -> bool:
    """Send teammate `name` a SHUTDOWN request (team code); False when it cannot be sent."""
    from bareagent.orchestrator.team import request_shutdown as team_request_shutdown

    try:
        return team_request_shutdown(workspace, name)
    except Exception as exc:  # e.g. unregistered while running: the tree kill still stops it
        log.warning("SHUTDOWN request to %s failed: %s", name, exc)
        return False


def _kill_teammate(workspace: Path, doomed: list[WorkerRecord], signal: str, grace: float) -> None:
    """Tree kill through the team code, which also returns a claimed task to `pending`."""
    from bareagent.orchestrator.team import Team

    worker = doomed[0]
    if signal == "KILL" and worker.pid is not None:
        kill_tree_now(worker.pid)
    elif worker.pid is not None and process_matches(worker.pid, worker.create_time):
        from bareagent.sandbox.process_tree import kill_process_tree

        kill_process_tree(worker.pid, grace=grace)
    with Team(workspace) as team:
        team.kill(doomed)


def _gone(record: WorkerRecord) -> bool:
    return not process_matches(record.pid, record.create_time)


def _wait_gone(records: list[WorkerRecord], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not all(_gone(r) for r in records):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)
    return True


def _tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants, deepest first."""
    try:
        root = psutil.Process(pid)
        children = root.children(recursive=True)
    except psutil.Error:
        return []
    return [*reversed(children), root]


def kill_tree_now(pid: int, timeout: float = 5.0) -> None:
    """SIGKILL a process and every descendant, then wait until they are gone."""
    procs = _tree(pid)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    deadline = time.monotonic() + timeout
    for proc in procs:
        while time.monotonic() < deadline:
            try:
                if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.Error:
                break
            time.sleep(_POLL)


def _descendants(registry: Registry, worker_id: str) -> list[WorkerRecord]:
    """Live workers started (directly or not) by `worker_id`: they die with its tree."""
    live = registry.list()
    found: list[WorkerRecord] = []
    parents = {worker_id}
    while True:
        more = [r for r in live if r.parent in parents and r not in found]
        if not more:
            return found
        found.extend(more)
        parents = {r.id for r in more}


def _settle(root: Path, registry: Registry, records: list[WorkerRecord]) -> None:
    """Record the end of killed workers whose reaper did not (it may be gone too)."""
    deadline = time.monotonic() + REAPER_WAIT_SECONDS
    pending = list(records)
    while pending:
        pending = [
            r
            for r in pending
            if (stored := registry.read(r.id)) is not None and stored.is_live_status
        ]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(_POLL)
    for record in pending:
        if _gone(record):
            record_exit(root, record.kind, record.id, None)


def _finalize_results(root: Path, records: list[WorkerRecord]) -> None:
    """Final status `killed` first, so the worker's own late result write is a no-op."""
    for record in records:
        sub = RESULT_DIRS.get(record.kind)
        if sub is not None and (root / sub).is_dir():
            ResultStore(root / sub).finalize(record.id, "killed", error=KILL_REASON)


def _kill_queued(target: Target) -> str:
    store = ResultStore(target.root / "jobs")
    if store.finalize(target.id, "killed", error="cancelled before it started") is None:
        return f"job {target.id} already ended; nothing to kill"
    return f"job {target.id} was queued; marked killed"


def kill(workspace: Path, ident: str, *, signal: str = "TERM", grace: float = DEFAULT_GRACE) -> str:
    """Stop the worker behind `ident`; returns the line to show. CLIError for unknown ids."""
    target = resolve(workspace, ident)
    registry = registry_of(target.root)
    worker = target.worker
    if worker is None or registry is None:
        job = target.job or {}
        status, lost, _error = effective_status(job, registry)
        if status == "queued":
            return _kill_queued(target)
        state = f"{status}, lost" if lost else status
        return f"job {target.id} is not running ({state}); nothing to kill"
    if worker.status == "lost":
        return f"{target.describe()} is lost (its process is gone); nothing to kill"
    if not worker.is_live_status:
        return f"{target.describe()} is not running ({worker.status}); nothing to kill"
    if worker.pid is None:
        raise CLIError(f"{target.describe()} is still starting (no pid yet); try again")
    doomed = [worker, *_descendants(registry, worker.id)]
    for record in doomed:
        registry.update(record.id, kill_requested=True)
    if worker.kind == "teammate":
        if (
            signal == "TERM"
            and request_shutdown(workspace, worker.name)
            and _wait_gone([worker], grace)
        ):
            _settle(target.root, registry, doomed)
            return f"{target.describe()} shut down on request"
        _finalize_results(target.root, doomed)
        _kill_teammate(workspace, doomed, signal, grace=1.0)
    elif process_matches(worker.pid, worker.create_time):
        _finalize_results(target.root, doomed)
        if signal == "KILL":
            kill_tree_now(worker.pid)
        else:
            from bareagent.sandbox.process_tree import kill_process_tree

            kill_process_tree(worker.pid, grace=grace)
    _wait_gone(doomed, 2.0)
    _settle(target.root, registry, doomed)
    after = registry.get(worker.id)
    if after is not None and after.is_live_status:
        raise CLIError(f"{target.describe()} (pid {worker.pid}) did not stop")
    return f"killed {target.describe()} (pid {worker.pid})"
