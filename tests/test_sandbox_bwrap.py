"""The `bwrap` level: read-only root, writable workspace, no network, hidden state, kills.

Tests that need a working bubblewrap skip (with the probe's reason) only when it is
genuinely unavailable; the refusal / fallback tests run everywhere.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bareagent.core.handlers.bash import run_bash
from bareagent.sandbox import bwrap
from bareagent.sandbox.launch import BWRAP_OVERHEAD
from bareagent.sandbox.limits import ResourceLimits
from bareagent.sandbox.policy import SandboxPolicy, SandboxUnavailable
from bareagent.sandbox.runner import run_shell

REASON = bwrap.unavailable_reason(network=False)
needs_bwrap = pytest.mark.skipif(REASON is not None, reason=f"bwrap unavailable: {REASON}")
posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX shell")
PY = shlex.quote(sys.executable)
REFUSAL = (
    "Error: sandbox level 'bwrap' is unavailable: {reason}; refusing to run commands "
    '(set [sandbox] fallback = "process" to allow a weaker sandbox).'
)


def _with_marker(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(marker in part for part in proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.fixture()
def marker() -> Iterator[str]:
    token = f"300.{uuid.uuid4().int % 10**9:09d}"
    yield token
    deadline = time.monotonic() + 3
    left = _with_marker(token)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _with_marker(token)
    for proc in left:
        proc.kill()
    assert not left, f"processes left behind: {left}"


@pytest.fixture()
def outside() -> Iterator[Path]:
    """A directory outside /tmp (so the private /tmp alone cannot explain a refusal)."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    path = Path(tempfile.mkdtemp(prefix="bareagent-sandbox-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _policy(ws: Path, **kw: object) -> SandboxPolicy:
    return SandboxPolicy(level="bwrap", **kw).for_workspace(ws)  # type: ignore[arg-type]


@needs_bwrap
def test_writes_inside_succeed_outside_fail(tmp_path: Path, outside: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home_target = Path(os.environ["HOME"]) / f"escape-{uuid.uuid4().hex}"
    cmd = (
        "echo inside > inside.txt && echo wrote-inside; "
        f"echo x > {outside}/escape.txt || echo outside-refused; "
        f"echo x > {home_target} || echo home-refused; "
        "touch /var/tmp/bareagent-escape-probe || echo vartmp-refused"
    )
    out = run_bash(ws, cmd, policy=_policy(ws))
    assert "wrote-inside" in out and "outside-refused" in out
    assert "home-refused" in out and "vartmp-refused" in out
    assert (ws / "inside.txt").read_text() == "inside\n"
    assert not (outside / "escape.txt").exists()
    assert not home_target.exists()
    assert not Path("/var/tmp/bareagent-escape-probe").exists()
    # Control: the same command at the process level does write outside.
    run_bash(ws, f"echo x > {outside}/escape.txt", policy=SandboxPolicy())
    assert (outside / "escape.txt").exists()


@needs_bwrap
def test_workspace_outside_tmp_and_private_tmp(outside: Path, tmp_path: Path) -> None:
    ws = outside / "ws"
    ws.mkdir()
    (tmp_path / "host-tmp-file").write_text("host")
    out = run_bash(
        ws,
        f"pwd; touch made; ls {tmp_path} 2>&1 | head -1; f=$(mktemp) && echo tmp-ok",
        policy=_policy(ws),
    )
    lines = out.splitlines()
    assert lines[0] == str(ws.resolve())
    assert "No such file or directory" in lines[1]  # the host's /tmp is not visible
    assert lines[2] == "tmp-ok"
    assert (ws / "made").exists()


@needs_bwrap
def test_home_under_tmp_still_resolves_read_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    home = Path(os.environ["HOME"])
    (home / "visible.txt").write_text("home file")
    try:
        out = run_bash(
            ws,
            'cat "$HOME/visible.txt"; echo; touch "$HOME/new" || echo ro',
            policy=_policy(ws),
        )
    finally:
        (home / "visible.txt").unlink()
    assert out.startswith("home file\n")
    assert out.rstrip().endswith("ro")
    assert not (home / "new").exists()


class _Listener:
    """A TCP listener on 127.0.0.1 that records accepted connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture()
def listener() -> Iterator[_Listener]:
    server = _Listener()
    try:
        yield server
    finally:
        server.close()


@needs_bwrap
def test_network_is_cut_unless_allowed(tmp_path: Path, listener: _Listener) -> None:
    connect = (
        f"{PY} -c \"import socket; socket.create_connection(('127.0.0.1', {listener.port}), "
        "timeout=3); print('connected')\""
    )
    out = run_bash(tmp_path, connect, timeout=20, policy=_policy(tmp_path))
    assert out.startswith("Command failed") and "connected" not in out
    assert listener.accepted == 0
    assert bwrap.unavailable_reason(network=True) is None
    out = run_bash(tmp_path, connect, timeout=20, policy=_policy(tmp_path, network=True))
    assert out == "connected\n"
    assert listener.accepted == 1


@needs_bwrap
def test_state_root_and_config_are_hidden(tmp_path: Path, outside: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    state = outside / "state"
    (state / "jobs").mkdir(parents=True)
    (state / "jobs" / "secret.json").write_text("STATE-SECRET")
    config = outside / "config.toml"
    config.write_text('api_key = "CONFIG-SECRET"')
    policy = SandboxPolicy(
        level="bwrap", workspace=str(ws), state_root=str(state), hidden_paths=(str(config),)
    )
    cmd = f"cat {state}/jobs/secret.json; echo; ls -A {state} | wc -l; cat {config}; echo end"
    out = run_bash(ws, cmd, policy=policy)
    assert "STATE-SECRET" not in out and "CONFIG-SECRET" not in out
    assert "\n0\n" in out  # the state root is an empty directory in there
    assert out.rstrip().endswith("end")
    # Control: without bwrap the files are readable, so the test can fail.
    out = run_bash(ws, cmd, policy=SandboxPolicy())
    assert "STATE-SECRET" in out and "CONFIG-SECRET" in out


@needs_bwrap
def test_hidden_parent_of_the_workspace_keeps_the_workspace(outside: Path) -> None:
    ws = outside / "state" / "ws"
    ws.mkdir(parents=True)
    (outside / "state" / "secret.txt").write_text("S")
    (ws / "mine.txt").write_text("mine")
    policy = SandboxPolicy(level="bwrap", workspace=str(ws), state_root=str(outside / "state"))
    out = run_bash(
        ws, f"cat mine.txt; echo; cat {outside}/state/secret.txt || echo hidden", policy=policy
    )
    assert out.startswith("mine\n") and out.rstrip().endswith("hidden")


@needs_bwrap
@pytest.mark.timeout(30)
def test_timeout_kills_everything_in_the_sandbox(tmp_path: Path, marker: str) -> None:
    started = time.monotonic()
    out = run_bash(
        tmp_path,
        f"sleep {marker} & (sleep {marker} &) ; setsid sleep {marker} & sleep {marker}",
        timeout=1.5,
        policy=_policy(tmp_path),
    )
    assert out.startswith("Error: command timed out after 1.5 seconds")
    assert time.monotonic() - started < 8
    # The marker fixture proves nothing survived.


@needs_bwrap
def test_background_leftovers_die_with_the_namespace(tmp_path: Path, marker: str) -> None:
    out = run_bash(tmp_path, f"setsid sleep {marker} & echo started", policy=_policy(tmp_path))
    assert out == "started\n"


@needs_bwrap
@pytest.mark.timeout(40)
def test_process_cap_under_bwrap(tmp_path: Path, marker: str) -> None:
    policy = _policy(tmp_path, limits=ResourceLimits(max_processes=20))
    result = run_shell(
        f"for i in $(seq 1000); do sleep {marker} & done; wait",
        cwd=tmp_path,
        timeout=20,
        policy=policy,
    )
    assert result.error is not None and "process limit of 20" in result.error
    assert result.duration < 5
    # Below the cap (overhead of bwrap's own processes is not counted against it).
    assert BWRAP_OVERHEAD == 2
    ok = run_bash(
        tmp_path,
        "for i in $(seq 10); do sleep 0.3 & done; wait; echo ok",
        policy=_policy(tmp_path, limits=ResourceLimits(max_processes=12)),
    )
    assert ok == "ok\n"


@needs_bwrap
def test_limits_apply_inside_bwrap(tmp_path: Path) -> None:
    policy = _policy(tmp_path, limits=ResourceLimits(memory_mb=256, open_files=77))
    out = run_bash(tmp_path, "ulimit -v; ulimit -n; ulimit -c", policy=policy)
    assert out.split() == [str(256 * 1024), "77", "0"]
    out = run_bash(tmp_path, f'{PY} -c "x = bytearray(8*1024**3)"', policy=policy)
    assert out.startswith("Command failed with exit code 1") and "MemoryError" in out


@needs_bwrap
def test_secrets_hidden_inside_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SERVICE_API_KEY", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    policy = _policy(tmp_path, env_allow=("FAKE_SERVICE_API_KEY",))
    out = run_bash(
        tmp_path, 'echo "${FAKE_SERVICE_API_KEY-unset} ${OPENAI_API_KEY-unset}"', policy=policy
    )
    assert out == "s3cret unset\n"


# -- refusal and fallback (no bwrap needed)


@pytest.fixture()
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(bwrap, "find_bwrap", lambda: None)
    reason = bwrap.unavailable_reason(network=False)
    assert reason is not None
    return reason


@posix_only
def test_missing_bwrap_refuses_with_one_line(tmp_path: Path, no_bwrap: str) -> None:
    out = run_bash(tmp_path, "touch ran", policy=_policy(tmp_path))
    assert out == REFUSAL.format(reason=no_bwrap)
    assert "\n" not in out
    assert not (tmp_path / "ran").exists()
    with pytest.raises(SandboxUnavailable):
        run_shell("true", cwd=tmp_path, timeout=5, policy=_policy(tmp_path))


@posix_only
def test_fallback_process_runs_weaker(
    tmp_path: Path, no_bwrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    policy = _policy(tmp_path, fallback="process")
    out = run_bash(tmp_path, 'touch ran; echo "${OPENAI_API_KEY-unset}"; ulimit -n', policy=policy)
    assert out == "unset\n4096\n"
    assert (tmp_path / "ran").exists()


@posix_only
def test_probe_reports_a_broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "fake-bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(bwrap, "find_bwrap", lambda: str(fake))
    reason = bwrap.unavailable_reason(network=False)
    assert (
        reason
        == f"{fake} cannot create a sandbox here (bwrap: setting up uid map: Permission denied)"
    )
    out = run_bash(tmp_path, "true", policy=_policy(tmp_path))
    assert out == REFUSAL.format(reason=reason)


def test_bwrap_argv_order(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    hidden_file = tmp_path / "cfg.toml"
    hidden_file.write_text("")
    argv = bwrap.bwrap_argv(
        "/usr/bin/bwrap",
        ["bash", "-lc", "x"],
        workspace=ws,
        cwd=ws,
        hidden=[tmp_path, hidden_file, tmp_path / "missing"],
        network=False,
    )
    text = " ".join(argv)
    root = str(tmp_path.resolve())
    # tmp_path contains the workspace: hidden first, then the workspace bound over it.
    assert text.index("--tmpfs /tmp") < text.index(f"--tmpfs {root}")
    assert text.index(f"--tmpfs {root}") < text.index(f"--bind {ws.resolve()} {ws.resolve()}")
    assert "cfg.toml" not in text  # inside an already hidden directory
    assert "missing" not in text
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--die-with-parent" in argv
    assert argv[-4:] == ["--", "bash", "-lc", "x"]
    assert "--unshare-net" not in bwrap.bwrap_argv("b", ["x"], workspace=ws, cwd=ws, network=True)
