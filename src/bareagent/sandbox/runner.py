"""Run one shell command with merged output, a hard timeout and no leftovers.

The command runs as `bash -lc` (Windows: `powershell -NoProfile -Command`) in its own
session / process group, stdin closed, stdout and stderr merged into one pipe that a
reader thread drains into a bounded buffer. A `SandboxPolicy` (default: the `process`
level) decides the environment, resource limits, process cap and, at the `bwrap` level,
the filesystem/network isolation; `launch.plan_launch` builds the argv from it.

- Timeout: the whole tree is killed (psutil, children first, then the shell; SIGTERM,
  short grace, SIGKILL), then the process group is SIGKILLed as well, because daemonised
  grandchildren get reparented away from the psutil tree. The call returns with the
  partial output even if something still holds the pipe: after the kill we wait for EOF
  only briefly.
- Normal exit: after the shell exits we wait briefly for EOF, then terminate whatever is
  left in the command's process group. The bash tool is not a place to daemonise
  (`background_run` is); `cmd &` without `wait` is cut off when the shell returns.
  Processes that leave the group themselves (`setsid`, double-forking daemons) are out of
  reach here; the reader stops waiting for them and abandons the pipe.
- Output beyond `max_output_bytes` keeps its head and tail with an explicit marker in
  between, so a runaway `yes` cannot exhaust memory.
- Process cap: while the command runs, a watchdog counts its processes (see
  `watchdog.ProcessCap.interval`); past the cap everything is killed and the result
  carries an `error`.
- Under bwrap the command lives in its own pid namespace: when its shell exits (or bwrap
  is killed), the kernel kills whatever is left in there.
"""

from __future__ import annotations

import codecs
import contextlib
import math
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO

from bareagent.sandbox.launch import plan_launch
from bareagent.sandbox.policy import DEFAULT_POLICY, SandboxPolicy
from bareagent.sandbox.process_tree import kill_process_group, kill_process_tree
from bareagent.sandbox.watchdog import ProcessCap

DEFAULT_MAX_OUTPUT_BYTES = 2 * 1024 * 1024
KILL_GRACE = 0.5
EOF_GRACE = 0.2
READER_JOIN = 0.5
_IS_WINDOWS = os.name == "nt"


@dataclass(frozen=True)
class ShellResult:
    """Outcome of one shell command; `exit_code` is None when it timed out or was killed.

    `error` is set when the sandbox killed the command (e.g. process cap exceeded).
    """

    output: str
    exit_code: int | None
    timed_out: bool
    duration: float
    error: str | None = None


def validate_timeout(timeout: object) -> float:
    """Return `timeout` as a float, or raise ValueError unless it is a positive number."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    value = float(timeout)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return value


def format_seconds(seconds: float) -> str:
    """`30.0` -> `30`, `1.5` -> `1.5`."""
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


def format_shell_result(result: ShellResult, timeout: float) -> str:
    """Render a result as the bash tool's string (error headers per SPEC §1)."""
    if result.timed_out:
        head = f"Error: command timed out after {format_seconds(timeout)} seconds"
        return f"{head}\n{result.output}" if result.output else head
    if result.error:
        head = f"Error: {result.error}"
        return f"{head}\n{result.output}" if result.output else head
    if result.exit_code:
        head = f"Command failed with exit code {result.exit_code}"
        return f"{head}\n{result.output}" if result.output else head
    return result.output


class _OutputBuffer:
    """Keeps the first and last `limit // 2` bytes and counts what was dropped between."""

    def __init__(self, limit: int) -> None:
        self._head_cap = max(limit // 2, 1)
        self._tail_cap = max(limit - self._head_cap, 1)
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()

    def append(self, data: bytes) -> None:
        with self._lock:
            room = self._head_cap - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if not data:
                return
            self._tail += data
            # Trim in batches so the tail copy is amortised, not per chunk.
            if len(self._tail) > 2 * self._tail_cap:
                cut = len(self._tail) - self._tail_cap
                del self._tail[:cut]
                self._dropped += cut

    def text(self) -> str:
        with self._lock:
            head = bytes(self._head)
            tail = bytes(self._tail)
            dropped = self._dropped
        if len(tail) > self._tail_cap:
            dropped += len(tail) - self._tail_cap
            tail = tail[-self._tail_cap :]
        if not dropped:
            return (head + tail).decode("utf-8", errors="replace")
        marker = f"\n[... {dropped} bytes of output omitted ...]\n"
        return (
            head.decode("utf-8", errors="replace") + marker + tail.decode("utf-8", errors="replace")
        )


class _PipeReader:
    """Drains a pipe on a thread. On POSIX it can be told to stop even without EOF."""

    def __init__(
        self,
        pipe: IO[bytes],
        buffer: _OutputBuffer,
        on_output: Callable[[str], None] | None = None,
    ) -> None:
        self._pipe = pipe
        self._buffer = buffer
        self._on_output = on_output
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bareagent-shell-reader")
        self._thread.daemon = True
        self._thread.start()

    def _emit(self, chunk: bytes, final: bool = False) -> None:
        self._buffer.append(chunk)
        if self._on_output is None:
            return
        text = self._decoder.decode(chunk, final)
        if text:
            try:
                self._on_output(text)
            except Exception:
                # A broken listener must not stop the pipe from being drained.
                self._on_output = None

    def _run(self) -> None:
        try:
            self._drain()
        finally:
            self._emit(b"", final=True)

    def _drain(self) -> None:
        fd = self._pipe.fileno()
        if _IS_WINDOWS:
            # Anonymous pipes cannot be select()ed on Windows; a blocking read is all there is.
            while chunk := os.read(fd, 65536):
                self._emit(chunk)
            return
        os.set_blocking(fd, False)
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not sel.select(0.05):
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                self._emit(chunk)

    def wait_eof(self, timeout: float) -> bool:
        """Wait up to `timeout` for EOF; True if the pipe is drained."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Stop reading (POSIX) and close the pipe unless a blocked reader still owns it."""
        self._stop.set()
        self._thread.join(0.5)
        if not self._thread.is_alive():
            with contextlib.suppress(OSError):
                self._pipe.close()


def _spawn(argv: list[str], cwd: str, env: Mapping[str, str] | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=not _IS_WINDOWS,
        creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0) if _IS_WINDOWS else 0,
    )


def _kill_group_now(pgid: int) -> None:
    if not _IS_WINDOWS:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _wait(proc: subprocess.Popen[bytes], limit: float, cap: ProcessCap | None) -> str:
    """Wait for exit; "exited", "timeout", or "runaway" when the process cap was exceeded."""
    deadline = time.monotonic() + limit
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        try:
            proc.wait(timeout=remaining if cap is None else min(remaining, cap.interval()))
            return "exited"
        except subprocess.TimeoutExpired:
            if cap is not None and cap.exceeded():
                return "runaway"


def _resolve_policy(policy: SandboxPolicy | None, cwd: str) -> SandboxPolicy:
    chosen = policy or DEFAULT_POLICY
    if chosen.level == "bwrap" and (chosen.workspace is None or not chosen.hidden_paths):
        # Default to hiding the state root and config of the workspace we run in.
        chosen = chosen.for_workspace(cwd)
    return chosen


def run_shell(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    on_output: Callable[[str], None] | None = None,
    policy: SandboxPolicy | None = None,
) -> ShellResult:
    """Run `command` in a shell in `cwd` under `policy`; kill the whole tree after `timeout`.

    `policy` defaults to the `process` level with default limits. Raises
    `SandboxUnavailable` when the policy asks for bwrap, bwrap cannot run and the policy
    fails closed. `on_output`, if given, receives decoded output as it arrives (on the
    reader thread), e.g. to stream a background job's log; the returned result holds it
    all the same.
    """
    if not isinstance(command, str):
        raise ValueError("command must be a string")
    limit = validate_timeout(timeout)
    workdir = os.fspath(cwd)
    plan = plan_launch(command, cwd=workdir, env=env, policy=_resolve_policy(policy, workdir))
    started = time.monotonic()
    proc = _spawn(plan.argv, workdir, plan.env)
    assert proc.stdout is not None
    buffer = _OutputBuffer(max_output_bytes)
    reader = _PipeReader(proc.stdout, buffer, on_output)
    cap = None
    if plan.max_processes:
        # bwrap's --new-session moves the command into a process group of its own.
        cap = ProcessCap(
            proc.pid,
            plan.max_processes,
            overhead=plan.overhead,
            new_group=plan.level == "bwrap",
        )
    timed_out = False
    error = None
    try:
        outcome = _wait(proc, limit, cap)
        if outcome == "timeout":
            timed_out = True
            kill_process_tree(proc.pid, grace=KILL_GRACE)
            # The shell is a zombie until reaped below, so its pid (= pgid) cannot be reused.
            _kill_group_now(proc.pid)
            proc.wait(timeout=5)
            reader.wait_eof(READER_JOIN)
        elif outcome == "runaway":
            assert cap is not None
            cap.kill_all()
            proc.wait(timeout=5)
            reader.wait_eof(READER_JOIN)
            error = (
                f"command exceeded the sandbox process limit of {cap.cap} processes "
                f"({cap.peak} running) and was killed with all its processes"
            )
    except BaseException:
        # Interrupted (e.g. Ctrl-C): never leave the command running behind us.
        kill_process_tree(proc.pid, grace=KILL_GRACE)
        _kill_group_now(proc.pid)
        proc.wait(timeout=5)
        reader.close()
        raise
    if outcome == "exited":
        drained = reader.wait_eof(EOF_GRACE)
        # Leftover background processes of the command: see the module docstring.
        if kill_process_group(proc.pid, grace=KILL_GRACE) and not drained:
            reader.wait_eof(READER_JOIN)
    reader.close()
    return ShellResult(
        output=buffer.text(),
        exit_code=proc.returncode if outcome == "exited" else None,
        timed_out=timed_out,
        duration=time.monotonic() - started,
        error=error,
    )
