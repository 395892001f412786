"""The per-workspace state root: registry, job results, logs, outside the workspace."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

HOME_ENV = "BAREAGENT_HOME"
STATE_SUBDIRS = ("workers", "jobs", "subagents", "logs")
_SLUG_MAX = 40


def workspace_slug(workspace: Path) -> str:
    """A filesystem-safe short name from the workspace directory name."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", workspace.name).strip("-.")
    return slug[:_SLUG_MAX] or "workspace"


def workspace_hash(workspace: Path) -> str:
    """Short sha256 of the resolved workspace path (distinguishes equal dir names)."""
    return hashlib.sha256(str(workspace).encode("utf-8")).hexdigest()[:12]


def state_base() -> Path:
    """`$BAREAGENT_HOME`, else the platform user state dir."""
    home = os.environ.get(HOME_ENV, "").strip()
    if home:
        return Path(home).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_state_dir("bareagent")).resolve()


def state_root(workspace: str | Path) -> Path:
    """`<base>/workspaces/<slug>-<hash>/`; refuses a root inside the workspace."""
    ws = Path(workspace).expanduser().resolve()
    root = state_base() / "workspaces" / f"{workspace_slug(ws)}-{workspace_hash(ws)}"
    # File tools and sandboxed commands may write anywhere in the workspace; a state root
    # in there would let them forge registry records and job results.
    if root == ws or root.is_relative_to(ws):
        raise ValueError(
            f"state root {root} is inside the workspace {ws}; set {HOME_ENV} elsewhere"
        )
    return root


def ensure_state_root(workspace: str | Path) -> Path:
    """Compute the state root and create its subdirectories (owner-only permissions)."""
    root = state_root(workspace)
    for sub in ("", *STATE_SUBDIRS):
        (root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    return root


def write_json_atomic(path: Path, data: Any, *, durable: bool = False) -> None:
    """Write JSON through a temp file in the same directory and `os.replace` it.

    `durable` adds an fsync (results must survive a machine crash; registry records,
    written often and recomputable, need only atomicity).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1, sort_keys=True)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
