"""Persisted read cursor of a mailbox's reader: `<dir>/.cursors/<agent>.json`.

The cursor is a logical byte offset (see `mailfile`), the id of the last acknowledged
message and the epoch of the mailbox file it refers to. It is replaced atomically
(temp file + `os.replace`), so a reader killed at any instant leaves either the old or
the new cursor, never a torn one.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from bareagent.mailbox.mailfile import O_BINARY
from bareagent.mailbox.message import MESSAGE_ID_RE

log = logging.getLogger("bareagent.mailbox")

CURSOR_DIR = ".cursors"


@dataclass(frozen=True)
class Cursor:
    """Read position: everything before logical `offset` has been acknowledged."""

    offset: int = 0
    last_id: str | None = None
    epoch: str = ""


def cursor_path(mailbox_dir: Path, agent: str) -> Path:
    """Return the cursor file of `agent`'s mailbox."""
    return mailbox_dir / CURSOR_DIR / f"{agent}.json"


def load_cursor(path: Path) -> Cursor:
    """Return the stored cursor; a missing file is the start of the mailbox.

    An unreadable cursor (only possible if something else wrote the file) restarts from
    the beginning with a warning: repeating mail is better than silently losing it.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Cursor()
    try:
        data = json.loads(raw)
        offset, last_id, epoch = data["offset"], data.get("last_id"), data.get("epoch", "")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"bad offset {offset!r}")
        id_ok = isinstance(last_id, str) and MESSAGE_ID_RE.fullmatch(last_id)
        if last_id is not None and not id_ok:
            raise ValueError(f"bad last_id {last_id!r}")
        if not isinstance(epoch, str):
            raise ValueError(f"bad epoch {epoch!r}")
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("Unreadable cursor file %s (%s); reading the mailbox from the start", path, exc)
        return Cursor()
    return Cursor(offset=offset, last_id=last_id, epoch=epoch)


def save_cursor(path: Path, cursor: Cursor, *, fsync: bool = False) -> None:
    """Atomically replace the cursor file with `cursor`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(
        {"offset": cursor.offset, "last_id": cursor.last_id, "epoch": cursor.epoch},
        separators=(",", ":"),
    ).encode()
    tmp = path.with_name(
        f".{path.name}.{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(4)}.tmp"
    )
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_BINARY, 0o600)
    try:
        try:
            os.write(fd, body)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
