"""Background job worker: runs one command with the bash tool's semantics.

Deliberately light: no LLM SDK, no provider, no agent loop is imported here.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bareagent.orchestrator.results import ResultStore

if TYPE_CHECKING:
    from bareagent.orchestrator.spec import SpawnSpec
    from bareagent.sandbox.policy import SandboxPolicy
    from bareagent.worker.common import WorkerContext

log = logging.getLogger(__name__)


def jobs_store(state_root: str | Path) -> ResultStore:
    """The job result store of a state root."""
    return ResultStore(Path(state_root) / "jobs")


def _stream_kwargs(run_shell: Any) -> dict[str, Any]:
    """Stream output into this worker's log while the command runs, if the runner can."""
    params = inspect.signature(run_shell).parameters

    def write(chunk: str | bytes) -> None:
        text = chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else chunk
        sys.stdout.write(text)
        sys.stdout.flush()

    if "on_output" in params:
        return {"on_output": write}
    return {}


def job_policy(spec: SpawnSpec) -> SandboxPolicy:
    """The sandbox policy in the spec, else the secure default for the spec's workspace."""
    from bareagent.sandbox.policy import SandboxPolicy

    data = spec.payload.get("sandbox")
    if data is not None:
        return SandboxPolicy.from_dict(data)
    return SandboxPolicy().for_workspace(spec.workspace, state_root=spec.state_root)


def main(spec: SpawnSpec, ctx: WorkerContext) -> int:
    """Run the command, then write the durable result record."""
    store = jobs_store(spec.state_root)
    job_id = spec.worker_id
    command = str(spec.payload["command"])
    timeout = float(spec.payload["timeout"])
    # started_at here too: a quick job can be final before the manager records it.
    if store.start(job_id, pid=os.getpid(), started_at=time.time()) is None:
        log.info("job %s was cancelled before it started", job_id)
        return 0

    def owner_lost() -> None:
        store.finalize(job_id, "killed", error="owner process exited; the job was stopped")

    ctx.on_owner_lost.append(owner_lost)
    log.info("job %s: running %r (timeout %gs)", job_id, command, timeout)
    print(f"$ {command}", flush=True)
    from bareagent.sandbox.policy import SandboxUnavailable
    from bareagent.sandbox.runner import format_shell_result, run_shell

    kwargs = _stream_kwargs(run_shell)
    policy = job_policy(spec)
    try:
        result = run_shell(
            command, cwd=Path(spec.workspace), timeout=timeout, policy=policy, **kwargs
        )
    except SandboxUnavailable as exc:
        log.warning("job %s refused: %s", job_id, exc)
        store.finalize(job_id, "failed", result=f"Error: {exc}", error=str(exc))
        return 0
    except Exception as exc:
        log.exception("job %s could not run", job_id)
        store.finalize(job_id, "failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    if not kwargs:
        print(result.output, flush=True)
    text = format_shell_result(result, timeout)
    status = "done" if result.exit_code == 0 and not result.timed_out else "failed"
    store.finalize(
        job_id,
        status,
        result=text,
        exit_code=result.exit_code,
        timed_out=bool(result.timed_out),
        duration=round(float(result.duration), 3),
    )
    log.info("job %s %s (exit code %s)", job_id, status, result.exit_code)
    return 0
