"""Team mail: the team's mailbox directory, how mail is shown, and the `main` inbox.

Every CLI call, REPL and teammate of one workspace uses the same mailbox directory,
`<state_root>/mailbox/team/`: the team session is the constant `team`, so a message sent
from one terminal reaches a teammate that another terminal started.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bareagent.core.notifications import Notification
from bareagent.mailbox import MAIN_AGENT, Message, MessageBus, Protocol, decode

log = logging.getLogger(__name__)

TEAM_SESSION = "team"
MAX_TEAM_NOTE_CHARS = 4000


def team_mailbox_dir(state_root: str | Path) -> Path:
    """`<state_root>/mailbox/team`."""
    return Path(state_root) / "mailbox" / TEAM_SESSION


def open_team_bus(state_root: str | Path, known: Callable[[], Iterable[str]]) -> MessageBus:
    """The team's bus; sending to a name that `known()` does not list (or `main`) fails."""
    directory = team_mailbox_dir(state_root)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return MessageBus(directory, known_agents=known)


def content_text(message: Message) -> tuple[Protocol | None, str]:
    """The protocol (if any) and the message body as text."""
    protocol, content = decode(message)
    if isinstance(content, str):
        return protocol, content
    return protocol, json.dumps(content, ensure_ascii=False)


def mail_line(message: Message, *, label: str | None = None) -> str:
    """`Team response from X: ...` (responses; `label` overrides the word)."""
    protocol, text = content_text(message)
    word = label or ("response" if message.msg_type == "response" else "message")
    tag = f" [{protocol.value}]" if protocol is not None else ""
    return f"Team {word} from {message.from_agent}{tag}: {text}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…[truncated]"


@dataclass(frozen=True)
class TeamNotification(Notification):
    """Mail shown to a model between loop iterations, as one `Team ... from X:` entry."""

    line: str = ""

    def render(self) -> str:
        """The mail line itself (longer limit than job results: mail is the content)."""
        return _cut(self.line, MAX_TEAM_NOTE_CHARS)


def mail_notification(message: Message, line: str) -> TeamNotification:
    """A notification for one message."""
    return TeamNotification(
        source_id=message.from_agent,
        kind="team",
        status=message.msg_type,
        result=line,
        line=line,
    )


class TeamInbox:
    """The user's session inbox (`main`): drained each loop iteration, shown once.

    Every message is turned into a `Team response from X: ...` line, handed to the
    listeners (the REPL prints it) and kept for the model until the next
    `drain_notifications`; then it is acknowledged. A crash between the two loses the
    model's copy of that one message, never the mailbox order.
    """

    def __init__(self, bus: MessageBus, agent: str = MAIN_AGENT) -> None:
        self.bus = bus
        self.agent = agent
        self.listeners: list[Callable[[str], None]] = []
        self._pending: list[TeamNotification] = []
        self._shown_elsewhere: set[str] = set()
        self._lock = threading.Lock()

    def already_shown(self, message_id: str) -> None:
        """A reply this process printed itself (`team review`): acknowledge it quietly."""
        with self._lock:
            self._shown_elsewhere.add(message_id)

    def poll(self) -> list[str]:
        """Fetch new mail, notify listeners, keep it for the model; returns the lines."""
        lines: list[str] = []
        with self._lock:
            try:
                messages = self.bus.receive(self.agent)
            except (OSError, ValueError) as exc:
                log.warning("cannot read the %s mailbox: %s", self.agent, exc)
                return []
            for message in messages:
                if message.id in self._shown_elsewhere:
                    self._shown_elsewhere.discard(message.id)
                else:
                    line = mail_line(message, label="response")
                    self._pending.append(mail_notification(message, line))
                    lines.append(line)
                self.bus.ack(self.agent, message.id)
        for line in lines:
            for listener in list(self.listeners):
                try:
                    listener(line)
                except Exception as exc:  # a display problem must not lose mail
                    log.warning("team inbox listener failed: %s", exc)
        return lines

    def drain_notifications(self) -> list[Notification]:
        """New and not yet shown mail for the model, each message exactly once."""
        self.poll()
        with self._lock:
            notes: list[Notification] = list(self._pending)
            self._pending.clear()
        return notes


def ack_if_next(bus: MessageBus, agent: str, message: Message) -> bool:
    """Acknowledge `message` only when it is the next unread one (nothing is skipped)."""
    unread = bus.receive(agent, limit=1)
    if unread and unread[0].id == message.id:
        bus.ack(agent, message.id)
        return True
    return False


def describe_content(content: Any) -> str:
    """Protocol content as text."""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
