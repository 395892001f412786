"""TaskManager under several OS processes: no lost updates, exactly one claim winner."""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from collections import Counter
from collections.abc import Callable, Iterator
from multiprocessing.context import SpawnContext, SpawnProcess
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import psutil
import pytest

from bareagent.planning.tasks import TaskClaimConflict, TaskManager

# spawn, not fork: each worker starts from a clean interpreter like a real separate agent
# process, and the test behaves the same on every platform.
CTX: SpawnContext = mp.get_context("spawn")
BARRIER_TIMEOUT = 20.0


# -- worker bodies (module level so spawn can import them) ----------------------------------


def _creator(path: str, worker: int, count: int, barrier: Barrier, out: Any) -> None:
    tm = TaskManager(path)
    barrier.wait(BARRIER_TIMEOUT)
    ids = [tm.create(f"w{worker}-{n}", description=f"from {worker}")["id"] for n in range(count)]
    out.put((worker, ids))


def _claimer(path: str, worker: int, task_ids: list[str], barrier: Barrier, out: Any) -> None:
    tm = TaskManager(path)
    for tid in task_ids:
        barrier.wait(BARRIER_TIMEOUT)  # every worker races for this task at the same moment
        try:
            tm.update(tid, status="in_progress", expected_status="pending")
            result = "won"
        except TaskClaimConflict:
            result = "lost"
        except Exception as exc:
            result = f"error: {type(exc).__name__}: {exc}"
        out.put((worker, tid, result))


def _updater(path: str, worker: int, task_ids: list[str], barrier: Barrier, out: Any) -> None:
    tm = TaskManager(path)
    barrier.wait(BARRIER_TIMEOUT)
    for tid in task_ids:
        tm.update(tid, status="done", title=f"done by {worker}")
    out.put((worker, task_ids))


# -- harness ---------------------------------------------------------------------------------


@pytest.fixture
def spawned() -> Iterator[list[SpawnProcess]]:
    """Processes started by a test; killed if still alive, then proven gone."""
    procs: list[SpawnProcess] = []
    yield procs
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join(5)
    for p in procs:
        assert p.pid is not None
        assert not psutil.pid_exists(p.pid), f"worker {p.pid} still exists"
    ours = {c.pid for c in psutil.Process().children(recursive=True)}
    assert not ours & {p.pid for p in procs}


def _run(
    spawned: list[SpawnProcess],
    target: Callable[..., None],
    per_worker: list[tuple[Any, ...]],
    expected_results: int,
) -> list[Any]:
    """Start one process per argument tuple behind a shared barrier; collect results."""
    barrier = CTX.Barrier(len(per_worker))
    out = CTX.Queue()
    for n, args in enumerate(per_worker):
        proc = CTX.Process(target=target, args=(*args[:1], n, *args[1:], barrier, out))
        proc.start()
        spawned.append(proc)
    results: list[Any] = []
    deadline = time.monotonic() + 40
    while len(results) < expected_results:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {len(results)} of {expected_results} results arrived"
        try:
            results.append(out.get(timeout=min(remaining, 1.0)))
        except queue.Empty:
            dead = [p for p in spawned if p.exitcode not in (None, 0)]
            assert not dead, f"worker died: exit codes {[p.exitcode for p in dead]}"
    for proc in spawned:
        proc.join(10)
        assert proc.exitcode == 0, f"worker {proc.pid} exit code {proc.exitcode}"
    out.close()
    out.join_thread()
    return results


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.timeout(45)
def test_concurrent_creates_lose_nothing(tmp_path: Path, spawned: list[SpawnProcess]) -> None:
    store = str(tmp_path / ".tasks.json")
    workers, per = 4, 25
    results = _run(spawned, _creator, [(store, per)] * workers, workers)

    returned = [tid for _, ids in results for tid in ids]
    assert len(returned) == len(set(returned)) == workers * per

    tasks = TaskManager(store).list()
    assert len(tasks) == workers * per
    ids = [t["id"] for t in tasks]
    assert sorted(ids) == sorted(returned)
    assert set(ids) == {f"task-{n}" for n in range(1, workers * per + 1)}
    titles = Counter(t["title"] for t in tasks)
    assert titles == Counter(f"w{w}-{n}" for w in range(workers) for n in range(per))
    # Each worker's own tasks got increasing ids (its creates were serialised in order).
    for worker, worker_ids in results:
        numbers = [int(i.split("-")[1]) for i in worker_ids]
        assert numbers == sorted(numbers), f"worker {worker}"


@pytest.mark.timeout(45)
def test_claim_race_has_exactly_one_winner(tmp_path: Path, spawned: list[SpawnProcess]) -> None:
    store = str(tmp_path / ".tasks.json")
    tm = TaskManager(store)
    trials, workers = 30, 5
    task_ids = [tm.create(f"job {n}")["id"] for n in range(trials)]

    results = _run(spawned, _claimer, [(store, task_ids)] * workers, trials * workers)

    errors = [r for r in results if r[2] not in ("won", "lost")]
    assert errors == []
    winners = Counter(tid for _, tid, result in results if result == "won")
    losers = Counter(tid for _, tid, result in results if result == "lost")
    for tid in task_ids:
        assert winners[tid] == 1, f"{tid}: {winners[tid]} winners"
        assert losers[tid] == workers - 1
    assert all(t["status"] == "in_progress" for t in tm.list())
    # Wins should be spread over workers, showing they really raced (not ran in turn).
    assert len({w for w, _, result in results if result == "won"}) >= 2


@pytest.mark.timeout(45)
def test_concurrent_updates_to_different_tasks_all_land(
    tmp_path: Path, spawned: list[SpawnProcess]
) -> None:
    store = str(tmp_path / ".tasks.json")
    tm = TaskManager(store)
    workers, per = 4, 10
    all_ids = [tm.create(f"t{n}")["id"] for n in range(workers * per)]
    shares = [all_ids[w::workers] for w in range(workers)]

    results = _run(spawned, _updater, [(store, share) for share in shares], workers)

    assert sorted(w for w, _ in results) == list(range(workers))
    by_id = {t["id"]: t for t in tm.list()}
    assert len(by_id) == workers * per
    for worker, share in enumerate(shares):
        for tid in share:
            assert by_id[tid]["status"] == "done", tid
            assert by_id[tid]["title"] == f"done by {worker}", tid
