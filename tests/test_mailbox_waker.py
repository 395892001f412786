"""Waker: observer choice, network-filesystem detection, fallback, fork rule."""

from __future__ import annotations

import json
import multiprocessing as mp
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from bareagent.mailbox import waker as waker_mod
from bareagent.mailbox.bus import MessageBus
from bareagent.mailbox.waker import MailboxWaker, filesystem_type, resolve_observer_kind


def fake_mounts(monkeypatch: pytest.MonkeyPatch, mounts: list[tuple[str, str]]) -> None:
    monkeypatch.setattr(waker_mod.sys, "platform", "linux")
    monkeypatch.setattr(waker_mod, "_mounts_from_proc", lambda: mounts)


def test_filesystem_type_picks_the_longest_mount_prefix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    base = str(tmp_path.resolve())
    fake_mounts(monkeypatch, [("/", "ext4"), (base, "nfs4"), (base + "2", "tmpfs")])
    assert filesystem_type(tmp_path / "x") == "nfs4"
    assert filesystem_type("/") == "ext4"
    assert resolve_observer_kind("auto", tmp_path) == "polling"
    assert resolve_observer_kind("native", tmp_path) == "native"


@pytest.mark.parametrize("fstype", ["nfs", "cifs", "smb3", "fuse.sshfs", "9p"])
def test_auto_uses_polling_on_network_filesystems(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fstype: str
) -> None:
    fake_mounts(monkeypatch, [("/", "ext4"), (str(tmp_path.resolve()), fstype)])
    w = MailboxWaker(tmp_path)
    assert w.kind == "polling"


def test_auto_uses_native_on_local_filesystems(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_mounts(monkeypatch, [("/", "ext4")])
    assert resolve_observer_kind("auto", tmp_path) == "native"
    fake_mounts(monkeypatch, [])
    assert resolve_observer_kind("auto", tmp_path) == "native"  # unknown: native


def test_proc_mounts_escapes_are_decoded() -> None:
    assert waker_mod._unescape_mount("/mnt/my\\040share") == "/mnt/my share"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/mounts")
def test_real_mount_table_is_readable() -> None:
    assert filesystem_type("/") is not None


def test_invalid_observer_mode_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Invalid observer"):
        MailboxWaker(tmp_path, observer="inotify")
    with pytest.raises(ValueError, match="Invalid observer"):
        MessageBus(tmp_path, observer="fast")
    with pytest.raises(ValueError):
        MailboxWaker(tmp_path, poll_interval=0)


def test_native_failure_falls_back_to_polling(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = MailboxWaker._start_observer

    def failing(self: MailboxWaker, kind: str) -> object:
        if kind == "native":
            raise OSError(28, "inotify watch limit reached")
        return real(self, kind)

    monkeypatch.setattr(MailboxWaker, "_start_observer", failing)
    bus = MessageBus(tmp_path, observer="native", poll_interval=0.05)
    try:
        assert bus.waker.kind == "polling"
        timer = threading.Timer(0.05, MessageBus(tmp_path).send, ("x", "alice", "hi"))
        timer.start()
        assert bus.wait("alice", 5)
        timer.join()
    finally:
        bus.close()


@pytest.mark.parametrize("observer", ["native", "polling"])
def test_events_ignore_other_files_and_reading(tmp_path: Path, observer: str) -> None:
    bus = MessageBus(tmp_path, observer=observer, poll_interval=0.05)
    m = bus.send("main", "alice", "x")
    with MailboxWaker(tmp_path, observer=observer, poll_interval=0.05) as w:
        ev = w.event("alice")
        time.sleep(0.3)
        ev.clear()
        for _ in range(5):  # reading and acking must not wake the reader itself
            bus.receive("alice")
        bus.ack("alice", m.id)
        (tmp_path / "notes.txt").write_text("unrelated")
        (tmp_path / "alice.jsonl.lock").touch()
        time.sleep(0.3)
        assert not ev.is_set()
        bus.send("main", "alice", "y")
        assert ev.wait(5)
    bus.close()


def test_stop_is_idempotent_and_wakes_waiters(tmp_path: Path) -> None:
    w = MailboxWaker(tmp_path).start()
    assert w.running
    seen = w.sequence("alice")
    timer = threading.Timer(0.05, w.stop)
    timer.start()
    assert w.wait_for_change("alice", seen, 5)
    timer.join()
    w.stop()
    assert not w.running


def _child_waits(bus: MessageBus, out: str) -> None:
    # The bus (and its started waker) came from the parent through fork.
    woke = bus.wait("alice", 5)
    Path(out).write_text(json.dumps({"woke": woke, "new_waker": bus.waker.running}))


@pytest.mark.timeout(20)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork start method")
def test_bus_makes_a_fresh_waker_after_fork(tmp_path: Path) -> None:
    bus = MessageBus(tmp_path / "mb")
    assert bus.waker.running  # started in the parent before the fork
    out = str(tmp_path / "out.json")
    p = mp.get_context("fork").Process(target=_child_waits, args=(bus, out), daemon=True)
    p.start()
    try:
        time.sleep(0.3)
        MessageBus(tmp_path / "mb").send("main", "alice", "hello child")
        p.join(10)
        assert p.exitcode == 0
        assert json.loads(Path(out).read_text()) == {"woke": True, "new_waker": True}
    finally:
        if p.is_alive():
            p.kill()
        p.join(5)
        bus.close()
    assert p.pid is not None and not psutil.pid_exists(p.pid)
