"""Benchmark worker spawning: spawn-to-ready latency and idle worker memory (USS).

Runs, in one process and in this order:
  1. fork   — the spawner helper forked from a light owner (only bareagent imported);
  2. fork+sdk — the same after the owner imported the anthropic and openai SDKs
     (a helper started late, e.g. after the provider was built);
  3. spawn  — a fresh interpreter per worker (the Windows/macOS path).

For each: N job workers are spawned one after another (each running `sleep`, i.e. an
idle worker); spawn-to-ready is the time `Supervisor.spawn` takes (registry record,
process creation, worker setup, ready message). Then the USS of every idle worker
process (psutil `memory_full_info().uss`) is measured. Targets: fork median < 100 ms,
idle worker < 30 MB USS.

Usage: python scripts/bench_spawn.py [--count 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

MB = 1024 * 1024


def _spec(workspace: Path, root: Path, job_id: str, session: str) -> Any:
    from bareagent.orchestrator.results import ResultStore
    from bareagent.orchestrator.spec import build_job_spec

    # A job worker only runs a job whose record says it may (not cancelled meanwhile).
    ResultStore(root / "jobs").create(
        {"id": job_id, "status": "queued", "owner": "bench", "created_at": time.time()},
        lambda existing: None,
    )
    return build_job_spec(
        "sleep 600",
        timeout=900,
        job_id=job_id,
        workspace=workspace,
        state_root=root,
        session_id=session,
        owner_create_time=psutil.Process().create_time(),
    )


def run_case(label: str, method: str, count: int, base: Path) -> dict[str, Any]:
    """Spawn `count` idle workers with one start method; return latency and memory numbers."""
    from bareagent.orchestrator.supervisor import Supervisor

    workspace = base / f"ws-{label}"
    workspace.mkdir()
    supervisor = Supervisor(workspace, start_method=method)
    supervisor.start()
    latencies: list[float] = []
    pids: list[int] = []
    try:
        for i in range(count):
            spec = _spec(workspace, supervisor.state_root, f"bench{i:03d}", supervisor.session_id)
            started = time.perf_counter()
            handle = supervisor.spawn(spec)
            latencies.append((time.perf_counter() - started) * 1000)
            assert handle.pid is not None
            pids.append(handle.pid)
        time.sleep(1.0)  # let the workers settle into their idle wait
        uss = [psutil.Process(p).memory_full_info().uss / MB for p in pids]
        rss = [psutil.Process(p).memory_info().rss / MB for p in pids]
        helper_pid = getattr(supervisor.backend, "helper_pid", None)
        helper_uss = psutil.Process(helper_pid).memory_full_info().uss / MB if helper_pid else None
    finally:
        supervisor.shutdown(timeout=10)
    return {
        "case": label,
        "method": method,
        "count": count,
        "ready_ms_median": round(statistics.median(latencies), 1),
        "ready_ms_p90": round(sorted(latencies)[int(0.9 * (count - 1))], 1),
        "ready_ms_min": round(min(latencies), 1),
        "ready_ms_max": round(max(latencies), 1),
        "uss_mb_median": round(statistics.median(uss), 1),
        "uss_mb_max": round(max(uss), 1),
        "rss_mb_median": round(statistics.median(rss), 1),
        "helper_uss_mb": round(helper_uss, 1) if helper_uss is not None else None,
    }


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / (1024**3), 1),
        "cpu": platform.processor() or platform.machine(),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20, help="workers per case (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.count < 2:
        parser.error("--count must be at least 2")
    with tempfile.TemporaryDirectory(prefix="bareagent-bench-") as tmp:
        base = Path(tmp)
        os.environ["BAREAGENT_HOME"] = str(base / "home")
        results = []
        if sys.platform.startswith("linux"):
            results.append(run_case("fork", "fork", args.count, base))
            import anthropic  # noqa: F401
            import openai  # noqa: F401

            results.append(run_case("fork+sdk", "fork", args.count, base))
        results.append(run_case("spawn", "spawn", args.count, base))
    report = {
        "machine": machine(),
        "command": " ".join([sys.executable, *sys.argv]),
        "results": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"machine: {report['machine']}")
    print(
        "| case | ready median ms | p90 | min | max | idle USS median MB | max "
        "| RSS median MB | helper USS MB |"
    )
    print("|---" * 9 + "|")
    for r in results:
        helper = r["helper_uss_mb"] if r["helper_uss_mb"] is not None else "-"
        print(
            f"| {r['case']} | {r['ready_ms_median']} | {r['ready_ms_p90']} | {r['ready_ms_min']} | "
            f"{r['ready_ms_max']} | {r['uss_mb_median']} | {r['uss_mb_max']} | "
            f"{r['rss_mb_median']} | {helper} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
