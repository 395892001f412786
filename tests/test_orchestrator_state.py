"""State root, live registry (with `lost` detection) and the durable result store."""

# ruff: noqa: F811  (pytest fixtures imported from test_orchestrator_helpers)

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bareagent.orchestrator.registry import (
    Registry,
    WorkerRecord,
    new_job_id,
    new_worker_id,
    process_matches,
)
from bareagent.orchestrator.results import ResultStore
from bareagent.orchestrator.state import ensure_state_root, state_root, workspace_slug
from test_orchestrator_helpers import home, marker, no_leftovers, workspace  # noqa: F401


def _record(
    worker_id: str, pid: int | None, create_time: float | None, **kw: object
) -> WorkerRecord:
    values: dict[str, object] = {
        "id": worker_id,
        "kind": "job",
        "name": worker_id,
        "pid": pid,
        "create_time": create_time,
        "parent": "main",
        "owner_pid": os.getpid(),
        "cwd": "/tmp",
        "status": "running",
        "started_at": time.time(),
    }
    values.update(kw)
    return WorkerRecord(**values)  # type: ignore[arg-type]


def test_state_root_is_outside_workspace_under_home(home: Path, workspace: Path) -> None:
    root = ensure_state_root(workspace)
    assert root.parent == home.resolve() / "workspaces"
    assert root.name.startswith("ws-") and len(root.name) == len("ws-") + 12
    assert not root.is_relative_to(workspace.resolve())
    for sub in ("workers", "jobs", "subagents", "logs"):
        assert (root / sub).is_dir()
    # Same dir name elsewhere -> different root; same path -> same root.
    other = workspace.parent / "x" / "ws"
    other.mkdir(parents=True)
    assert state_root(other) != root
    assert state_root(workspace / ".") == root


def test_state_root_refuses_home_inside_workspace(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BAREAGENT_HOME", str(workspace / ".state"))
    with pytest.raises(ValueError, match="inside the workspace"):
        state_root(workspace)


def test_state_root_without_home_uses_platform_dir(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BAREAGENT_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    root = state_root(workspace)
    assert "bareagent" in root.parts and root.parent.name == "workspaces"


def test_slug_is_sanitised() -> None:
    assert workspace_slug(Path("/a/my project!$")) == "my-project"
    assert workspace_slug(Path("/a/...")) == "workspace"


def test_ids() -> None:
    job = new_job_id()
    assert len(job) == 8 and job.isalnum()
    assert new_worker_id("subagent").startswith("sub-")
    assert len({new_job_id() for _ in range(200)}) == 200


def test_registry_roundtrip_and_extras(home: Path, workspace: Path) -> None:
    reg = Registry(ensure_state_root(workspace))
    me = psutil.Process()
    rec = _record("job-a", me.pid, me.create_time(), extra={"command": "make"})
    reg.write(rec)
    data = json.loads(reg.path("job-a").read_text())
    assert data["command"] == "make" and data["kind"] == "job"
    got = reg.get("job-a")
    assert got is not None and got.status == "running" and got.extra["command"] == "make"
    reg.update("job-a", status="idle", note="x")
    got = reg.get("job-a")
    assert got is not None and got.status == "idle" and got.extra["note"] == "x"
    assert [r.id for r in reg.list()] == ["job-a"]
    reg.finish("job-a", 0)
    assert reg.list() == []
    assert [r.status for r in reg.list(include_finished=True)] == ["exited"]


@pytest.mark.timeout(20)
def test_killed_worker_reads_lost(home: Path, workspace: Path, no_leftovers: None) -> None:
    reg = Registry(ensure_state_root(workspace))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ps = psutil.Process(proc.pid)
    reg.write(_record("job-k", proc.pid, ps.create_time()))
    assert reg.get("job-k").status == "running"  # type: ignore[union-attr]
    proc.kill()
    # Not reaped yet: a zombie nobody reaped is lost too.
    assert _wait(lambda: ps.status() == psutil.STATUS_ZOMBIE)
    assert reg.get("job-k").status == "lost"  # type: ignore[union-attr]
    proc.wait()
    assert reg.get("job-k").status == "lost"  # type: ignore[union-attr]
    assert [r.status for r in reg.list()] == ["lost"]


def test_reused_pid_reads_lost(home: Path, workspace: Path) -> None:
    reg = Registry(ensure_state_root(workspace))
    me = psutil.Process()
    reg.write(_record("job-r", me.pid, me.create_time() - 100.0))
    assert reg.get("job-r").status == "lost"  # type: ignore[union-attr]
    assert not process_matches(me.pid, me.create_time() - 100.0)
    assert process_matches(me.pid, me.create_time())


def test_corrupt_records_are_skipped(
    home: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reg = Registry(ensure_state_root(workspace))
    me = psutil.Process()
    reg.write(_record("job-ok", me.pid, me.create_time()))
    (reg.directory / "bad1.json").write_text("{not json")
    (reg.directory / "bad2.json").write_text("[1, 2]")
    (reg.directory / "bad3.json").write_text(json.dumps({"id": "bad3", "status": "weird"}))
    with caplog.at_level(logging.WARNING):
        listed = reg.list(include_finished=True)
    assert [r.id for r in listed] == ["job-ok"]
    assert "corrupt worker record" in caplog.text


def test_result_store_drains_exactly_once(home: Path, workspace: Path) -> None:
    store = ResultStore(ensure_state_root(workspace) / "jobs")
    for i, owner in enumerate(["main", "main", "alice"]):
        store.create(
            {"id": f"j{i}", "status": "running", "owner": owner, "created_at": i}, lambda e: None
        )
    assert store.drain("main") == []
    assert store.finalize("j0", "done", result="ok", exit_code=0) is not None
    assert store.finalize("j0", "failed", error="late") is None  # final stays final
    store.finalize("j2", "done", result="alice's")
    drained = store.drain("main")
    assert [r["id"] for r in drained] == ["j0"] and drained[0]["result"] == "ok"
    assert store.drain("main") == []
    assert ResultStore(store.directory).drain("main") == []  # a new instance agrees
    assert [r["id"] for r in store.drain("alice")] == ["j2"]
    (store.directory / "zz.json").write_text("garbage")
    assert len(store.list()) == 3


def _wait(predicate: object, timeout: float = 5.0) -> bool:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False
