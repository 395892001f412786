"""The mailbox across real OS processes: writers, a SIGKILLed reader, compaction, waking."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import psutil
import pytest

from bareagent.mailbox.bus import MessageBus
from bareagent.mailbox.message import MESSAGE_ID_RE
from bareagent.mailbox.protocol import Protocol, ProtocolFSM, RequestStatus, decode
from bareagent.mailbox.waker import MailboxWaker

CTX = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")


@pytest.fixture
def procs() -> Iterator[Callable[..., BaseProcess]]:
    """Start processes; afterwards kill stragglers and prove every one is gone."""
    started: list[BaseProcess] = []

    def start(target: Callable[..., Any], *args: Any) -> BaseProcess:
        p = CTX.Process(target=target, args=args, daemon=True)
        p.start()
        started.append(p)
        return p

    yield start
    for p in started:
        if p.is_alive():
            p.kill()
        p.join(5)
    for p in started:
        assert p.pid is not None
        assert not psutil.pid_exists(p.pid) or psutil.Process(p.pid).status() == "zombie"
    children = {c.pid for c in psutil.Process().children(recursive=True)}
    assert not children & {p.pid for p in started}


def join_all(ps: list[BaseProcess], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for p in ps:
        p.join(max(0.1, deadline - time.monotonic()))
        assert p.exitcode == 0, f"process {p.pid} exit code {p.exitcode}"


# --- child process bodies ---------------------------------------------------------------


def _writer(mailbox: str, name: str, to: str, count: int, go_at: float) -> None:
    bus = MessageBus(mailbox)
    while time.time() < go_at:  # start together to maximise contention
        time.sleep(0.001)
    for i in range(count):
        bus.send(name, to, f"{name}:{i}:" + "x" * (i % 97))


def _paced_writer(mailbox: str, to: str, count: int, pause_every: int) -> None:
    bus = MessageBus(mailbox)
    for i in range(count):
        bus.send("writer", to, f"msg {i}")
        if i % pause_every == 0:
            time.sleep(0.002)


def _killable_reader(mailbox: str, log_path: str, dup_path: str, total: int) -> None:
    """Process mail exactly once: the side effect is idempotent by id, then ack."""
    bus = MessageBus(mailbox, compact_threshold=8192)
    done: set[str] = set()
    if os.path.exists(log_path):
        with open(log_path) as f:
            done = {line.split(" ")[0] for line in f}
        done = {msg_id for msg_id in done if MESSAGE_ID_RE.fullmatch(msg_id)}
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    dup_fd = os.open(dup_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    while len(done) < total:
        batch = bus.receive("reader", limit=7)
        if not batch:
            bus.wait("reader", 1.0)
            continue
        for msg in batch:
            if msg.id in done:
                os.write(dup_fd, f"{msg.id}\n".encode())  # redelivered after a crash
            else:
                os.write(log_fd, f"{msg.id} {msg.content}\n".encode())  # the side effect
                done.add(msg.id)
            bus.ack("reader", msg.id)
        time.sleep(0.001)  # a little work per batch, so kills land mid-stream


def _waiter(mailbox: str, agent: str, timeout: float, out: str, observer: str) -> None:
    bus = MessageBus(mailbox, observer=observer, poll_interval=0.05)
    bus.waker  # noqa: B018 - start watching before announcing readiness
    Path(out + ".ready").touch()
    t0 = time.monotonic()
    woke = bus.wait(agent, timeout)
    Path(out).write_text(json.dumps({"woke": woke, "elapsed": time.monotonic() - t0}))
    bus.close()


def _send_later(mailbox: str, to: str, delay: float) -> None:
    time.sleep(delay)
    MessageBus(mailbox).send("sender", to, "ping")


def _teammate(mailbox: str, name: str) -> None:
    """Answer protocol requests until a SHUTDOWN request arrives."""
    bus = MessageBus(mailbox)
    fsm = ProtocolFSM(bus, name)
    while True:
        if not bus.wait(name, 10):
            return
        for msg in bus.receive(name):
            protocol, content = decode(msg)
            if protocol is Protocol.PLAN_APPROVAL:
                fsm.respond(msg, {"approve": "rm -rf" not in content, "plan": content})
            elif protocol is Protocol.SHUTDOWN:
                fsm.respond(msg.id, "bye")
                bus.ack(name, msg.id)
                return
            bus.ack(name, msg.id)


# --- tests ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_many_writer_processes_lose_and_corrupt_nothing(
    tmp_path: Path, procs: Callable[..., BaseProcess]
) -> None:
    n_writers, per_writer = 8, 500
    go_at = time.time() + 0.5
    ps = [
        procs(_writer, str(tmp_path), f"w{k}", "sink", per_writer, go_at) for k in range(n_writers)
    ]
    join_all(ps, 50)
    raw = (tmp_path / "sink.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    body = raw.split(b"\n")[1:-1]  # header first
    parsed = [json.loads(line) for line in body]  # every line is valid JSON
    assert len(parsed) == n_writers * per_writer
    expected = {f"w{k}:{i}" for k in range(n_writers) for i in range(per_writer)}
    got = Counter(":".join(p["content"].split(":")[:2]) for p in parsed)
    assert set(got) == expected and set(got.values()) == {1}
    assert len({p["id"] for p in parsed}) == len(parsed)
    # Each writer's own messages stay in its sending order.
    for k in range(n_writers):
        seq = [int(p["content"].split(":")[1]) for p in parsed if p["from_agent"] == f"w{k}"]
        assert seq == sorted(seq)
    assert len(MessageBus(tmp_path).receive("sink")) == n_writers * per_writer


@pytest.mark.timeout(60)
def test_sigkilled_reader_restarts_without_loss_or_repeat(
    tmp_path: Path, procs: Callable[..., BaseProcess]
) -> None:
    total, kills = 3000, 5
    log_path, dup_path = tmp_path / "processed.log", tmp_path / "redelivered.log"
    writer = procs(_paced_writer, str(tmp_path), "reader", total, 50)
    reader = procs(_killable_reader, str(tmp_path), str(log_path), str(dup_path), total)
    rng = random.Random(7)
    killed = 0
    last_size = 0
    while killed < kills and reader.is_alive():
        time.sleep(rng.uniform(0.02, 0.12))
        size = log_path.stat().st_size if log_path.exists() else 0
        if size == last_size:
            continue  # only kill while it is consuming
        os.kill(reader.pid, signal.SIGKILL)  # type: ignore[arg-type]
        reader.join(5)
        if reader.exitcode != -signal.SIGKILL:
            break  # it had already finished
        killed += 1
        last_size = size
        reader = procs(_killable_reader, str(tmp_path), str(log_path), str(dup_path), total)
    assert killed >= 3
    join_all([writer, reader], 45)

    processed = [line.split(" ", 1) for line in log_path.read_text().splitlines()]
    assert all(MESSAGE_ID_RE.fullmatch(msg_id) for msg_id, _ in processed)
    assert len({msg_id for msg_id, _ in processed}) == total
    assert sorted(content for _, content in processed) == sorted(f"msg {i}" for i in range(total))
    redelivered = dup_path.read_text().splitlines() if dup_path.exists() else []
    # Only the one message in flight at each kill can come back, and none was lost.
    assert len(redelivered) <= killed
    assert MessageBus(tmp_path).receive("reader") == []
    # Auto-compaction kept the mailbox bounded while the reader was being killed.
    assert (tmp_path / "reader.jsonl").stat().st_size < total * 30


def _steady_writer(mailbox: str, name: str, to: str, count: int) -> None:
    bus = MessageBus(mailbox)
    for i in range(count):
        bus.send(name, to, f"{name}:{i}:" + "y" * (i % 50))
        if i % 20 == 0:
            time.sleep(0.001)  # spread the writes over many compactions


@pytest.mark.timeout(60)
def test_compaction_with_concurrent_writers_keeps_unread(
    tmp_path: Path, procs: Callable[..., BaseProcess]
) -> None:
    n_writers, per_writer = 4, 600
    ps = [procs(_steady_writer, str(tmp_path), f"w{k}", "r", per_writer) for k in range(n_writers)]
    bus = MessageBus(tmp_path, compact_threshold=None)
    got: list[str] = []
    compactions = 0
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        writing = any(p.is_alive() for p in ps)
        batch = bus.receive("r", limit=25)
        for msg in batch[: len(batch) // 2 + 1]:  # leave some unread at each compaction
            got.append(msg.content)
            bus.ack("r", msg.id)
        if bus.compact("r"):
            compactions += 1
        if not batch and not writing:
            break
    join_all(ps, 10)
    assert compactions > 10
    prefixes = Counter(":".join(c.split(":")[:2]) for c in got)
    assert len(prefixes) == n_writers * per_writer and set(prefixes.values()) == {1}
    bus.compact("r")
    assert (tmp_path / "r.jsonl").read_text().count("\n") == 1  # only the header is left
    bus.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("observer", ["native", "polling"])
def test_waker_wakes_only_the_addressed_agent_across_processes(
    tmp_path: Path, procs: Callable[..., BaseProcess], observer: str
) -> None:
    with MailboxWaker(tmp_path, observer=observer, poll_interval=0.05) as waker:
        assert waker.kind == observer
        ev_a, ev_b = waker.event("alice"), waker.event("bob")
        seen_a = waker.sequence("alice")
        join_all([procs(_send_later, str(tmp_path), "alice", 0.05)], 10)
        assert ev_a.wait(5), "alice was not woken"
        assert waker.wait_for_change("alice", seen_a, 1)
        time.sleep(0.3)  # give a wrong wake-up every chance to show up
        assert not ev_b.is_set()
        assert waker.sequence("bob") == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("observer", ["native", "polling"])
def test_blocked_reader_processes_wake_only_for_their_mail(
    tmp_path: Path, procs: Callable[..., BaseProcess], observer: str
) -> None:
    out_a, out_b = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    mailbox = str(tmp_path / "mb")
    pa = procs(_waiter, mailbox, "alice", 1.0, out_a, observer)
    pb = procs(_waiter, mailbox, "bob", 1.0, out_b, observer)
    deadline = time.monotonic() + 10
    while not (Path(out_a + ".ready").exists() and Path(out_b + ".ready").exists()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    MessageBus(mailbox).send("main", "alice", "wake up")
    join_all([pa, pb], 10)
    a, b = json.loads(Path(out_a).read_text()), json.loads(Path(out_b).read_text())
    assert a["woke"] is True and a["elapsed"] < 0.9
    assert b["woke"] is False and b["elapsed"] >= 0.95


@pytest.mark.timeout(30)
def test_protocol_round_trip_between_processes(
    tmp_path: Path, procs: Callable[..., BaseProcess]
) -> None:
    mailbox = str(tmp_path)
    mate = procs(_teammate, mailbox, "alice")
    bus = MessageBus(mailbox, known_agents=["alice"])
    fsm = ProtocolFSM(bus, "main")
    unrelated = bus.send("bob", "main", "unrelated mail")
    good = fsm.request("alice", Protocol.PLAN_APPROVAL, "1. add tests\n2. ship")
    bad = fsm.request("alice", Protocol.PLAN_APPROVAL, "rm -rf /")
    assert fsm.state(good.id).status is RequestStatus.PENDING  # type: ignore[union-attr]
    r_bad = fsm.wait_response(bad.id, 10)
    r_good = fsm.wait_response(good.id, 10)
    assert r_good is not None and r_bad is not None
    assert r_good.in_reply_to == good.id and r_good.from_agent == "alice"
    assert decode(r_good) == (
        Protocol.PLAN_APPROVAL,
        {"approve": True, "plan": "1. add tests\n2. ship"},
    )
    assert decode(r_bad)[1]["approve"] is False
    assert fsm.state(good.id).status is RequestStatus.ANSWERED  # type: ignore[union-attr]

    stop = fsm.request("alice", Protocol.SHUTDOWN, None)
    reply = fsm.wait_response(stop.id, 10)
    assert reply is not None and decode(reply) == (Protocol.SHUTDOWN, "bye")
    join_all([mate], 10)

    # wait_response swallowed nothing: normal receive sees every message, in order.
    assert [m.id for m in bus.receive("main")] == [unrelated.id, r_good.id, r_bad.id, reply.id]
    assert bus.receive("alice") == []  # the teammate acked everything it handled
    bus.close()
