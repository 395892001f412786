"""Request/response protocols on top of the bus: PLAN_APPROVAL and SHUTDOWN.

A protocol message's content is the JSON text `{"protocol": "<name>", "content": ...}`.
`ProtocolFSM.wait_response` reads the agent's own mailbox *without* moving its cursor:
a response it sees stays in the mailbox, so the agent's normal `receive` loop still
gets it (and every other message) as usual. Nothing is buffered or swallowed.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from bareagent.mailbox.bus import MessageBus
from bareagent.mailbox.message import Message, validate_agent_name, validate_message_id


class Protocol(enum.Enum):
    """Protocols teammates understand."""

    PLAN_APPROVAL = "plan_approval"
    SHUTDOWN = "shutdown"


class RequestStatus(enum.Enum):
    """Life cycle of a request sent through `ProtocolFSM.request`."""

    PENDING = "pending"
    ANSWERED = "answered"
    TIMED_OUT = "timed_out"


@dataclass
class RequestState:
    """A tracked request and, once it arrived, its response."""

    request: Message
    protocol: Protocol | None
    status: RequestStatus = RequestStatus.PENDING
    response: Message | None = None


def encode(protocol: Protocol, content: Any) -> str:
    """Return the JSON text of a protocol message (`content` must be JSON-serialisable)."""
    if not isinstance(protocol, Protocol):
        raise ValueError(f"Unknown protocol {protocol!r}")
    try:
        return json.dumps({"protocol": protocol.value, "content": content}, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Protocol content is not JSON-serialisable: {exc}") from exc


def decode(message: Message | str) -> tuple[Protocol | None, Any]:
    """Return (protocol, content) of a protocol message, or (None, text) for plain mail."""
    text = message.content if isinstance(message, Message) else message
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None, text
    if not isinstance(data, dict) or set(data) != {"protocol", "content"}:
        return None, text
    try:
        return Protocol(data["protocol"]), data["content"]
    except ValueError:
        return None, text


class ProtocolFSM:
    """Send protocol requests/responses for `agent` and track request states."""

    def __init__(self, bus: MessageBus, agent: str) -> None:
        self.bus = bus
        self.agent = validate_agent_name(agent)
        self._states: dict[str, RequestState] = {}
        self._scan_offset: int | None = None
        self._lock = threading.Lock()

    def request(self, to: str, protocol: Protocol, content: Any) -> Message:
        """Send a protocol request to `to` and track it as pending."""
        body = encode(protocol, content)
        # The reply can only be appended after the request exists, so it lies past the
        # current end of our own mailbox; start looking there.
        start = self.bus.end_offset(self.agent)
        msg = self.bus.send(self.agent, to, body, "request")
        with self._lock:
            self._states[msg.id] = RequestState(msg, protocol)
            if self._scan_offset is None or not self._has_pending(exclude=msg.id):
                self._scan_offset = start
        return msg

    def respond(self, in_reply_to: Message | str, content: Any) -> Message:
        """Answer a request addressed to this agent, re-using its protocol."""
        if isinstance(in_reply_to, Message):
            req: Message | None = in_reply_to
        else:
            req = self.bus.find(self.agent, validate_message_id(in_reply_to))
            if req is None:
                raise ValueError(f"Message {in_reply_to} is not in {self.agent}'s mailbox")
        assert req is not None
        if req.to_agent != self.agent:
            raise ValueError(f"Message {req.id} was sent to {req.to_agent}, not to {self.agent}")
        protocol, _ = decode(req)
        if protocol is not None:
            body = encode(protocol, content)
        elif isinstance(content, str):
            body = content
        else:
            raise ValueError("A reply to plain (non-protocol) mail must be text")
        return self.bus.send(self.agent, req.from_agent, body, "response", in_reply_to=req.id)

    def broadcast(self, protocol: Protocol, content: Any, recipients: list[str]) -> list[Message]:
        """Send one protocol broadcast to each recipient (not tracked: no reply expected)."""
        return self.bus.broadcast(self.agent, encode(protocol, content), recipients)

    def state(self, msg_id: str) -> RequestState | None:
        """Return the tracked state of a request sent by this FSM."""
        with self._lock:
            return self._states.get(msg_id)

    def pending(self) -> list[RequestState]:
        """Return requests still waiting for a response."""
        with self._lock:
            return [s for s in self._states.values() if s.status is RequestStatus.PENDING]

    def observe(self, messages: list[Message]) -> None:
        """Record responses the caller received itself (e.g. via `bus.receive`)."""
        with self._lock:
            self._match(messages)

    def wait_response(self, msg_id: str, timeout: float) -> Message | None:
        """Return the response to `msg_id`, or None after `timeout` seconds (state TIMED_OUT).

        Reads without moving the cursor, so the response is also delivered by the
        normal `receive`. For an id not sent by this FSM the search starts at the
        agent's persisted cursor. A late response turns TIMED_OUT into ANSWERED.
        """
        validate_message_id(msg_id)
        with self._lock:
            state = self._states.get(msg_id)
            if state is None:
                cursor = self.bus.cursor(self.agent).offset
                placeholder = Message(msg_id, self.agent, self.agent, "", "request", time.time())
                state = self._states[msg_id] = RequestState(placeholder, None)
                if self._scan_offset is None or cursor < self._scan_offset:
                    self._scan_offset = cursor
        waker = self.bus.waker
        deadline = time.monotonic() + timeout
        while True:
            seen = waker.sequence(self.agent)
            with self._lock:
                self._scan()
                if state.response is not None:
                    state.status = RequestStatus.ANSWERED
                    return state.response
            left = deadline - time.monotonic()
            if left <= 0:
                with self._lock:
                    if state.status is RequestStatus.PENDING:
                        state.status = RequestStatus.TIMED_OUT
                return None
            waker.wait_for_change(self.agent, seen, min(left, self.bus.recheck_interval))

    # internals (called with self._lock held) --------------------------------------------
    def _has_pending(self, exclude: str) -> bool:
        return any(
            s.status is not RequestStatus.ANSWERED and mid != exclude
            for mid, s in self._states.items()
        )

    def _scan(self) -> None:
        messages, self._scan_offset = self.bus.read_from(self.agent, self._scan_offset or 0)
        self._match(messages)

    def _match(self, messages: list[Message]) -> None:
        for msg in messages:
            if msg.msg_type != "response" or msg.in_reply_to is None:
                continue
            state = self._states.get(msg.in_reply_to)
            if state is not None and state.response is None:
                state.response = msg
                state.status = RequestStatus.ANSWERED
