"""On-disk format of one mailbox file: a header line, then one JSON message per line.

Offsets handed out to readers are *logical*: the byte position in the ever-growing
stream of message lines since the file was created, not counting the header. The header
records `base`, the logical offset of the first line still in the file, so compaction
(which drops a prefix and raises `base`) never invalidates a stored offset:
`physical = header_len + (logical - base)`. `epoch` is random per file creation, so a
mailbox that was deleted and recreated is not mistaken for the old one.

Appends must be made under the mailbox lock (see `bus.py`); reads need no lock because
a reader takes the header and the data from one open descriptor, i.e. one inode, and
compaction replaces the file atomically with `os.replace`.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

from bareagent.mailbox.message import Message

log = logging.getLogger("bareagent.mailbox")

HEADER_KEY = "bareagent_mailbox"
FORMAT_VERSION = 1
_HEADER_PREFIX = b'{"' + HEADER_KEY.encode() + b'"'
_HEADER_MAX = 4096
_CHUNK = 1 << 16
#: Windows opens descriptors in text mode unless told otherwise (\n -> \r\n).
O_BINARY: int = getattr(os, "O_BINARY", 0)


class MailboxError(RuntimeError):
    """A mailbox file or lock cannot be used (corrupt header, lock timeout)."""


@dataclass(frozen=True)
class Header:
    """Parsed header: `length` is its size in bytes including the newline (0 if absent)."""

    epoch: str
    base: int
    length: int


@dataclass(frozen=True)
class Entry:
    """One complete line: `message` is None (and `error` says why) for a garbage line."""

    message: Message | None
    start: int
    end: int
    error: str


@dataclass(frozen=True)
class ScanResult:
    """Entries read from a logical offset; `end` is where the next read should start."""

    entries: list[Entry]
    end: int
    epoch: str
    base: int
    exists: bool


def pread(fd: int, size: int, offset: int) -> bytes:
    """os.pread where it exists; seek+read elsewhere (Windows; descriptors are private)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, size)  # pragma: no cover - Windows


def new_epoch() -> str:
    """Return a random epoch for a newly created mailbox file."""
    return secrets.token_hex(8)


def make_header(epoch: str, base: int) -> bytes:
    """Return the header line for a mailbox file."""
    body = {HEADER_KEY: FORMAT_VERSION, "epoch": epoch, "base": base}
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def read_header(fd: int) -> Header | None:
    """Return the header of an open mailbox file, or None while the file is still empty.

    A file without a header line (hand-written) is read as base 0 and epoch "".
    """
    head = pread(fd, _HEADER_MAX, 0)
    if not head:
        return None
    if not head.startswith(_HEADER_PREFIX):
        return Header(epoch="", base=0, length=0)
    nl = head.find(b"\n")
    if nl < 0:
        return None
    try:
        data = json.loads(head[:nl])
        epoch, base = data["epoch"], data["base"]
        if not isinstance(epoch, str) or not isinstance(base, int) or base < 0:
            raise ValueError("bad header fields")
    except (ValueError, KeyError, TypeError) as exc:
        raise MailboxError(f"Mailbox header is corrupt ({exc}); move the file aside") from exc
    return Header(epoch=epoch, base=base, length=nl + 1)


def encode_message(message: Message) -> bytes:
    """Return the message as one JSON line (JSON escapes newlines inside strings)."""
    return json.dumps(message.to_dict(), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def parse_line(raw: bytes) -> Message:
    """Decode one line (without its newline) into a Message; ValueError if it is not one."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    return Message.from_dict(data)


def append_line(path: str, line: bytes, *, fsync: bool = False) -> None:
    """Append one complete line with a single write; the caller holds the mailbox lock.

    If the file ends with a torn line (a writer died mid-write), a newline is written
    first in the same write so the torn line stays a separate, skipped garbage line
    instead of swallowing this message.
    """
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | O_BINARY, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            data = make_header(new_epoch(), 0) + line
        elif pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + line
        else:
            data = line
        view = memoryview(data)
        while view:
            # Regular files only write short on errors like ENOSPC; finish under the lock.
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _iter_lines(fd: int, start: int) -> Iterator[tuple[int, bytes]]:
    """Yield (physical start, line without newline) for complete lines from `start`."""
    pos = start
    buf = b""
    buf_start = start
    while True:
        chunk = pread(fd, _CHUNK, pos)
        if not chunk:
            return
        pos += len(chunk)
        buf += chunk
        cut = 0
        while True:
            nl = buf.find(b"\n", cut)
            if nl < 0:
                break
            yield buf_start + cut, buf[cut:nl]
            cut = nl + 1
        buf_start += cut
        buf = buf[cut:]


def scan(path: str, offset: int, *, limit: int | None = None) -> ScanResult:
    """Read complete lines from logical `offset`, stopping after `limit` valid messages.

    A trailing line without a newline (a write in progress, or torn by a crash) is not
    consumed. An offset older than the file's `base` (compacted away) reads from `base`.
    """
    try:
        fd = os.open(path, os.O_RDONLY | O_BINARY)
    except FileNotFoundError:
        return ScanResult([], offset, "", 0, exists=False)
    try:
        header = read_header(fd)
        if header is None:
            return ScanResult([], offset, "", 0, exists=True)
        start_logical = max(offset, header.base)
        physical = header.length + (start_logical - header.base)
        size = os.fstat(fd).st_size
        if physical > size:
            log.warning(
                "Mailbox %s is shorter than the reader's cursor (%d > %d bytes); was it truncated?",
                path,
                physical,
                size,
            )
            return ScanResult([], offset, header.epoch, header.base, exists=True)
        delta = header.base - header.length
        entries: list[Entry] = []
        end = start_logical
        found = 0
        for line_start, raw in _iter_lines(fd, physical):
            start, stop = line_start + delta, line_start + delta + len(raw) + 1
            try:
                entries.append(Entry(parse_line(raw), start, stop, ""))
                found += 1
            except ValueError as exc:
                entries.append(Entry(None, start, stop, f"{exc}: {raw[:120]!r}"))
            end = stop
            if limit is not None and found >= limit:
                break
        return ScanResult(entries, end, header.epoch, header.base, exists=True)
    finally:
        os.close(fd)


def header_info(path: str) -> tuple[Header | None, int]:
    """Return (header, file size); (None, 0) for a missing or still empty file."""
    try:
        fd = os.open(path, os.O_RDONLY | O_BINARY)
    except FileNotFoundError:
        return None, 0
    try:
        return read_header(fd), os.fstat(fd).st_size
    finally:
        os.close(fd)


def logical_end(path: str) -> int:
    """Return the logical offset just past the last byte currently in the file."""
    header, size = header_info(path)
    if header is None:
        return 0
    return header.base + (size - header.length)
