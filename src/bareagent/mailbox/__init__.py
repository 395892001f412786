"""Mailboxes for teammate processes: JSONL message bus, watchdog waker, protocols.

See docs/mailbox.md for the file format, locking, cursors, waking and compaction.
"""

from bareagent.mailbox.bus import MessageBus
from bareagent.mailbox.cursor import Cursor
from bareagent.mailbox.mailfile import MailboxError
from bareagent.mailbox.message import (
    MAIN_AGENT,
    MSG_TYPES,
    Message,
    new_message_id,
    validate_agent_name,
)
from bareagent.mailbox.protocol import (
    Protocol,
    ProtocolFSM,
    RequestState,
    RequestStatus,
    decode,
    encode,
)
from bareagent.mailbox.waker import MailboxWaker, filesystem_type, resolve_observer_kind

__all__ = [
    "MAIN_AGENT",
    "MSG_TYPES",
    "Cursor",
    "MailboxError",
    "MailboxWaker",
    "Message",
    "MessageBus",
    "Protocol",
    "ProtocolFSM",
    "RequestState",
    "RequestStatus",
    "decode",
    "encode",
    "filesystem_type",
    "new_message_id",
    "resolve_observer_kind",
    "validate_agent_name",
]
