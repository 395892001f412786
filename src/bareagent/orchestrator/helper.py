"""The spawner helper: a single-threaded process that forks and reaps workers.

The owner forks it once (`ForkBackend.start`), early, and then asks it over a pipe to
fork each worker. Workers are therefore forked from a process that has exactly one
thread and does nothing but this loop, so no lock of the owner's threads (HTTP clients,
logging, stdio) can be held in a worker's copy of memory. The helper also:

- reaps every worker (no zombies) and records its exit (registry, failed results);
- is a Linux child subreaper, so processes orphaned below a dead worker are re-parented
  to it, killed and reaped;
- when the owner goes away (EOF on the pipe), gives non-detached workers a few seconds to
  notice and stop themselves, kills the stragglers, stays for detached workers until
  they exit, then exits.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from bareagent.orchestrator.logsetup import (
    configure_worker_logging,
    find_session_handler,
    flush_session_log,
    queue_fds,
    set_identity,
)
from bareagent.orchestrator.reaping import describe_exit, record_exit
from bareagent.worker.common import (
    neutralize_inherited_fds,
    new_session,
    redirect_stdio,
    reset_signals,
    worker_entry,
)

log = logging.getLogger(__name__)

SPAWN_READY_TIMEOUT = 15.0
OWNER_GONE_GRACE = 3.0
ORPHAN_SCAN_SECONDS = 1.0
_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class _Child:
    worker_id: str
    kind: str
    detached: bool
    process: BaseProcess
    kill_sent: bool = False


def become_subreaper() -> bool:
    """Linux: adopt orphans of our descendants instead of init (which may never reap)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _kill_tree(pid: int) -> None:
    from bareagent.sandbox.process_tree import kill_process_tree

    try:
        kill_process_tree(pid, grace=1.0)
    except Exception as exc:
        log.warning("could not kill process tree %s: %s", pid, exc)


def helper_main(conn: Connection, owner_end: Connection, state_root: str, session_id: str) -> None:
    """Process target of the helper."""
    owner_end.close()
    set_identity("spawner", session_id)
    new_session()
    reset_signals()
    os.chdir(state_root)
    stream = redirect_stdio(Path(state_root) / "logs" / f"spawner-{session_id}.log")
    keep = queue_fds(find_session_handler(session_id)) | {conn.fileno()}
    neutralize_inherited_fds(keep)
    configure_worker_logging(session_id, stream, keep_session=True)
    subreaper = become_subreaper()
    # Objects inherited from the owner are never freed here; freezing them keeps the GC
    # from touching (and so copying) their pages in every forked worker.
    gc.freeze()
    log.info("spawner helper for session %s ready (subreaper=%s)", session_id, subreaper)
    code = _Helper(conn, state_root, subreaper).run()
    for s in (sys.stdout, sys.stderr):
        s.flush()
    flush_session_log(session_id)
    os._exit(code)


class _Helper:
    def __init__(self, conn: Connection, state_root: str, subreaper: bool) -> None:
        self.conn = conn
        self.conn_ok = True
        self.state_root = state_root
        self.subreaper = subreaper
        self.children: dict[int, _Child] = {}
        self.owner_alive = True
        self.owner_gone_at = 0.0
        self.graceful = False
        self.ctx = multiprocessing.get_context("fork")

    def run(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        next_scan = 0.0
        while True:
            waitables: list[Any] = [wake_r]
            if self.owner_alive:
                waitables.append(self.conn)
            ready = wait(waitables, timeout=0.5)
            if wake_r in ready:
                self._drain(wake_r)
            if self.conn in ready:
                self._receive()
            self._reap()
            now = time.monotonic()
            if self.subreaper and now >= next_scan:
                self._kill_orphans()
                next_scan = now + ORPHAN_SCAN_SECONDS
            if not self.owner_alive:
                self._stop_undetached(now)
                if not self.children:
                    log.info("spawner helper exits: owner gone and no workers left")
                    return 0

    @staticmethod
    def _drain(fd: int) -> None:
        try:
            while os.read(fd, 512):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _send(self, message: tuple[Any, ...]) -> None:
        if not self.conn_ok:
            return
        try:
            self.conn.send(message)
        except (OSError, ValueError):
            self.conn_ok = False

    def _receive(self) -> None:
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            log.warning("owner connection closed; stopping non-detached workers")
            self.owner_alive = False
            self.conn_ok = False
            self.owner_gone_at = time.monotonic()
            return
        op = message[0]
        if op == "spawn":
            self._spawn(message[1], message[2])
        elif op == "stop":
            self.owner_alive = False
            self.graceful = True
            self.owner_gone_at = time.monotonic()
        else:
            log.warning("spawner helper: unknown request %r", op)

    def _spawn(self, request_id: int, spec_data: dict[str, Any]) -> None:
        worker_id = str(spec_data.get("worker_id"))
        reader, writer = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(
            target=worker_entry,
            args=(spec_data, writer, True),
            name=f"bareagent-{worker_id}",
            daemon=False,
        )
        try:
            process.start()
        except OSError as exc:
            reader.close()
            writer.close()
            self._send(("error", request_id, f"cannot fork worker {worker_id}: {exc}"))
            return
        writer.close()
        message: Any = None
        try:
            if reader.poll(SPAWN_READY_TIMEOUT):
                message = reader.recv()
        except (EOFError, OSError):
            message = None
        finally:
            reader.close()
        pid = process.pid
        assert pid is not None
        child = _Child(
            worker_id, str(spec_data.get("kind")), bool(spec_data.get("detached")), process
        )
        self.children[pid] = child
        if isinstance(message, tuple) and message and message[0] == "ready":
            self._send(("spawned", request_id, pid))
            return
        if process.exitcode is None:
            _kill_tree(pid)
        process.join(2.0)
        self._finish(pid)
        self._send(
            (
                "error",
                request_id,
                f"worker {worker_id} {describe_exit(process.exitcode)} before it was ready",
            )
        )

    def _finish(self, pid: int) -> bool:
        """Reap a known worker if it has exited; record and report it."""
        child = self.children.get(pid)
        if child is None:
            return False
        code = child.process.exitcode  # non-blocking waitpid
        if code is None:
            return False
        del self.children[pid]
        try:
            record_exit(self.state_root, child.kind, child.worker_id, code)
        except Exception as exc:
            log.warning("could not record exit of %s: %s", child.worker_id, exc)
        self._send(("exited", child.worker_id, code))
        return True

    def _reap(self) -> None:
        for pid in list(self.children):
            self._finish(pid)
        if not hasattr(os, "waitid"):
            return
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            if info.si_pid in self.children:
                if not self._finish(info.si_pid):
                    return
                continue
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.si_pid, 0)  # an adopted orphan

    def _kill_orphans(self) -> None:
        import psutil

        try:
            adopted = [p for p in psutil.Process().children() if p.pid not in self.children]
        except psutil.Error:
            return
        for proc in adopted:
            log.warning("killing orphaned process %s adopted by the spawner", proc.pid)
            _kill_tree(proc.pid)

    def _stop_undetached(self, now: float) -> None:
        if not self.graceful and now - self.owner_gone_at < OWNER_GONE_GRACE:
            return
        for pid, child in self.children.items():
            if not child.detached and not child.kill_sent:
                child.kill_sent = True
                log.warning("stopping worker %s: its owner is gone", child.worker_id)
                _kill_tree(pid)
