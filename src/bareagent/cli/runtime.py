"""Open a top-level session together with its process runtime, and close both."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bareagent.config import Config
from bareagent.core.notifications import Notification
from bareagent.core.session import Session, build_session, guard_from_config
from bareagent.orchestrator.runtime import ProcessRuntime
from bareagent.orchestrator.team import Team

_TEAM_ATTR = "_bareagent_team"


def session_team(session: Session) -> Team | None:
    """The team handle `open_session` attached to a session (the REPL's `/team` uses it)."""
    team = getattr(session, _TEAM_ATTR, None)
    return team if isinstance(team, Team) else None


@contextmanager
def open_session(
    workspace: Path,
    config: Config,
    *,
    ask_user_fn: Callable[[Any], bool] | None = None,
    owner: str = "main",
    detach_teammates: bool = True,
) -> Iterator[Session]:
    """Yield a session whose jobs and subagents are supervised worker processes.

    The runtime starts first: it forks its single-threaded spawner helper before the
    provider's HTTP client or any watcher thread exists (see docs/processes.md).
    On exit every non-detached worker of this session is stopped; teammates it spawned
    keep running unless `detach_teammates` is False. Its team inbox (`main`) is drained
    into the notifications.
    """
    guard = guard_from_config(config, ask_user_fn=ask_user_fn)
    runtime = ProcessRuntime(workspace, config, guard, owner=owner)
    # Teammates are normally detached: they belong to the workspace and outlive this session.
    team = Team(
        workspace,
        config,
        guard,
        agent=owner,
        supervisor=runtime.supervisor,
        detach_teammates=detach_teammates,
    )

    def notifications() -> list[Notification]:
        return [*runtime.drain_notifications(), *team.drain_notifications()]

    try:
        session = build_session(
            workspace,
            config,
            guard=guard,
            background_manager=runtime.jobs,
            subagent_runner=runtime.subagents,
            notifications=notifications,
            team_handlers=team.handlers(),
        )
        setattr(session, _TEAM_ATTR, team)
        yield session
    finally:
        team.close()
        runtime.shutdown()
