"""Open a top-level session together with its process runtime, and close both."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bareagent.config import Config
from bareagent.core.session import Session, build_session, guard_from_config
from bareagent.orchestrator.runtime import ProcessRuntime


@contextmanager
def open_session(
    workspace: Path,
    config: Config,
    *,
    ask_user_fn: Callable[[Any], bool] | None = None,
    owner: str = "main",
) -> Iterator[Session]:
    """Yield a session whose jobs and subagents are supervised worker processes.

    The runtime starts first: it forks its single-threaded spawner helper before the
    provider's HTTP client or any watcher thread exists (see docs/processes.md).
    On exit every non-detached worker of this session is stopped.
    """
    guard = guard_from_config(config, ask_user_fn=ask_user_fn)
    runtime = ProcessRuntime(workspace, config, guard, owner=owner)
    try:
        yield build_session(
            workspace,
            config,
            guard=guard,
            background_manager=runtime.jobs,
            subagent_runner=runtime.subagents,
            notifications=runtime.drain_notifications,
        )
    finally:
        runtime.shutdown()
