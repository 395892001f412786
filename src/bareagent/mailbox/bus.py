"""`MessageBus`: one append-only JSONL mailbox per agent in one directory.

Layout of `mailbox_dir` (callers pass `<state_root>/mailbox/<session>`):

    <agent>.jsonl            header line + one JSON message per line (see `mailfile`)
    <agent>.jsonl.lock       inter-process lock (see `lock`) held by writers and compaction
    .cursors/<agent>.json    the reader's persisted cursor (see `cursor`)

Delivery contract (see docs/mailbox.md): every mailbox has one consumer, its agent.
`receive(agent)` returns the messages after the persisted cursor without moving it;
`ack(agent, msg_id)` moves it past `msg_id`. Acknowledging after the side effect and
making the side effect idempotent by message id gives exactly-once processing: after a
crash at most the one in-flight, unacknowledged message is delivered again.
`receive(agent, advance=True)` acknowledges on read (at-most-once).
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import cast

from bareagent.mailbox import mailfile
from bareagent.mailbox.cursor import Cursor, cursor_path, load_cursor, save_cursor
from bareagent.mailbox.lock import MailboxLock
from bareagent.mailbox.mailfile import O_BINARY, ScanResult
from bareagent.mailbox.message import (
    MAIN_AGENT,
    MSG_TYPES,
    Message,
    MsgType,
    validate_agent_name,
    validate_message_id,
)
from bareagent.mailbox.waker import OBSERVER_MODES, MailboxWaker, ObserverMode

log = logging.getLogger("bareagent.mailbox")

KnownAgents = Iterable[str] | Callable[[], Iterable[str]]

_INDEX_LIMIT = 4096
_WARNED_LIMIT = 10_000
_EMPTY_INDEX: dict[str, tuple[str, int]] = {}


_BUSES: weakref.WeakSet[MessageBus] = weakref.WeakSet()


def _reset_buses_after_fork() -> None:
    # Another thread may have held a bus lock at fork time; the child starts clean.
    for bus in list(_BUSES):
        bus._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_buses_after_fork)


class MessageBus:
    """Append-only per-agent JSONL mailboxes, safe with many writer processes."""

    def __init__(
        self,
        mailbox_dir: str | os.PathLike[str],
        *,
        known_agents: KnownAgents | None = None,
        observer: ObserverMode | str = "auto",
        poll_interval: float = 0.25,
        lock_timeout: float = 30.0,
        lock_poll_interval: float = 0.001,
        fsync: bool = False,
        compact_threshold: int | None = 1 << 20,
        recheck_interval: float = 30.0,
    ) -> None:
        self.mailbox_dir = Path(mailbox_dir)
        self.mailbox_dir.mkdir(parents=True, exist_ok=True)
        if observer not in OBSERVER_MODES:
            raise ValueError(
                f"Invalid observer {observer!r}; expected one of: {', '.join(OBSERVER_MODES)}"
            )
        self.observer = observer
        self.poll_interval = poll_interval
        self.lock_timeout = lock_timeout
        self.lock_poll_interval = lock_poll_interval
        self.fsync = fsync
        self.compact_threshold = compact_threshold
        self.recheck_interval = recheck_interval
        self._known: Callable[[], Iterable[str]] | frozenset[str] | None
        if known_agents is None or callable(known_agents):
            self._known = known_agents
        else:
            self._known = frozenset(known_agents)
        self._lock = threading.Lock()
        self._agent_locks: dict[str, threading.Lock] = {}
        self._file_locks: dict[tuple[int, str], MailboxLock] = {}
        self._index: dict[str, OrderedDict[str, tuple[str, int]]] = {}
        self._warned: set[tuple[str, str, int]] = set()
        self._waker: MailboxWaker | None = None
        self._paths: dict[str, str] = {}
        _BUSES.add(self)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._agent_locks = {}
        self._file_locks = {}  # the parent's descriptors are left alone
        self._waker = None

    # paths and locks -----------------------------------------------------------------
    def path(self, agent: str) -> Path:
        """Return the mailbox file of `agent`."""
        return self.mailbox_dir / f"{validate_agent_name(agent)}.jsonl"

    def _file(self, agent: str) -> str:
        path = self._paths.get(agent)
        if path is None:
            path = self._paths[agent] = str(self.path(agent))
        return path

    def _locked(self, agent: str) -> MailboxLock:
        key = (os.getpid(), agent)
        with self._lock:
            lock = self._file_locks.get(key)
            if lock is None:
                lock = self._file_locks[key] = MailboxLock(
                    f"{self.path(agent)}.lock",
                    timeout=self.lock_timeout,
                    poll_interval=self.lock_poll_interval,
                )
        return lock

    def _agent_lock(self, agent: str) -> threading.Lock:
        with self._lock:
            lock = self._agent_locks.get(agent)
            if lock is None:
                lock = self._agent_locks[agent] = threading.Lock()
            return lock

    # sending -------------------------------------------------------------------------
    def _check_recipient(self, agent: str) -> None:
        validate_agent_name(agent, "recipient name")
        if self._known is None or agent == MAIN_AGENT:
            return
        known = self._known if isinstance(self._known, frozenset) else set(self._known())
        if agent not in known:
            raise ValueError(f"Unknown agent {agent!r}: no registered teammate has that name")

    def send(
        self,
        from_agent: str,
        to_agent: str,
        content: str,
        msg_type: MsgType | str = "request",
        in_reply_to: str | None = None,
    ) -> Message:
        """Append a message to `to_agent`'s mailbox and return it."""
        validate_agent_name(from_agent, "sender name")
        self._check_recipient(to_agent)
        if msg_type not in MSG_TYPES:
            choices = ", ".join(MSG_TYPES)
            raise ValueError(f"Invalid msg_type {msg_type!r}; expected one of: {choices}")
        msg = Message.create(from_agent, to_agent, content, cast(MsgType, msg_type), in_reply_to)
        self._append(msg)
        return msg

    def broadcast(self, from_agent: str, content: str, recipients: Iterable[str]) -> list[Message]:
        """Send `content` as a broadcast to each recipient (all are checked first)."""
        validate_agent_name(from_agent, "sender name")
        names = list(dict.fromkeys(recipients))
        for name in names:
            self._check_recipient(name)
        if not isinstance(content, str):
            raise ValueError(f"Message content must be text, got {type(content).__name__}")
        sent = []
        for name in names:
            msg = Message.create(from_agent, name, content, "broadcast")
            self._append(msg)
            sent.append(msg)
        return sent

    def _append(self, msg: Message) -> None:
        line = mailfile.encode_message(msg)
        with self._locked(msg.to_agent):
            mailfile.append_line(self._file(msg.to_agent), line, fsync=self.fsync)
        waker = self._waker
        if waker is not None and waker.pid == os.getpid():
            waker.notify(msg.to_agent)  # same-process readers need not wait for the observer

    # reading -------------------------------------------------------------------------
    def cursor(self, agent: str) -> Cursor:
        """Return `agent`'s persisted cursor."""
        return load_cursor(cursor_path(self.mailbox_dir, validate_agent_name(agent)))

    def _scan(self, agent: str, offset: int, limit: int | None = None) -> ScanResult:
        result = mailfile.scan(self._file(agent), offset, limit=limit)
        with self._lock:
            index = self._index.setdefault(agent, OrderedDict())
            for entry in result.entries:
                if entry.message is not None:
                    index[entry.message.id] = (result.epoch, entry.end)
                    index.move_to_end(entry.message.id)
                elif (agent, result.epoch, entry.start) not in self._warned:
                    if len(self._warned) >= _WARNED_LIMIT:
                        self._warned.clear()
                    self._warned.add((agent, result.epoch, entry.start))
                    log.warning(
                        "Skipping malformed line at offset %d of %s's mailbox: %s",
                        entry.start,
                        agent,
                        entry.error,
                    )
            while len(index) > _INDEX_LIMIT:
                index.popitem(last=False)
        return result

    def _scan_unread(self, agent: str, limit: int | None = None) -> tuple[Cursor, ScanResult]:
        cur = self.cursor(agent)
        result = self._scan(agent, cur.offset, limit)
        if result.exists and cur.epoch and result.epoch and result.epoch != cur.epoch:
            log.warning("%s's mailbox was recreated; reading the new file from its start", agent)
            cur = Cursor(0, None, result.epoch)
            result = self._scan(agent, 0, limit)
        return cur, result

    def receive(
        self,
        agent: str,
        since_id: str | None = None,
        *,
        advance: bool = False,
        limit: int | None = None,
    ) -> list[Message]:
        """Return messages after `since_id`, or after the persisted cursor when None.

        The cursor moves only with `advance=True` (to the last returned message) or
        `ack`. A `since_id` that is not in the mailbox (compacted away, or from elsewhere)
        selects the messages whose ids sort after it, i.e. that were created later.
        """
        validate_agent_name(agent)
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if since_id is None:
            _, result = self._scan_unread(agent, limit)
            entries = result.entries
        else:
            validate_message_id(since_id, "since_id")
            result, entries = self._after_id(agent, since_id, limit)
        picked = [e for e in entries if e.message is not None]
        if limit is not None:
            picked = picked[:limit]
        messages = [e.message for e in picked if e.message is not None]
        if advance and result.exists:
            cut = limit is not None and len(picked) == limit
            end = picked[-1].end if cut else result.end
            last_id = messages[-1].id if messages else None
            self._store_cursor(agent, end, last_id, result.epoch, result.base)
        return messages

    def _after_id(
        self, agent: str, since_id: str, limit: int | None
    ) -> tuple[ScanResult, list[mailfile.Entry]]:
        with self._lock:
            hit = self._index.get(agent, _EMPTY_INDEX).get(since_id)
        if hit is not None:
            result = self._scan(agent, hit[1], limit)
            if result.epoch == hit[0]:
                return result, result.entries
        result = self._scan(agent, 0)
        for i, entry in enumerate(result.entries):
            if entry.message is not None and entry.message.id == since_id:
                return result, result.entries[i + 1 :]
        later = [e for e in result.entries if e.message is not None and e.message.id > since_id]
        return result, later

    def read_from(
        self, agent: str, offset: int, *, limit: int | None = None
    ) -> tuple[list[Message], int]:
        """Return (messages from logical `offset`, offset to continue from); no cursor change."""
        validate_agent_name(agent)
        result = self._scan(agent, offset, limit)
        return [e.message for e in result.entries if e.message is not None], result.end

    def end_offset(self, agent: str) -> int:
        """Return the logical offset just past the current end of `agent`'s mailbox."""
        return mailfile.logical_end(self._file(agent))

    def find(self, agent: str, msg_id: str) -> Message | None:
        """Return the message `msg_id` if it is still in `agent`'s mailbox."""
        validate_message_id(msg_id)
        for entry in self._scan(agent, 0).entries:
            if entry.message is not None and entry.message.id == msg_id:
                return entry.message
        return None

    def has_unread(self, agent: str) -> bool:
        """True if `receive(agent)` would return at least one message."""
        validate_agent_name(agent)
        _, result = self._scan_unread(agent, limit=1)
        return any(e.message is not None for e in result.entries)

    # acknowledging -------------------------------------------------------------------
    def ack(self, agent: str, msg_id: str) -> None:
        """Persist `agent`'s cursor just past `msg_id` (no-op if it is already past it)."""
        validate_agent_name(agent)
        validate_message_id(msg_id)
        header, _ = mailfile.header_info(self._file(agent))
        with self._lock:
            hit = self._index.get(agent, _EMPTY_INDEX).get(msg_id)
        if header is not None and hit is not None and hit[0] == header.epoch:
            # Offsets are immutable within an epoch, so the remembered end is exact.
            self._store_cursor(agent, hit[1], msg_id, header.epoch, header.base)
            return
        cur, result = self._scan_unread(agent)
        for entry in result.entries:
            if entry.message is not None and entry.message.id == msg_id:
                self._store_cursor(agent, entry.end, msg_id, result.epoch, result.base)
                return
        if msg_id == cur.last_id:
            return
        before = self._scan(agent, 0)
        if any(
            e.message is not None and e.message.id == msg_id and e.end <= cur.offset
            for e in before.entries
        ):
            return
        raise ValueError(f"Message {msg_id} is not in {agent}'s mailbox")

    def _store_cursor(
        self, agent: str, end: int, last_id: str | None, epoch: str, base: int
    ) -> None:
        path = cursor_path(self.mailbox_dir, agent)
        with self._agent_lock(agent):
            cur = load_cursor(path)
            if cur.epoch == epoch and cur.offset >= end:
                return  # cursors only move forward
            save_cursor(path, Cursor(end, last_id or cur.last_id, epoch), fsync=self.fsync)
        if self.compact_threshold is not None and end - base >= self.compact_threshold:
            self.compact(agent)

    # waiting -------------------------------------------------------------------------
    @property
    def waker(self) -> MailboxWaker:
        """The waker of this process, started on first use (a new one after a fork)."""
        with self._lock:
            if self._waker is None or self._waker.pid != os.getpid():
                self._waker = MailboxWaker(
                    self.mailbox_dir, observer=self.observer, poll_interval=self.poll_interval
                ).start()
            return self._waker

    def wait(self, agent: str, timeout: float | None) -> bool:
        """Block until `agent` has unread mail (True) or `timeout` seconds pass (False)."""
        validate_agent_name(agent)
        waker = self.waker
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            seen = waker.sequence(agent)  # before the check, so no change can slip between
            if self.has_unread(agent):
                return True
            remaining = self.recheck_interval
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                remaining = min(remaining, left)
            waker.wait_for_change(agent, seen, remaining)

    def close(self) -> None:
        """Stop this process's waker."""
        with self._lock:
            waker, self._waker = self._waker, None
            locks = [lk for (pid, _), lk in self._file_locks.items() if pid == os.getpid()]
            self._file_locks.clear()
        for lock in locks:
            lock.close()
        if waker is not None and waker.pid == os.getpid():
            waker.stop()

    def __enter__(self) -> MessageBus:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # compaction ----------------------------------------------------------------------
    def compact(self, agent: str) -> int:
        """Drop the messages before `agent`'s cursor; return the bytes removed.

        Runs under the mailbox lock and replaces the file atomically. Offsets are
        logical, so the cursor stays valid and nothing after it is touched.
        """
        path = self.path(agent)
        with self._locked(agent):
            cur = self.cursor(agent)
            try:
                fd = os.open(path, os.O_RDONLY | O_BINARY)
            except FileNotFoundError:
                return 0
            try:
                header = mailfile.read_header(fd)
                if header is None or cur.offset <= header.base:
                    return 0
                if cur.epoch and header.epoch and cur.epoch != header.epoch:
                    return 0  # the cursor belongs to an older file; keep everything
                size = os.fstat(fd).st_size
                keep_from = header.length + (cur.offset - header.base)
                if keep_from > size:
                    return 0
                tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.compact")
                self._write_compacted(
                    fd, tmp, mailfile.make_header(header.epoch, cur.offset), keep_from, size
                )
            finally:
                os.close(fd)
            _replace(tmp, path)
        log.debug("Compacted %s's mailbox: dropped %d bytes", agent, keep_from - header.length)
        return keep_from - header.length

    def _write_compacted(self, src: int, tmp: Path, header: bytes, start: int, stop: int) -> None:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_BINARY, 0o600)
        try:
            os.write(out, header)
            pos = start
            while pos < stop:
                chunk = mailfile.pread(src, min(1 << 20, stop - pos), pos)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
                pos += len(chunk)
            if self.fsync:
                os.fsync(out)
        except BaseException:
            os.close(out)
            tmp.unlink(missing_ok=True)
            raise
        os.close(out)


def _replace(src: Path, dst: Path) -> None:
    """os.replace, retried briefly on Windows where an open reader blocks the rename."""
    for attempt in range(50):
        try:
            os.replace(src, dst)
            return
        except PermissionError:
            if sys.platform != "win32" or attempt == 49:
                src.unlink(missing_ok=True)
                raise
            time.sleep(0.01)
