"""Inter-process mailbox lock on `<agent>.jsonl.lock`.

On POSIX this is `fcntl.flock` on the lock file, blocking in the kernel: waiters queue
without polling and the lock is handed over as soon as it is released. That is the same
lock `filelock.FileLock` takes on Unix (flock on the same file, which it never deletes),
so the two interoperate; `filelock`'s own bookkeeping costs ~85 µs per acquire versus
~5 µs here, which decides mailbox throughput. Where `fcntl` is missing (Windows),
`filelock.FileLock` is used with `timeout`.

Locks are per process: the descriptor is re-opened after a fork, because a flock belongs
to the open file description, which a forked child would share with its parent. A
`threading.Lock` serialises threads of one process in front of the flock.
"""

from __future__ import annotations

import os
import threading
from types import TracebackType

from filelock import FileLock, Timeout

from bareagent.mailbox.mailfile import O_BINARY, MailboxError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class MailboxLock:
    """Exclusive lock shared by all processes using one mailbox file."""

    def __init__(self, path: str, *, timeout: float = 30.0, poll_interval: float = 0.001) -> None:
        self.path = path
        self.timeout = timeout
        self._thread_lock = threading.Lock()
        self._fd: int | None = None
        self._pid = 0
        self._filelock: FileLock | None = None
        if fcntl is None:  # pragma: no cover - Windows
            self._filelock = FileLock(path, timeout=timeout, poll_interval=poll_interval)

    def acquire(self) -> None:
        """Block until this process holds the lock (MailboxError after `timeout` on Windows)."""
        if self._filelock is not None:  # pragma: no cover - Windows
            try:
                self._filelock.acquire()
            except Timeout as exc:
                raise MailboxError(
                    f"Timed out after {self.timeout:g}s waiting for the lock {self.path}"
                ) from exc
            return
        if not self._thread_lock.acquire(timeout=self.timeout if self.timeout >= 0 else -1):
            raise MailboxError(
                f"Timed out after {self.timeout:g}s waiting for the lock {self.path}"
            )
        try:
            if self._fd is None or self._pid != os.getpid():
                # A descriptor inherited through fork is shared with the parent: never reuse it.
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | O_BINARY, 0o600)
                self._pid = os.getpid()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._thread_lock.release()
            raise

    def _timed_out(self) -> MailboxError:
        return MailboxError(f"Timed out after {self.timeout:g}s waiting for the lock {self.path}")

    def release(self) -> None:
        """Release the lock."""
        if self._filelock is not None:  # pragma: no cover - Windows
            self._filelock.release()
            return
        try:
            assert self._fd is not None
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    def close(self) -> None:
        """Close the lock file descriptor of this process (waits for a current holder)."""
        if self._filelock is not None:  # pragma: no cover - Windows
            return
        with self._thread_lock:
            if self._fd is not None and self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> MailboxLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
