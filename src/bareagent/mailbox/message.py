"""The `Message` record, its id scheme and the agent-name rule.

Ids are `<12 hex digits: ms since epoch>-<4 hex: per-process sequence><12 hex: random>`:
fixed width, so sorting ids as strings sorts them by creation time (to the millisecond
across processes, strictly within one process). Order inside a mailbox is still the
file order; ids only need to be unique and roughly time ordered.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal, cast

AGENT_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")
MESSAGE_ID_RE = re.compile(r"^[0-9a-f]{12}-[0-9a-f]{16}$")
MSG_TYPES: tuple[str, ...] = ("request", "response", "broadcast")
MAIN_AGENT = "main"

MsgType = Literal["request", "response", "broadcast"]

_id_lock = threading.Lock()
_last_ms = 0
_seq = 0


def _reset_id_lock() -> None:
    global _id_lock
    _id_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_id_lock)


def validate_agent_name(name: object, what: str = "agent name") -> str:
    """Return `name` if it matches `^[A-Za-z0-9_-]+$`, else raise ValueError."""
    if not isinstance(name, str) or not AGENT_NAME_RE.fullmatch(name):
        raise ValueError(f"Invalid {what} {name!r}: use only letters, digits, '_' and '-'")
    return name


def validate_message_id(msg_id: object, what: str = "message id") -> str:
    """Return `msg_id` if it is a well-formed message id, else raise ValueError."""
    if not isinstance(msg_id, str) or not MESSAGE_ID_RE.fullmatch(msg_id):
        raise ValueError(f"Invalid {what} {msg_id!r}")
    return msg_id


def new_message_id() -> str:
    """Return a new unique, time-ordered message id."""
    global _last_ms, _seq
    with _id_lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms, _seq = now_ms, 0
        else:
            # Same millisecond (or the clock stepped back): keep ids increasing.
            _seq += 1
            if _seq > 0xFFFF:
                _last_ms, _seq = _last_ms + 1, 0
        return f"{_last_ms:012x}-{_seq:04x}{secrets.token_hex(6)}"


def id_timestamp(msg_id: str) -> float:
    """Return the creation time (seconds since the epoch) encoded in a message id."""
    return int(validate_message_id(msg_id)[:12], 16) / 1000.0


@dataclass(frozen=True)
class Message:
    """One mailbox message; `content` is text (protocol messages carry JSON text)."""

    id: str
    from_agent: str
    to_agent: str
    content: str
    msg_type: MsgType = "request"
    timestamp: float = field(default_factory=time.time)
    in_reply_to: str | None = None

    def __post_init__(self) -> None:
        validate_message_id(self.id)
        validate_agent_name(self.from_agent, "sender name")
        validate_agent_name(self.to_agent, "recipient name")
        if not isinstance(self.content, str):
            raise ValueError(f"Message content must be text, got {type(self.content).__name__}")
        if self.msg_type not in MSG_TYPES:
            raise ValueError(
                f"Invalid msg_type {self.msg_type!r}; expected one of: {', '.join(MSG_TYPES)}"
            )
        ts = self.timestamp
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
            raise ValueError(f"Invalid message timestamp {ts!r}")
        if self.in_reply_to is not None:
            validate_message_id(self.in_reply_to, "in_reply_to id")

    @classmethod
    def create(
        cls,
        from_agent: str,
        to_agent: str,
        content: str,
        msg_type: MsgType = "request",
        in_reply_to: str | None = None,
    ) -> Message:
        """Build a new message with a fresh id and the current time."""
        msg_id = new_message_id()
        return cls(msg_id, from_agent, to_agent, content, msg_type, time.time(), in_reply_to)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready dict stored as one mailbox line."""
        return {
            "id": self.id,
            "from_agent": self.from_agent,
            "to_agent": self.to_agent,
            "content": self.content,
            "msg_type": self.msg_type,
            "timestamp": self.timestamp,
            "in_reply_to": self.in_reply_to,
        }

    @classmethod
    def from_dict(cls, data: object) -> Message:
        """Validate a decoded mailbox line and build a Message (ValueError if invalid)."""
        if not isinstance(data, dict):
            raise ValueError(f"Message must be a JSON object, got {type(data).__name__}")
        missing = [
            k
            for k in ("id", "from_agent", "to_agent", "content", "msg_type", "timestamp")
            if k not in data
        ]
        if missing:
            raise ValueError(f"Message is missing field(s): {', '.join(missing)}")
        return cls(
            id=data["id"],
            from_agent=data["from_agent"],
            to_agent=data["to_agent"],
            content=data["content"],
            msg_type=cast(MsgType, data["msg_type"]),
            timestamp=data["timestamp"],
            in_reply_to=data.get("in_reply_to"),
        )
