#!/usr/bin/env python3
"""Benchmark the mailbox against a 500 ms polling baseline.

(a) send-to-wake latency across processes: N idle reader processes, each blocked in
    `bus.wait()`, get messages sent to random readers; latency = receive - send time
    (CLOCK_MONOTONIC is shared by all processes on one machine).
(b) throughput: W writer processes send K messages each, to random mailboxes and to one
    shared mailbox; every message is then read back and checked (zero lost/duplicated).
(c) CPU of N idle readers over S seconds (psutil cpu_times of the reader processes).

The baseline reader calls `receive()` and sleeps 0.5 s when there is nothing.

    python scripts/bench_mailbox.py                  # full run (~2.5 min)
    python scripts/bench_mailbox.py --quick          # short run (~20 s)
    python scripts/bench_mailbox.py --json out.json  # also write the results as JSON
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import queue
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bareagent.mailbox.bus import MessageBus

CTX: Any = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
STOP = "__stop__"


# --- child processes ---------------------------------------------------------------------
def reader_proc(
    mailbox: str, name: str, mode: str, observer: str, ready: str, out: Queue[Any]
) -> None:
    """Idle teammate-like reader: `wait` (waker) or sleep 0.5 s between checks (poll)."""
    bus = MessageBus(mailbox, observer=observer)
    if mode == "waker":
        bus.waker  # noqa: B018 - start watching before announcing readiness
    Path(ready).touch()
    while True:
        if mode == "waker":
            bus.wait(name, None)
        msgs = bus.receive(name)
        if not msgs:
            time.sleep(0.5)
            continue
        now = time.monotonic()
        for msg in msgs:
            bus.ack(name, msg.id)
            if msg.content == STOP:
                bus.close()
                return
            out.put(now - float(msg.content))


def writer_proc(
    mailbox: str, wid: int, count: int, targets: list[str], go_at: float, out: Queue[Any]
) -> None:
    """Send `count` messages as fast as possible, starting at wall time `go_at`."""
    bus = MessageBus(mailbox)
    rng = random.Random(wid)
    while time.time() < go_at:
        time.sleep(0.0005)
    t0 = time.monotonic()
    for i in range(count):
        bus.send(f"w{wid}", rng.choice(targets), f"{wid}:{i}")
    out.put((t0, time.monotonic()))


# --- helpers -----------------------------------------------------------------------------
def cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        t = p.cpu_times()
        total += t.user + t.system
    return total


def cpu_seconds_schedstat(pids: list[int]) -> float | None:
    """Nanosecond-precise CPU time of all threads (Linux schedstat), None elsewhere."""
    total = 0
    try:
        for pid in pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[0])
    except (OSError, ValueError):
        return None
    return total / 1e9


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def stop_all(ps: list[BaseProcess]) -> None:
    for p in ps:
        p.join(10)
    for p in ps:
        if p.is_alive():
            p.kill()
            p.join(5)


def run_readers(args: argparse.Namespace, mode: str, root: Path) -> dict[str, Any]:
    """Start idle readers; measure their idle CPU, then send-to-wake latency."""
    mailbox = root / f"lat-{mode}"
    mailbox.mkdir()
    names = [f"mate{i}" for i in range(args.readers)]
    out: Queue[Any] = CTX.Queue()
    ps = []
    for name in names:
        ready = str(mailbox / f".{name}.ready")
        ps.append(
            CTX.Process(
                target=reader_proc,
                args=(str(mailbox), name, mode, args.observer, ready, out),
                daemon=True,
            )
        )
    for p in ps:
        p.start()
    deadline = time.monotonic() + 60
    while not all((mailbox / f".{n}.ready").exists() for n in names):
        if time.monotonic() > deadline:
            raise SystemExit("readers did not start")
        time.sleep(0.02)
    time.sleep(1.0)  # let start-up work settle before measuring idle CPU
    handles = [psutil.Process(p.pid) for p in ps]
    pids = [h.pid for h in handles]
    c0, s0, w0 = cpu_seconds(handles), cpu_seconds_schedstat(pids), time.monotonic()
    time.sleep(args.idle_seconds)
    c1, s1, w1 = cpu_seconds(handles), cpu_seconds_schedstat(pids), time.monotonic()
    idle_pct = (c1 - c0) / (w1 - w0) * 100
    sched_pct = None if s0 is None or s1 is None else (s1 - s0) / (w1 - w0) * 100

    bus = MessageBus(mailbox)
    rng = random.Random(1)
    for _ in range(args.latency_messages):
        bus.send("main", rng.choice(names), repr(time.monotonic()))
        time.sleep(rng.uniform(0.01, 0.03))
    latencies = []
    try:
        for _ in range(args.latency_messages):
            latencies.append(out.get(timeout=10) * 1000)
    except queue.Empty:
        pass
    for name in names:
        bus.send("main", name, STOP)
    stop_all(ps)
    lost = args.latency_messages - len(latencies)
    return {
        "mode": mode,
        "readers": args.readers,
        "idle_seconds": round(w1 - w0, 1),
        "idle_cpu_pct_of_one_core": round(idle_pct, 3),
        "idle_cpu_pct_schedstat": None if sched_pct is None else round(sched_pct, 4),
        "latency_ms_p50": round(statistics.median(latencies), 2) if latencies else None,
        "latency_ms_p99": round(pct(latencies, 99), 2) if latencies else None,
        "latency_ms_max": round(max(latencies), 2) if latencies else None,
        "latency_samples": len(latencies),
        "latency_lost": lost,
    }


def run_throughput(args: argparse.Namespace, root: Path, shared: bool) -> dict[str, Any]:
    """W writer processes, K messages each; read everything back and verify it."""
    mailbox = root / ("tp-shared" if shared else "tp-spread")
    mailbox.mkdir()
    targets = ["sink"] if shared else [f"mate{i}" for i in range(args.readers)]
    out: Queue[Any] = CTX.Queue()
    go_at = time.time() + 1.0 + args.writers * 0.02
    ps = [
        CTX.Process(
            target=writer_proc,
            args=(str(mailbox), w, args.per_writer, targets, go_at, out),
            daemon=True,
        )
        for w in range(args.writers)
    ]
    for p in ps:
        p.start()
    spans = [out.get(timeout=300) for _ in ps]
    stop_all(ps)
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    total = args.writers * args.per_writer
    bus = MessageBus(mailbox)
    seen: Counter[str] = Counter()
    for t in targets:
        seen.update(m.content for m in bus.receive(t))
    expected = {f"{w}:{i}" for w in range(args.writers) for i in range(args.per_writer)}
    lost = len(expected - set(seen))
    dupes = sum(c - 1 for c in seen.values() if c > 1)
    return {
        "mailboxes": "1 shared" if shared else f"{len(targets)} (random)",
        "writers": args.writers,
        "messages": total,
        "seconds": round(end - start, 3),
        "msgs_per_sec": round(total / (end - start)),
        "lost": lost,
        "duplicated": dupes,
        "foreign": len(set(seen) - expected),
    }


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the results."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--readers", type=int, default=20, help="idle reader processes (20)")
    ap.add_argument("--latency-messages", type=int, default=300, help="messages for (a) (300)")
    ap.add_argument("--writers", type=int, default=20, help="writer processes for (b) (20)")
    ap.add_argument("--per-writer", type=int, default=2500, help="messages per writer (2500)")
    ap.add_argument("--idle-seconds", type=float, default=30.0, help="idle CPU window (30)")
    ap.add_argument("--observer", default="auto", choices=["auto", "native", "polling"])
    ap.add_argument("--skip-baseline", action="store_true", help="do not run the 500 ms poller")
    ap.add_argument("--quick", action="store_true", help="short run: 5 s idle, fewer messages")
    ap.add_argument("--dir", help="work in this directory (default: a temp dir)")
    ap.add_argument("--json", help="also write results to this file")
    args = ap.parse_args(argv)
    if args.quick:  # only where the value was not given explicitly
        for name, value, quick in (
            ("idle_seconds", 30.0, 5.0),
            ("latency_messages", 300, 100),
            ("per_writer", 2500, 250),
        ):
            if getattr(args, name) == value:
                setattr(args, name, quick)

    root = Path(tempfile.mkdtemp(prefix="bench-mailbox-", dir=args.dir))
    results: dict[str, Any] = {"machine": machine(), "args": vars(args)}
    try:
        results["waker"] = run_readers(args, "waker", root)
        print("waker   ", json.dumps(results["waker"]), flush=True)
        if not args.skip_baseline:
            results["poll_500ms"] = run_readers(args, "poll", root)
            print("poll500 ", json.dumps(results["poll_500ms"]), flush=True)
        results["throughput_spread"] = run_throughput(args, root, shared=False)
        print("tp      ", json.dumps(results["throughput_spread"]), flush=True)
        results["throughput_shared"] = run_throughput(args, root, shared=True)
        print("tp      ", json.dumps(results["throughput_shared"]), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results["machine"]["load_avg_end"] = machine()["load_avg"]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    ok = all(
        r.get("lost", 0) == 0 and r.get("duplicated", 0) == 0 and r.get("latency_lost", 0) == 0
        for k, r in results.items()
        if isinstance(r, dict) and k not in ("machine", "args")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
