"""ProtocolFSM in one process: states, timeouts, respond rules, nothing swallowed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bareagent.mailbox.bus import MessageBus
from bareagent.mailbox.protocol import Protocol, ProtocolFSM, RequestStatus, decode


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[MessageBus]:
    b = MessageBus(tmp_path, known_agents=["alice", "bob"])
    yield b
    b.close()


def test_request_respond_and_states(bus: MessageBus) -> None:
    main, alice = ProtocolFSM(bus, "main"), ProtocolFSM(bus, "alice")
    req = main.request("alice", Protocol.PLAN_APPROVAL, {"plan": "do it"})
    assert req.msg_type == "request" and decode(req) == (Protocol.PLAN_APPROVAL, {"plan": "do it"})
    assert [s.request.id for s in main.pending()] == [req.id]
    incoming = bus.receive("alice")
    assert incoming == [req]
    reply = alice.respond(req.id, {"approve": True})  # by id: looked up in alice's mailbox
    assert reply.to_agent == "main" and reply.in_reply_to == req.id
    assert reply.msg_type == "response"
    assert decode(reply) == (Protocol.PLAN_APPROVAL, {"approve": True})
    assert main.wait_response(req.id, 5) == reply
    state = main.state(req.id)
    assert state is not None and state.status is RequestStatus.ANSWERED
    assert main.pending() == []


def test_timeout_then_late_answer(bus: MessageBus) -> None:
    main, alice = ProtocolFSM(bus, "main"), ProtocolFSM(bus, "alice")
    req = main.request("alice", Protocol.SHUTDOWN, None)
    t0 = time.monotonic()
    assert main.wait_response(req.id, 0.2) is None
    assert 0.19 <= time.monotonic() - t0 < 2
    assert main.state(req.id).status is RequestStatus.TIMED_OUT  # type: ignore[union-attr]
    late = alice.respond(req, "ok")
    assert main.wait_response(req.id, 1) == late
    assert main.state(req.id).status is RequestStatus.ANSWERED  # type: ignore[union-attr]


def test_wait_response_is_woken_not_polled(bus: MessageBus) -> None:
    main, alice = ProtocolFSM(bus, "main"), ProtocolFSM(bus, "alice")
    req = main.request("alice", Protocol.PLAN_APPROVAL, "plan")
    timer = threading.Timer(0.1, alice.respond, (req, {"approve": False}))
    timer.start()
    t0 = time.monotonic()
    reply = main.wait_response(req.id, 10)
    assert reply is not None and time.monotonic() - t0 < 1.5
    timer.join()


def test_wait_response_does_not_swallow_other_mail(bus: MessageBus) -> None:
    main, alice = ProtocolFSM(bus, "main"), ProtocolFSM(bus, "alice")
    req1 = main.request("alice", Protocol.PLAN_APPROVAL, "one")
    req2 = main.request("alice", Protocol.PLAN_APPROVAL, "two")
    chatter = bus.send("bob", "main", "hello main")
    r2 = alice.respond(req2, "second first")
    r1 = alice.respond(req1, "then first")
    assert main.wait_response(req1.id, 5) == r1
    assert main.state(req2.id).response == r2  # type: ignore[union-attr]
    assert bus.receive("main") == [chatter, r2, r1]  # cursor untouched, all still there


def test_wait_response_for_id_from_elsewhere(bus: MessageBus) -> None:
    req = ProtocolFSM(bus, "main").request("alice", Protocol.SHUTDOWN, None)
    reply = ProtocolFSM(bus, "alice").respond(req, "done")
    fresh = ProtocolFSM(bus, "main")  # e.g. after a restart: searches from the cursor
    assert fresh.wait_response(req.id, 1) == reply


def test_respond_rules(bus: MessageBus) -> None:
    main, alice = ProtocolFSM(bus, "main"), ProtocolFSM(bus, "alice")
    req = main.request("alice", Protocol.PLAN_APPROVAL, "x")
    with pytest.raises(ValueError, match="not to bob"):
        ProtocolFSM(bus, "bob").respond(req, "hijack")
    with pytest.raises(ValueError, match="not in bob's mailbox"):
        ProtocolFSM(bus, "bob").respond(req.id, "hijack")
    plain = bus.send("main", "alice", "plain question")
    answer = alice.respond(plain, "plain answer")
    assert answer.content == "plain answer" and decode(answer) == (None, "plain answer")
    with pytest.raises(ValueError, match="must be text"):
        alice.respond(plain, {"not": "text"})
    with pytest.raises(ValueError, match="Unknown agent"):
        main.request("carol", Protocol.SHUTDOWN, None)
    with pytest.raises(ValueError):
        ProtocolFSM(bus, "bad name")


def test_protocol_broadcast(bus: MessageBus) -> None:
    sent = ProtocolFSM(bus, "main").broadcast(Protocol.SHUTDOWN, "all stop", ["alice", "bob"])
    assert [m.msg_type for m in sent] == ["broadcast", "broadcast"]
    for name in ("alice", "bob"):
        (msg,) = bus.receive(name)
        assert decode(msg) == (Protocol.SHUTDOWN, "all stop")
