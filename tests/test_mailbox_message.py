"""Message record, id scheme and name validation."""

from __future__ import annotations

import json
import time

import pytest

from bareagent.mailbox.message import (
    Message,
    id_timestamp,
    new_message_id,
    validate_agent_name,
    validate_message_id,
)
from bareagent.mailbox.protocol import Protocol, decode, encode


def test_round_trip_through_json() -> None:
    msg = Message.create("main", "alice", "hello\nworld ✓", "request")
    data = json.loads(json.dumps(msg.to_dict()))
    assert Message.from_dict(data) == msg
    reply = Message.create("alice", "main", "ok", "response", in_reply_to=msg.id)
    assert Message.from_dict(reply.to_dict()).in_reply_to == msg.id


@pytest.mark.parametrize(
    "patch",
    [
        {"msg_type": "gossip"},
        {"from_agent": "bad name"},
        {"to_agent": "../etc"},
        {"content": 5},
        {"timestamp": "yesterday"},
        {"timestamp": True},
        {"timestamp": float("nan")},
        {"id": "not-an-id"},
        {"in_reply_to": "zzz"},
    ],
)
def test_from_dict_rejects_invalid_fields(patch: dict[str, object]) -> None:
    data = Message.create("main", "alice", "x").to_dict() | patch
    with pytest.raises(ValueError):
        Message.from_dict(data)


def test_from_dict_rejects_missing_fields_and_non_objects() -> None:
    data = Message.create("main", "alice", "x").to_dict()
    del data["content"]
    with pytest.raises(ValueError, match="missing field"):
        Message.from_dict(data)
    with pytest.raises(ValueError):
        Message.from_dict(["not", "a", "dict"])


@pytest.mark.parametrize("name", ["alice", "Bob_2", "a-b", "main", "X"])
def test_valid_agent_names(name: str) -> None:
    assert validate_agent_name(name) == name


@pytest.mark.parametrize("name", ["", "a b", "a/b", "..", "a.b", "ä", "a\n", None, 3])
def test_invalid_agent_names(name: object) -> None:
    with pytest.raises(ValueError, match="Invalid agent name"):
        validate_agent_name(name)


def test_ids_are_unique_and_time_ordered() -> None:
    ids = [new_message_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    for msg_id in ids[:10]:
        validate_message_id(msg_id)
    assert abs(id_timestamp(ids[0]) - time.time()) < 60


def test_protocol_encode_decode() -> None:
    text = encode(Protocol.PLAN_APPROVAL, {"plan": "step 1", "n": 2})
    assert json.loads(text) == {"protocol": "plan_approval", "content": {"plan": "step 1", "n": 2}}
    assert decode(text) == (Protocol.PLAN_APPROVAL, {"plan": "step 1", "n": 2})
    assert decode("plain text") == (None, "plain text")
    assert decode('{"protocol": "nope", "content": 1}') == (
        None,
        '{"protocol": "nope", "content": 1}',
    )
    assert decode('{"protocol": "shutdown", "content": null, "x": 1}')[0] is None
    with pytest.raises(ValueError):
        encode(Protocol.SHUTDOWN, object())
