"""`bareagent top` in a real terminal: tmux runs it, capture-pane reads the screen,
send-keys quits it (with `q`, then with Ctrl-C), and `stty -a` afterwards proves the
terminal settings were restored (cbreak mode undone)."""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bareagent.orchestrator.jobs import JobManager
from test_orchestrator_helpers import (  # noqa: F401
    home,
    marker,
    no_leftovers,
    started,
    wait_started,
    wait_until,
    workspace,
)

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(os.name != "posix", reason="POSIX terminal test"),
]


class Tmux:
    """A private tmux server (its own socket) running one session."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=dict(os.environ),
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "top")

    def wait_for(self, text: str, timeout: float = 15) -> str:
        found = wait_until(lambda: text in self.screen(), timeout, interval=0.1)
        screen = self.screen()
        assert found, f"{text!r} never appeared on screen:\n{screen}"
        return screen


@pytest.fixture
def tmux(marker: str) -> Iterator[Tmux]:
    server = Tmux(f"{marker}-tmux")  # the server's command line carries the marker
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["tmux", "-L", server.socket, "kill-server"], capture_output=True, timeout=10
            )


def _tops(workspace: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "top" in cmdline and str(workspace) in cmdline:
            found.append(proc)
    return found


def _stty_restored(path: Path) -> None:
    settings = path.read_text().split()
    assert "icanon" in settings and "echo" in settings, settings
    assert "-icanon" not in settings and "-echo" not in settings


def test_top_in_a_real_terminal_quits_on_q_and_ctrl_c(
    home: Path, workspace: Path, tmp_path: Path, marker: str, no_leftovers: None, tmux: Tmux
) -> None:
    with JobManager(workspace, owner="main") as jobs:
        jobs.submit(started("spin", f"while :; do :; done # {marker}"), timeout=50, task_id="spin")
        jobs.submit(started("nap", f"sleep 50 # {marker}"), timeout=50, task_id="nap")
        wait_started(workspace, "spin")
        wait_started(workspace, "nap")
        top = shlex.join([sys.executable, "-m", "bareagent", "top", "-w", str(workspace)])
        script = (
            f"{top} --interval 0.5; echo EXIT1=$?; stty -a > {tmp_path}/stty1; "
            f"{top} --interval 0.5; echo EXIT2=$?; stty -a > {tmp_path}/stty2; sleep 30"
        )
        env = [f"-e{key}={os.environ[key]}" for key in ("BAREAGENT_HOME", "HOME", "PATH")]
        tmux.run(
            "new-session", "-d", "-s", "top", "-x", "160", "-y", "40", *env, "bash", "-c", script
        )
        tmux.run("set-option", "-t", "top", "remain-on-exit", "on")  # keep a screen to show
        screen = tmux.wait_for("refresh 0.5s - q or Ctrl-C to quit")
        # Busiest first: the spinning job above the sleeping one.
        screen = tmux.wait_for("2 workers, CPU")
        rows = [line for line in screen.splitlines() if " job " in line]
        assert [row.split("│")[1].strip() for row in rows] == ["spin", "nap"], screen
        assert "running" in rows[0] and str(workspace) in screen
        tmux.run("send-keys", "-t", "top", "q")
        screen = tmux.wait_for("EXIT1=0")
        assert "refresh 0.5s" not in screen  # the alternate screen is gone
        assert wait_until(lambda: (tmp_path / "stty1").exists(), 5)
        _stty_restored(tmp_path / "stty1")

        tmux.wait_for("refresh 0.5s - q or Ctrl-C to quit")
        tmux.run("send-keys", "-t", "top", "C-c")
        tmux.wait_for("EXIT2=0")
        assert wait_until(lambda: (tmp_path / "stty2").exists(), 5)
        _stty_restored(tmp_path / "stty2")
        assert wait_until(lambda: _tops(workspace) == [], 5)
        jobs.cancel("spin")
        jobs.cancel("nap")
