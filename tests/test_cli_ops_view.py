"""Row building for `ps`/`top`: process-tree attribution, CPU sampling, formatting."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bareagent.cli.ops_jobs import read_tail
from bareagent.cli.ops_view import (
    Sampler,
    WorkerRow,
    _attribute,
    human_age,
    human_bytes,
    plain_table,
    sort_by_cpu,
    totals,
)
from bareagent.orchestrator.registry import WorkerRecord

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def tree() -> Iterator[tuple[psutil.Process, list[psutil.Process]]]:
    """bash → (a busy loop, a sleep): a small process tree that is reaped afterwards."""
    proc = subprocess.Popen(
        ["bash", "-c", "(while :; do :; done) & sleep 20 & wait"], start_new_session=True
    )
    root = psutil.Process(proc.pid)
    deadline = time.monotonic() + 5
    while len(root.children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    children = root.children()
    assert len(children) == 2
    try:
        yield root, children
    finally:
        for child in children:
            child.kill()
        proc.kill()
        proc.wait(5)
        psutil.wait_procs(children, timeout=5)
        assert not root.is_running() or root.status() == psutil.STATUS_ZOMBIE


def _record(worker_id: str, pid: int, create_time: float) -> WorkerRecord:
    return WorkerRecord(
        id=worker_id,
        kind="job",
        name=worker_id,
        pid=pid,
        create_time=create_time,
        parent="main",
        owner_pid=0,
        cwd="/w",
        status="running",
        started_at=time.time() - 65,
    )


def test_processes_count_once_for_their_nearest_worker(
    tree: tuple[psutil.Process, list[psutil.Process]],
) -> None:
    root, (first, second) = tree
    owned = _attribute({root.pid: "outer"})
    assert {pid for pid, (wid, _p) in owned.items() if wid == "outer"} == {
        root.pid,
        first.pid,
        second.pid,
    }
    # A child that is a worker itself is its own row, not part of its parent's.
    owned = _attribute({root.pid: "outer", first.pid: "inner"})
    assert owned[first.pid][0] == "inner" and owned[second.pid][0] == "outer"
    assert owned[root.pid][0] == "outer"


def test_sampler_measures_cpu_of_the_whole_tree(
    tree: tuple[psutil.Process, list[psutil.Process]],
) -> None:
    root, _children = tree
    record = _record("busy", root.pid, root.create_time())
    sampler = Sampler()
    (row,) = sampler.rows([record], prime=0.3)
    # The busy loop is a grandchild of nothing but the root: it is counted here.
    assert row.cpu_percent is not None and row.cpu_percent > 50
    assert row.rss_bytes is not None and row.rss_bytes > root.memory_info().rss
    assert 64 < row.age_seconds < 120
    time.sleep(0.3)
    (again,) = sampler.rows([record])  # measured since the previous call, no priming
    assert again.cpu_percent is not None and again.cpu_percent > 50
    finished = _record("old", root.pid, root.create_time())
    finished.status = "exited"
    (row,) = Sampler().rows([finished])
    assert row.cpu_percent is None and row.rss_bytes is None


def _row(worker_id: str, cpu: float | None, rss: int | None, started: float) -> WorkerRow:
    return WorkerRow(
        worker_id,
        "job",
        worker_id,
        1,
        "main",
        "running",
        "/w",
        started,
        None,
        None,
        cpu,
        rss,
        1.0,
        "",
    )


def test_sorting_and_totals() -> None:
    rows = [_row("a", 1.0, 10, 3), _row("b", None, None, 1), _row("c", 50.0, 20, 2)]
    assert [r.id for r in sort_by_cpu(rows)] == ["c", "a", "b"]
    total = totals(rows)
    assert (total.workers, total.cpu_percent, total.rss_bytes) == (2, 51.0, 30)
    assert total.describe() == "2 workers, CPU 51.0%, RSS 30B"


def test_formatting() -> None:
    assert [human_bytes(v) for v in (None, 0, 1023, 2048, 5 * 1024**2 + 1, 3 * 1024**3)] == [
        "-",
        "0B",
        "1023B",
        "2K",
        "5.0M",
        "3.0G",
    ]
    assert [human_age(s) for s in (0, 59.9, 65, 3600 * 2 + 7 * 60, 86400 * 4 + 3 * 3600)] == [
        "0s",
        "59s",
        "1m05s",
        "2h07m",
        "4d03h",
    ]
    assert plain_table(("A", "BB", "C"), [("xxx", "y", "last col"), ("1", "22", "z")]) == (
        "A    BB  C\nxxx  y   last col\n1    22  z"
    )


def test_read_tail_drops_log_records_and_the_command_echo(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "2026-01-01 10:00:00,000 [j1 pid=5] INFO bareagent.worker.job: job j1: running\n"
        "$ echo a; echo b\n"
        "a\n"
        "b\n"
        "2026-01-01 10:00:01,000 [j1 pid=5] INFO bareagent.worker.job: job j1 done\n"
    )
    assert read_tail(log, "echo a; echo b") == ["a", "b"]
    assert read_tail(log, "echo a; echo b", lines=1) == ["b"]
    assert read_tail(log, "echo a; echo b", lines=0) == []
    assert read_tail(log.with_name("missing.log"), "x") is None
