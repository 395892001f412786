"""The team, owner side: spawn, message, list, shut down and ask teammates for reviews.

`Team` backs the `team_spawn` / `team_send` / `team_list` tools, `bareagent team ...` and
the REPL's `/team`. Teammates are **detached** workers (unless the owner passes
`detach_teammates=False`, as the demo does): they belong to the workspace, not to the
process that started them, and run until shut down or killed. Whether one is
running is read from the live registry, so every process of the workspace agrees.
See docs/team.md.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from bareagent.config import Config
from bareagent.core.notifications import Notification
from bareagent.mailbox import MAIN_AGENT, Message, MessageBus, Protocol, ProtocolFSM, decode
from bareagent.orchestrator.reaping import record_exit
from bareagent.orchestrator.registry import Registry, WorkerRecord, new_worker_id, process_matches
from bareagent.orchestrator.spec import GuardLike, SpawnSpec, all_tool_names, child_guard
from bareagent.orchestrator.state import ensure_state_root
from bareagent.orchestrator.supervisor import Supervisor
from bareagent.orchestrator.team_mail import (
    TEAM_SESSION,
    TeamInbox,
    ack_if_next,
    content_text,
    open_team_bus,
)
from bareagent.orchestrator.teammates import (
    TeamError,
    TeammateDefinition,
    TeammateManager,
    unknown_teammate,
)

log = logging.getLogger(__name__)

DEFAULT_SHUTDOWN_TIMEOUT = 10.0
DEFAULT_REVIEW_TIMEOUT = 120.0
SPAWN_LOCK_TIMEOUT = 60.0
REAPER_WAIT_SECONDS = 3.0
_POLL = 0.05


def build_teammate_spec(
    definition: TeammateDefinition,
    *,
    config: Config,
    parent_guard: GuardLike,
    workspace: str | Path,
    state_root: str | Path,
    worker_id: str,
    parent_id: str = MAIN_AGENT,
    owner_create_time: float | None = None,
    session_id: str = "",
    detached: bool = True,
) -> SpawnSpec:
    """A teammate's spec: fail-closed, never less strict than the spawner; detached unless
    its owner asks to take it down with itself (the demo does)."""
    from bareagent.planning.agent_types import resolve_agent_type

    guard = child_guard(parent_guard, resolve_agent_type("general-purpose"), background=True)
    provider = {**dict(config.provider), **definition.provider_config}
    spec = SpawnSpec(
        kind="teammate",
        name=definition.name,
        workspace=str(Path(workspace).resolve()),
        worker_id=worker_id,
        state_root=str(state_root),
        depth=0,
        permission=dict(guard.to_spec()),
        fail_closed=True,
        tools=all_tool_names(),
        agent_type=None,
        provider_config=provider,
        settings=copy.deepcopy(config.data),
        parent_id=parent_id,
        owner_pid=os.getpid(),
        owner_create_time=owner_create_time,
        session_id=session_id,
        detached=detached,
        payload={
            "role": definition.role,
            "system_prompt": definition.system_prompt,
            # Mail older than this is from before the teammate existed (e.g. an old
            # SHUTDOWN): it is acknowledged and ignored.
            "not_before": time.time(),
            "team_session": TEAM_SESSION,
        },
    )
    spec.validate()
    return spec


def _gone(record: WorkerRecord) -> bool:
    return not process_matches(record.pid, record.create_time)


def _wait_gone(records: builtins.list[WorkerRecord], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not all(_gone(r) for r in records):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)
    return True


class Team:
    """One agent's handle on the workspace's team (`agent` is `main` or a teammate)."""

    def __init__(
        self,
        workspace: str | Path,
        config: Config | None = None,
        guard: GuardLike | None = None,
        *,
        agent: str = MAIN_AGENT,
        supervisor: Supervisor | None = None,
        state_root: str | Path | None = None,
        detach_teammates: bool = True,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self.config = config
        self.guard = guard
        self.agent = agent
        self._supervisor = supervisor
        self._own_supervisor = False
        if state_root is not None:
            self.state_root = Path(state_root)
        elif supervisor is not None:
            self.state_root = supervisor.state_root
        else:
            self.state_root = ensure_state_root(self.workspace)
        self.manager = TeammateManager(self.workspace)
        self.registry = Registry(self.state_root)
        self._bus: MessageBus | None = None
        self._fsm: ProtocolFSM | None = None
        self._inbox: TeamInbox | None = None
        # False: teammates spawned here die with this owner, like its jobs and subagents.
        self.detach_teammates = detach_teammates

    # -- plumbing ----------------------------------------------------------------------

    @property
    def bus(self) -> MessageBus:
        """The team's message bus (created on first use)."""
        if self._bus is None:
            self._bus = open_team_bus(self.state_root, self.manager.names)
        return self._bus

    @property
    def fsm(self) -> ProtocolFSM:
        """Protocol requests/responses sent as this agent."""
        if self._fsm is None:
            self._fsm = ProtocolFSM(self.bus, self.agent)
        return self._fsm

    @property
    def inbox(self) -> TeamInbox:
        """This agent's inbox as the user's session drains it."""
        if self._inbox is None:
            self._inbox = TeamInbox(self.bus, self.agent)
        return self._inbox

    @property
    def supervisor(self) -> Supervisor:
        """The supervisor teammates are spawned with (own one started on first use)."""
        if self._supervisor is None:
            self._supervisor = Supervisor(self.workspace, state_root=self.state_root)
            self._own_supervisor = True
        self._supervisor.start()
        return self._supervisor

    def close(self) -> None:
        """Release the bus; a supervisor created here is shut down (teammates stay)."""
        if self._own_supervisor and self._supervisor is not None:
            self._supervisor.shutdown()
        if self._bus is not None:
            self._bus.close()

    def __enter__(self) -> Team:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- registry ----------------------------------------------------------------------

    def records(self, name: str) -> builtins.list[WorkerRecord]:
        """Every registry record of teammate `name`, oldest first (liveness computed)."""
        return [
            r
            for r in self.registry.list(include_finished=True)
            if r.kind == "teammate" and r.name == name
        ]

    def live_records(self, name: str) -> builtins.list[WorkerRecord]:
        """Records of `name` whose process is running (in any process of the workspace)."""
        return [r for r in self.records(name) if r.is_live_status]

    def is_running(self, name: str) -> bool:
        """True when a live teammate process has this name."""
        return bool(self.live_records(name))

    # -- the three tools ---------------------------------------------------------------

    def spawn(self, name: str) -> str:
        """Start teammate `name` as a worker, detached by default (tool `team_spawn`)."""
        definition = self.manager.get(name)
        if self.config is None or self.guard is None:
            raise TeamError("this team handle cannot spawn teammates (no config or guard)")
        lock_path = self.state_root / "team" / "spawn.lock"
        lock_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = FileLock(str(lock_path), timeout=SPAWN_LOCK_TIMEOUT)
        try:
            lock.acquire()
        except Timeout:
            raise TeamError(f"another process is spawning teammates ({lock_path} busy)") from None
        try:
            # Checked under the lock: two spawners racing cannot both start `name`.
            if self.is_running(name):
                return f"Teammate {name} is already running."
            # The helper is forked before the provider's client exists (fork safety).
            supervisor = self.supervisor
            self._check_provider(definition)
            spec = build_teammate_spec(
                definition,
                config=self.config,
                parent_guard=self.guard,
                workspace=self.workspace,
                state_root=self.state_root,
                worker_id=new_worker_id("teammate"),
                parent_id=supervisor.parent_name,
                owner_create_time=supervisor.owner_create_time,
                session_id=supervisor.session_id,
                detached=self.detach_teammates,
            )
            handle = supervisor.spawn(spec, extra={"role": definition.role})
        finally:
            lock.release()
        log.info("spawned teammate %s (%s, pid %s)", name, handle.id, handle.pid)
        return f"Spawned teammate {name} (worker {handle.id}, pid {handle.pid})."

    def _check_provider(self, definition: TeammateDefinition) -> None:
        """Fail here, in one line, rather than in a detached worker nobody watches."""
        from bareagent.provider import ProviderError, create_provider

        assert self.config is not None
        try:
            create_provider({**dict(self.config.provider), **definition.provider_config})
        except ProviderError as exc:
            raise TeamError(f"cannot start teammate {definition.name}: {exc}") from None

    def send(self, to_agent: str, content: str) -> str:
        """Send plain mail (tool `team_send`); unknown or stopped recipients are errors."""
        message = self.send_message(to_agent, content)
        return f"Sent message {message.id} to {to_agent}"

    def send_message(self, to_agent: str, content: str) -> Message:
        """`send`, returning the message."""
        if not isinstance(content, str) or not content.strip():
            raise TeamError("content must not be empty")
        if to_agent == self.agent:
            raise TeamError("cannot send a message to yourself")
        protocol, _ = decode(content)
        if protocol is Protocol.SHUTDOWN:
            raise TeamError("stop teammates with `bareagent team shutdown NAME`, not by mail")
        if to_agent != MAIN_AGENT:
            if to_agent not in self.manager.names():
                raise TeamError(unknown_teammate(to_agent))
            if not self.is_running(to_agent):
                # A teammate ignores mail from before its start, so this would be lost.
                raise TeamError(
                    f"Teammate {to_agent} is not running; start it first "
                    f"(`bareagent team spawn {to_agent}`)."
                )
        try:
            return self.bus.send(self.agent, to_agent, content, "request")
        except ValueError as exc:
            raise TeamError(str(exc)) from None

    def list(self) -> builtins.list[dict[str, Any]]:
        """Definitions plus `running`, worker id, pid and status (tool `team_list`)."""
        rows = []
        for definition in self.manager.list():
            records = self.records(definition.name)
            live = [r for r in records if r.is_live_status]
            latest = live[-1] if live else (records[-1] if records else None)
            rows.append(
                {
                    **definition.to_dict(),
                    "running": bool(live),
                    "worker_id": latest.id if latest else None,
                    "pid": latest.pid if latest else None,
                    "status": latest.status if latest else None,
                    "current_task": live[-1].extra.get("current_task") if live else None,
                }
            )
        return rows

    def handlers(self) -> dict[str, Callable[..., Any]]:
        """`team_spawn`, `team_send`, `team_list` for `build_session(team_handlers=...)`."""
        return {
            "team_spawn": lambda name: self.spawn(name),
            "team_send": lambda to_agent, content: self.send(to_agent, content),
            "team_list": lambda: self.list(),
        }

    def drain_notifications(self) -> builtins.list[Notification]:
        """This agent's new mail as notifications (the user's session calls it per turn)."""
        return self.inbox.drain_notifications()

    # -- protocols ---------------------------------------------------------------------

    def review(self, name: str, plan: str, timeout: float = DEFAULT_REVIEW_TIMEOUT) -> str:
        """Send a PLAN_APPROVAL request and return the teammate's review text."""
        self.manager.get(name)
        if not isinstance(plan, str) or not plan.strip():
            raise TeamError("plan must not be empty")
        if not self.is_running(name):
            raise TeamError(
                f"Teammate {name} is not running; start it first (`bareagent team spawn {name}`)."
            )
        request = self.fsm.request(name, Protocol.PLAN_APPROVAL, plan)
        reply = self.fsm.wait_response(request.id, timeout)
        if reply is None:
            raise TeamError(
                f"No review from {name} within {timeout:g} seconds (request {request.id})."
            )
        self._consumed(reply)
        return content_text(reply)[1]

    def wait_reply(self, message_id: str, timeout: float) -> Message | None:
        """The response to a message this agent sent, or None after `timeout` seconds."""
        reply = self.fsm.wait_response(message_id, timeout)
        if reply is not None:
            self._consumed(reply)
        return reply

    def _consumed(self, reply: Message) -> None:
        """The caller showed `reply`: acknowledge it now, or when the inbox reaches it."""
        if not ack_if_next(self.bus, self.agent, reply):
            self.inbox.already_shown(reply.id)

    def shutdown(self, name: str, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> str:
        """SHUTDOWN request, wait up to `timeout` s for the exit, then kill the tree."""
        records = self.live_records(name)
        if name not in self.manager.names() and not records:
            raise TeamError(unknown_teammate(name))
        if not records:
            return f"Teammate {name} is not running."
        request: Message | None = None
        try:
            request = self.fsm.request(
                name, Protocol.SHUTDOWN, f"shutdown requested by {self.agent}"
            )
        except ValueError as exc:  # e.g. unregistered while running: only a kill is left
            log.warning("cannot send SHUTDOWN to %s: %s", name, exc)
        if request is not None and _wait_gone(records, timeout):
            reply = self.fsm.wait_response(request.id, 1.0)
            if reply is not None:
                self._consumed(reply)
            self._settle(records)
            return f"Teammate {name} shut down."
        self.kill(records)
        pids = ", ".join(str(r.pid) for r in records)
        return f"Teammate {name} did not stop within {timeout:g} seconds; killed it (pid {pids})."

    def kill(self, records: builtins.list[WorkerRecord]) -> None:
        """Kill teammate processes (whole trees), record the end, release their tasks."""
        from bareagent.sandbox.process_tree import kill_process_tree

        for record in records:
            self.registry.update(record.id, kill_requested=True)
        for record in records:
            if record.pid is not None and not _gone(record):
                kill_process_tree(record.pid, grace=1.0)
        _wait_gone(records, 5.0)
        self._settle(records)
        self._release_tasks(records)

    def _settle(self, records: builtins.list[WorkerRecord]) -> None:
        """Wait for the reaper to record the exits; record them here if it is gone."""
        deadline = time.monotonic() + REAPER_WAIT_SECONDS
        pending = list(records)
        while pending:
            pending = [
                r
                for r in pending
                if (s := self.registry.read(r.id)) is not None and s.is_live_status
            ]
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(_POLL)
        for record in pending:
            if _gone(record):
                record_exit(self.state_root, "teammate", record.id, None)

    def _release_tasks(self, records: builtins.list[WorkerRecord]) -> None:
        """A killed teammate's claimed task goes back to `pending` for someone else."""
        from bareagent.planning.tasks import TaskClaimConflict, TaskManager, TaskStoreError

        tasks = TaskManager(self.workspace / ".tasks.json")
        for record in records:
            stored = self.registry.read(record.id)
            task_id = stored.extra.get("current_task") if stored is not None else None
            if not isinstance(task_id, str):
                continue
            with contextlib.suppress(TaskClaimConflict, ValueError, TaskStoreError):
                tasks.update(task_id, status="pending", expected_status="in_progress")
                log.info("released task %s of killed teammate %s", task_id, record.name)
            self.registry.update(record.id, current_task=None)


def request_shutdown(workspace: Path, name: str) -> bool:
    """Hook for `bareagent kill`: send SHUTDOWN to a running teammate; True once sent."""
    with Team(workspace) as team:
        if not team.is_running(name):
            return False
        team.fsm.request(name, Protocol.SHUTDOWN, "shutdown requested by `bareagent kill`")
        return True
