"""MessageBus in one process: send/receive/ack, cursors, bad input, corruption, compaction."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bareagent.mailbox.bus import MessageBus
from bareagent.mailbox.cursor import cursor_path
from bareagent.mailbox.message import Message


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[MessageBus]:
    b = MessageBus(tmp_path / "mailbox" / "s1", known_agents=["alice", "bob"])
    yield b
    b.close()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_send_appends_one_json_line_per_message(bus: MessageBus) -> None:
    m1 = bus.send("main", "alice", "one")
    m2 = bus.send("bob", "alice", "two\nlines", "request")
    raw = lines(bus.path("alice"))
    assert json.loads(raw[0])["bareagent_mailbox"] == 1
    assert [json.loads(x)["id"] for x in raw[1:]] == [m1.id, m2.id]
    assert bus.receive("alice") == [m1, m2]
    assert bus.receive("bob") == []


def test_receive_does_not_move_cursor_until_ack(bus: MessageBus) -> None:
    m1, m2, m3 = (bus.send("main", "alice", f"m{i}") for i in range(3))
    assert bus.receive("alice") == [m1, m2, m3]
    assert bus.receive("alice") == [m1, m2, m3]
    bus.ack("alice", m2.id)
    assert bus.receive("alice") == [m3]
    assert bus.cursor("alice").last_id == m2.id
    bus.ack("alice", m1.id)  # older ack: no-op, cursors never go back
    assert bus.receive("alice") == [m3]
    # A fresh bus (a restarted reader) continues from the persisted cursor.
    again = MessageBus(bus.mailbox_dir)
    assert again.receive("alice") == [m3]


def test_receive_advance_and_limit(bus: MessageBus) -> None:
    msgs = [bus.send("main", "alice", f"m{i}") for i in range(5)]
    assert bus.receive("alice", advance=True, limit=2) == msgs[:2]
    assert bus.receive("alice", advance=True) == msgs[2:]
    assert bus.receive("alice") == []
    m6 = bus.send("bob", "alice", "late")
    assert bus.receive("alice") == [m6]
    with pytest.raises(ValueError):
        bus.receive("alice", limit=0)


def test_since_id_excludes_the_given_message(bus: MessageBus) -> None:
    msgs = [bus.send("main", "alice", f"m{i}") for i in range(4)]
    assert bus.receive("alice", since_id=msgs[1].id) == msgs[2:]
    assert bus.receive("alice", since_id=msgs[3].id) == []
    fresh = MessageBus(bus.mailbox_dir)  # no in-memory index: found by scanning
    assert fresh.receive("alice", since_id=msgs[0].id) == msgs[1:]
    # An id that is not in the mailbox selects messages created after it.
    older = Message.create("main", "bob", "elsewhere")
    newer = bus.send("main", "alice", "after")
    assert fresh.receive("alice", since_id=older.id) == [newer]
    with pytest.raises(ValueError, match="since_id"):
        bus.receive("alice", since_id="garbage")


def test_ack_of_unknown_message_is_an_error(bus: MessageBus) -> None:
    bus.send("main", "alice", "x")
    with pytest.raises(ValueError, match="not in alice's mailbox"):
        bus.ack("alice", Message.create("main", "alice", "never sent").id)
    with pytest.raises(ValueError):
        bus.ack("alice", "not-an-id")


def test_unknown_recipient_is_an_error_and_writes_nothing(bus: MessageBus) -> None:
    with pytest.raises(ValueError, match="Unknown agent 'carol'"):
        bus.send("main", "carol", "hello?")
    assert not bus.path("carol").exists()
    with pytest.raises(ValueError, match="Unknown agent"):
        bus.broadcast("main", "all", ["alice", "carol"])
    assert not bus.path("alice").exists()  # nothing sent when one recipient is bad
    bus.send("alice", "main", "main needs no registration")


def test_known_agents_callable_is_consulted_each_time(tmp_path: Path) -> None:
    registered: set[str] = set()
    b = MessageBus(tmp_path, known_agents=lambda: registered)
    with pytest.raises(ValueError):
        b.send("main", "dave", "x")
    registered.add("dave")
    assert b.send("main", "dave", "x").to_agent == "dave"


@pytest.mark.parametrize("name", ["a b", "../x", "", "a/b", "x.jsonl"])
def test_invalid_names_rejected_everywhere(bus: MessageBus, name: str) -> None:
    with pytest.raises(ValueError, match="Invalid"):
        bus.send("main", name, "x")
    with pytest.raises(ValueError, match="Invalid"):
        bus.send(name, "alice", "x")
    with pytest.raises(ValueError, match="Invalid"):
        bus.receive(name)
    with pytest.raises(ValueError, match="Invalid"):
        bus.wait(name, 0.01)


def test_send_rejects_bad_type_and_content(bus: MessageBus) -> None:
    with pytest.raises(ValueError, match="msg_type"):
        bus.send("main", "alice", "x", "gossip")
    with pytest.raises(ValueError, match="text"):
        bus.send("main", "alice", 42)  # type: ignore[arg-type]


def test_broadcast_sends_one_message_per_recipient(bus: MessageBus) -> None:
    sent = bus.broadcast("main", "standup", ["alice", "bob", "alice"])
    assert [m.to_agent for m in sent] == ["alice", "bob"]
    assert {m.msg_type for m in sent} == {"broadcast"}
    assert bus.receive("alice") == [sent[0]]
    assert bus.receive("bob") == [sent[1]]


def test_corrupt_lines_are_skipped_with_a_warning(
    bus: MessageBus, caplog: pytest.LogCaptureFixture
) -> None:
    m1 = bus.send("main", "alice", "before")
    with open(bus.path("alice"), "ab") as f:
        f.write(b"this is not json\n")
        f.write(b'{"id": "0193", "truncated": \n')
        f.write(b'{"valid_json": "but not a message"}\n')
        f.write(b"\xff\xfe binary\n")
    m2 = bus.send("bob", "alice", "after")
    with caplog.at_level(logging.WARNING, logger="bareagent.mailbox"):
        assert bus.receive("alice") == [m1, m2]
        assert bus.receive("alice") == [m1, m2]
    warnings = [r for r in caplog.records if "malformed line" in r.getMessage()]
    assert len(warnings) == 4  # each bad line warned about once per bus
    bus.ack("alice", m2.id)
    assert bus.receive("alice") == []


def test_torn_last_line_is_not_consumed_and_does_not_eat_the_next(bus: MessageBus) -> None:
    m1 = bus.send("main", "alice", "first")
    full = Message.create("main", "alice", "in flight").to_dict()
    torn = json.dumps(full).encode()[:40]
    with open(bus.path("alice"), "ab") as f:
        f.write(torn)  # a writer died halfway through its line
    assert bus.receive("alice", advance=True) == [m1]
    before = bus.cursor("alice").offset
    assert bus.receive("alice") == []
    assert bus.cursor("alice").offset == before  # the partial line was not consumed
    m2 = bus.send("bob", "alice", "second")  # repairs the tail with a newline first
    assert bus.receive("alice") == [m2]


def test_wait_returns_true_for_unread_and_false_on_timeout(bus: MessageBus) -> None:
    t0 = time.monotonic()
    assert bus.wait("alice", 0.2) is False
    assert time.monotonic() - t0 >= 0.19
    m = bus.send("main", "alice", "x")
    assert bus.wait("alice", 0.2) is True
    bus.ack("alice", m.id)
    timer = threading.Timer(0.1, bus.send, ("bob", "alice", "wake"))
    timer.start()
    t0 = time.monotonic()
    assert bus.wait("alice", 5) is True
    assert time.monotonic() - t0 < 2
    timer.join()


def test_compaction_keeps_unread_messages(bus: MessageBus) -> None:
    msgs = [bus.send("main", "alice", f"m{i}" * 50) for i in range(10)]
    bus.ack("alice", msgs[5].id)
    size_before = bus.path("alice").stat().st_size
    dropped = bus.compact("alice")
    assert dropped > 0
    assert bus.path("alice").stat().st_size == pytest.approx(size_before - dropped, abs=20)
    assert bus.receive("alice") == msgs[6:]
    ids_in_file = [json.loads(x)["id"] for x in lines(bus.path("alice"))[1:]]
    assert ids_in_file == [m.id for m in msgs[6:]]
    assert bus.compact("alice") == 0  # nothing more before the cursor
    # The cursor (a logical offset) is still valid after the rewrite.
    m_new = bus.send("bob", "alice", "new")
    bus.ack("alice", msgs[8].id)
    assert MessageBus(bus.mailbox_dir).receive("alice") == [msgs[9], m_new]


def test_compaction_without_any_cursor_keeps_everything(bus: MessageBus) -> None:
    msgs = [bus.send("main", "alice", "x") for _ in range(3)]
    assert bus.compact("alice") == 0
    assert bus.compact("nobody") == 0
    assert bus.receive("alice") == msgs


def test_auto_compaction_bounds_the_file(tmp_path: Path) -> None:
    b = MessageBus(tmp_path, compact_threshold=4096)
    seen = []
    for i in range(300):
        b.send("main", "alice", f"message {i} " + "x" * 60)
        for m in b.receive("alice"):
            seen.append(m.content)
            b.ack("alice", m.id)
    assert len(seen) == 300 and seen[-1].startswith("message 299 ")
    assert b.path("alice").stat().st_size < 4096 + 500
    assert b.cursor("alice").offset > 300 * 60


def test_recreated_mailbox_is_read_from_its_start(
    bus: MessageBus, caplog: pytest.LogCaptureFixture
) -> None:
    m = bus.send("main", "alice", "old")
    bus.ack("alice", m.id)
    os.unlink(bus.path("alice"))
    n = bus.send("main", "alice", "new file")
    with caplog.at_level(logging.WARNING, logger="bareagent.mailbox"):
        assert bus.receive("alice") == [n]
    assert any("recreated" in r.getMessage() for r in caplog.records)
    bus.ack("alice", n.id)
    assert bus.receive("alice") == []


def test_corrupt_cursor_file_rereads_rather_than_loses(
    bus: MessageBus, caplog: pytest.LogCaptureFixture
) -> None:
    m = bus.send("main", "alice", "x")
    bus.ack("alice", m.id)
    cursor_path(bus.mailbox_dir, "alice").write_text("{oops")
    with caplog.at_level(logging.WARNING, logger="bareagent.mailbox"):
        assert bus.receive("alice") == [m]
    assert any("Unreadable cursor" in r.getMessage() for r in caplog.records)


def test_threads_sending_concurrently_lose_nothing(bus: MessageBus) -> None:
    def writer(k: int) -> None:
        for i in range(200):
            bus.send(f"w{k}", "alice", f"{k}:{i}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [m.content for m in bus.receive("alice")]
    assert sorted(got) == sorted(f"{k}:{i}" for k in range(4) for i in range(200))


def test_mailbox_lock_interoperates_with_filelock(bus: MessageBus) -> None:
    from filelock import FileLock

    held = FileLock(f"{bus.path('alice')}.lock")
    held.acquire()
    done = threading.Event()

    def send() -> None:
        bus.send("main", "alice", "waited for the lock")
        done.set()

    t = threading.Thread(target=send)
    t.start()
    try:
        assert not done.wait(0.3)  # blocked while another holder has the lock
    finally:
        held.release()
    assert done.wait(5)
    t.join()
    assert [m.content for m in bus.receive("alice")] == ["waited for the lock"]
