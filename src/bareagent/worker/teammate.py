"""Teammate worker: an autonomous agent process that reads its mail first, then claims tasks.

The loop (see docs/team.md):

1. **Mail first.** Every unread message in `mailbox/team/<name>.jsonl`, in order; each
   is acknowledged after it was handled (exactly-once per docs/mailbox.md). Mail older
   than this teammate's start is acknowledged and ignored, so an old SHUTDOWN cannot
   kill a new incarnation. SHUTDOWN → answer `ack` and exit 0. PLAN_APPROVAL → a review
   turn whose final text is the response. Other requests → a turn whose final text is
   the response. Responses and broadcasts → a turn, no reply.
2. **Then one ready task** from `.tasks.json`, claimed with
   `update(status="in_progress", expected_status="pending")` (a conflict means another
   teammate won: try the next one), run as a turn, then marked done or failed.
3. **Sleep** until the mailbox or the task file changes (watchdog), re-checking every
   30 s as insurance against lost events.

Mail arriving during a turn is injected at the turn's next loop iteration through the
session's notification source; a SHUTDOWN arriving then aborts the turn at that point.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bareagent.core.notifications import Notification
    from bareagent.mailbox import Message
    from bareagent.orchestrator.spec import SpawnSpec
    from bareagent.planning.tasks import TaskManager
    from bareagent.worker.common import WorkerContext

log = logging.getLogger(__name__)

RECHECK_SECONDS = 30.0
SHUTDOWN_ACK = "ack"
EXIT_TERMINATED = 143
MAX_REPORT_CHARS = 2000
MAX_LOOP_FAILURES = 5


class ShutdownRequested(Exception):
    """A SHUTDOWN arrived mid-turn: the turn stops at its next loop iteration."""


class Terminated(BaseException):
    """SIGTERM: unwind (releasing the claimed task) and exit."""


def review_prompt(sender: str, plan: str) -> str:
    """The turn a PLAN_APPROVAL request becomes."""
    return (
        f"Review this plan from {sender}. Check it against the code where that helps, "
        "then answer APPROVE or REJECT with reasons. Your final answer is sent back to "
        f"{sender} as the review.\n\n<plan>\n{plan}\n</plan>"
    )


def task_prompt(task: dict[str, Any]) -> str:
    """The turn a claimed task becomes."""
    description = str(task.get("description") or "").strip()
    body = f"\n{description}\n" if description else "\n"
    return (
        f"Task {task['id']}: {task['title']}{body}\n"
        "You claimed this task from the shared task list. Do it now; your final answer is "
        "its summary. The task is marked done when you finish, failed if you cannot."
    )


def teammate_system_prompt(
    workspace: Path, mode: str, name: str, role: str, instructions: str
) -> str:
    """The base prompt plus who this teammate is and how the team works."""
    from bareagent.core.prompts import main_system_prompt

    extra = (
        f"You are teammate '{name}' ({role}) in a team of agents sharing this workspace.\n"
        f"{instructions}\n\n"
        "You work autonomously. Messages from other agents ('main' is the user's session) "
        "and tasks you claim from the shared task list arrive as user prompts; your final "
        "answer is the reply. Mail that arrives while you work is shown to you as "
        "<background-notifications>. Use team_send to message another agent and "
        "team_list to see the team. To ask a teammate to review a plan, team_send it the "
        'JSON {"protocol": "plan_approval", "content": "<your plan>"}.'
    )
    skills = ""
    try:
        from bareagent.planning.skills import SkillLoader

        skills = SkillLoader().describe()
    except (OSError, ValueError) as exc:
        log.warning("skills unavailable: %s", exc)
    return main_system_prompt(workspace, mode, skills, extra)


def claim_next(tasks: TaskManager, ready: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Claim the first of `ready` that is still pending; None when others got them all.

    `update(..., expected_status="pending")` is a compare-and-set under the task store's
    file lock: of several teammates claiming one task exactly one succeeds, the others
    get TaskClaimConflict and move on to the next task.
    """
    from bareagent.planning.tasks import TaskClaimConflict, TaskStoreError

    for task in ready:
        try:
            return tasks.update(task["id"], status="in_progress", expected_status="pending")
        except TaskClaimConflict:
            log.info("task %s was claimed by someone else first", task["id"])
        except (ValueError, TaskStoreError) as exc:
            log.warning("cannot claim task %s: %s", task["id"], exc)
    return None


class TeammateWorker:
    """The state of one teammate process (built from its spawn spec only)."""

    def __init__(self, spec: SpawnSpec) -> None:
        import psutil

        from bareagent.orchestrator.registry import Registry
        from bareagent.orchestrator.runtime import ProcessRuntime
        from bareagent.permission import PermissionGuard
        from bareagent.planning.tasks import TaskManager
        from bareagent.worker.subagent import child_config

        payload = spec.payload
        self.spec = spec
        self.name = spec.name
        self.worker_id = spec.worker_id
        self.workspace = Path(spec.workspace)
        self.role = str(payload.get("role") or "teammate")
        self.instructions = str(payload.get("system_prompt") or "")
        self.not_before = float(payload["not_before"])
        self.config = child_config(spec)
        self.guard: Any = PermissionGuard.from_spec(spec.permission)
        self.guard.fail_closed = True  # no terminal in a worker: never wait for an answer
        # First, while this process still has a single thread: the helper for this
        # teammate's own jobs and subagents is forked now (see docs/processes.md).
        self.runtime = ProcessRuntime(
            self.workspace,
            self.config,
            self.guard,
            owner=spec.worker_id,
            depth=spec.depth,
            tools=spec.tools,
            state_root=spec.state_root,
        )
        self.registry = Registry(spec.state_root)
        self.tasks = TaskManager(self.workspace / ".tasks.json")
        self.create_time = psutil.Process().create_time()
        self.status = ""
        self.stopping = False
        self.shutdown_pending = False
        self.current_task: str | None = None
        self._peek: int | None = None
        self._injected: set[str] = set()
        self._tasks_warned = False
        self._watch: Any = None
        try:
            self._build_session()
        except BaseException:
            self.runtime.shutdown()
            raise

    def _build_session(self) -> None:
        from bareagent.core.session import build_session
        from bareagent.orchestrator.team import Team

        self.team = Team(
            self.workspace,
            self.config,
            self.guard,
            agent=self.name,
            supervisor=self.runtime.supervisor,
            state_root=self.spec.state_root,
        )
        self.bus = self.team.bus
        self.fsm = self.team.fsm
        self.session = build_session(
            self.workspace,
            self.config,
            guard=self.guard,
            allowed_tools=list(self.spec.tools) if self.spec.tools is not None else None,
            system_prompt=teammate_system_prompt(
                self.workspace, self.guard.mode.value, self.name, self.role, self.instructions
            ),
            depth=self.spec.depth,
            background_manager=self.runtime.jobs,
            subagent_runner=self.runtime.subagents,
            team_handlers=self.team.handlers(),
            notifications=self._notifications,
        )

    # -- life cycle ----------------------------------------------------------------------

    def run(self) -> int:
        """The autonomous loop; returns the exit code (0 after SHUTDOWN)."""
        from bareagent.worker.task_watch import TaskFileWatch

        signal.signal(signal.SIGTERM, self._on_sigterm)
        code = 0
        try:
            waker = self.bus.waker
            self._watch = TaskFileWatch(self.workspace, lambda: waker.notify(self.name)).start()
            log.info("teammate %s (%s) is up; mode %s", self.name, self.role, self.guard.mode.value)
            self._loop()
            log.info("teammate %s stops", self.name)
        except (Terminated, KeyboardInterrupt):
            log.warning("teammate %s terminated", self.name)
            code = EXIT_TERMINATED
        finally:
            # Cleanup is short; a second SIGTERM must not cut it (SIGKILL still would).
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self._cleanup()
        return code

    def _on_sigterm(self, _signum: int, _frame: FrameType | None) -> None:
        raise Terminated()

    def _cleanup(self) -> None:
        if self.current_task is not None:
            self._release(self.current_task)
        if self._watch is not None:
            with contextlib.suppress(Exception):
                self._watch.stop()
        with contextlib.suppress(Exception):
            self.runtime.shutdown()
        with contextlib.suppress(Exception):
            self.bus.close()

    def _loop(self) -> None:
        waker = self.bus.waker
        failures = 0
        while not self.stopping:
            # Read before looking, so a change between the look and the sleep still wakes us.
            seen = waker.sequence(self.name)
            try:
                if self._process_mail() or self.stopping or self._work_on_task():
                    failures = 0
                    continue
                self._set_status("idle")
            except Exception:
                # e.g. a transient filesystem error: retry with a pause, give up if it stays.
                failures += 1
                log.exception("teammate loop failed (%d in a row)", failures)
                if failures >= MAX_LOOP_FAILURES:
                    raise
                waker.wait_for_change(self.name, seen, min(RECHECK_SECONDS, 2.0**failures))
                continue
            failures = 0
            waker.wait_for_change(self.name, seen, RECHECK_SECONDS)

    def _set_status(self, status: str) -> None:
        if status == self.status:
            return
        self.status = status
        self.registry.update(
            self.worker_id, status=status, pid=os.getpid(), create_time=self.create_time
        )

    # -- mail ----------------------------------------------------------------------------

    def _process_mail(self) -> bool:
        messages = self.bus.receive(self.name)
        for message in messages:
            self._handle(message)
            self.bus.ack(self.name, message.id)
            self._injected.discard(message.id)
            if self.stopping:
                break
        return bool(messages)

    def _handle(self, message: Message) -> None:
        from bareagent.mailbox import Protocol
        from bareagent.orchestrator.team_mail import content_text, mail_line

        if message.timestamp < self.not_before:
            log.info(
                "ignoring %s %s from %s: sent before this teammate started",
                message.msg_type,
                message.id,
                message.from_agent,
            )
            return
        protocol, text = content_text(message)
        if protocol is Protocol.SHUTDOWN:
            if message.msg_type == "response":
                return
            log.info("SHUTDOWN from %s", message.from_agent)
            if message.msg_type == "request":
                self._reply(message, SHUTDOWN_ACK)
            self.stopping = True
            return
        if self.shutdown_pending:
            if message.msg_type == "request":
                self._reply(message, f"Not handled: {self.name} is shutting down.")
            return
        if message.id in self._injected and message.msg_type != "request":
            return  # already shown to the model during a turn
        log.info("%s %s from %s", message.msg_type, message.id, message.from_agent)
        if message.msg_type == "request":
            if protocol is Protocol.PLAN_APPROVAL:
                prompt = review_prompt(message.from_agent, text)
            else:
                prompt = f"Message from {message.from_agent}:\n{text}"
            self._reply(message, self._safe_turn(prompt))
        else:
            self._safe_turn(mail_line(message))

    def _reply(self, message: Message, text: str) -> None:
        try:
            self.fsm.respond(message, text)
        except ValueError as exc:  # e.g. the sender was unregistered meanwhile
            log.warning("cannot answer %s from %s: %s", message.id, message.from_agent, exc)

    def _notifications(self) -> list[Notification]:
        """Finished jobs/subagents, plus mail that arrived since the turn started."""
        notes = list(self.runtime.drain_notifications())
        if self._peek is not None:
            notes.extend(self._mail_notes())
        return notes

    def _mail_notes(self) -> list[Notification]:
        from bareagent.mailbox import Protocol, decode
        from bareagent.orchestrator.team_mail import mail_line, mail_notification

        assert self._peek is not None
        # Peek without moving the cursor: the message is still handled (answered, acked)
        # in order by the mail loop after the turn.
        messages, self._peek = self.bus.read_from(self.name, self._peek)
        notes: list[Notification] = []
        for message in messages:
            if message.timestamp < self.not_before:
                continue
            protocol, _ = decode(message)
            if protocol is Protocol.SHUTDOWN:
                if message.msg_type == "response":
                    continue
                self.shutdown_pending = True
                raise ShutdownRequested(message.id)
            self._injected.add(message.id)
            notes.append(mail_notification(message, mail_line(message)))
        if notes:
            log.info("injected %d message(s) into the running turn", len(notes))
        return notes

    # -- turns ---------------------------------------------------------------------------

    def _turn(self, prompt: str) -> str:
        self._set_status("running")
        self._peek = self.bus.end_offset(self.name)
        try:
            from bareagent.worker.common import tool_event_logger

            return self.session.run_turn(prompt, on_event=tool_event_logger(log))
        finally:
            self._peek = None

    def _safe_turn(self, prompt: str) -> str:
        """A turn whose failure becomes the reply text instead of ending the teammate."""
        from bareagent.core.loop import LLMCallError

        try:
            return self._turn(prompt)
        except ShutdownRequested:
            return f"Interrupted: {self.name} is shutting down."
        except LLMCallError as exc:
            log.warning("turn failed: %s", exc)
            return f"Error: {exc}"
        except Exception as exc:
            log.exception("turn failed")
            return f"Error: {type(exc).__name__}: {exc}"

    # -- tasks ---------------------------------------------------------------------------

    def _work_on_task(self) -> bool:
        from bareagent.planning.tasks import TaskStoreError

        if self.shutdown_pending:
            return False
        try:
            ready = self.tasks.ready_tasks()
        except (TaskStoreError, OSError) as exc:
            if not self._tasks_warned:
                log.warning("cannot read the task list: %s", exc)
                self._tasks_warned = True
            return False
        self._tasks_warned = False
        claimed = claim_next(self.tasks, ready)
        if claimed is None:
            return False
        self._run_task(claimed)
        return True

    def _run_task(self, task: dict[str, Any]) -> None:
        from bareagent.core.loop import LLMCallError
        from bareagent.planning.tasks import TaskClaimConflict, TaskStoreError

        task_id = str(task["id"])
        self.current_task = task_id
        self.registry.update(self.worker_id, current_task=task_id)
        log.info("claimed task %s: %s", task_id, task.get("title"))
        status: str | None = "done"
        try:
            summary = self._turn(task_prompt(task))
        except ShutdownRequested:
            status, summary = None, ""
            self._release(task_id)
        except LLMCallError as exc:
            status, summary = "failed", str(exc)
        except Exception as exc:
            log.exception("task %s failed", task_id)
            status, summary = "failed", f"{type(exc).__name__}: {exc}"
        if status is not None:
            try:
                self.tasks.update(task_id, status=status, expected_status="in_progress")
            except (TaskClaimConflict, ValueError, TaskStoreError) as exc:
                log.warning("cannot mark task %s %s: %s", task_id, status, exc)
            log.info("task %s %s", task_id, status)
            self._report(task, status, summary)
        self.current_task = None
        self.registry.update(self.worker_id, current_task=None, last_task=task_id)

    def _release(self, task_id: str) -> None:
        """Give an unfinished task back to the others (`in_progress` → `pending`)."""
        from bareagent.planning.tasks import TaskClaimConflict, TaskStoreError

        # Forget the claim first: whoever kills us must never "release" a task that
        # another teammate claimed after we gave it back.
        self.current_task = None
        with contextlib.suppress(Exception):
            self.registry.update(self.worker_id, current_task=None)
        try:
            self.tasks.update(task_id, status="pending", expected_status="in_progress")
            log.info("released task %s", task_id)
        except (TaskClaimConflict, ValueError, TaskStoreError) as exc:
            log.warning("cannot release task %s: %s", task_id, exc)

    def _report(self, task: dict[str, Any], status: str, summary: str) -> None:
        """Tell the user's session what became of a task (informational, no reply)."""
        text = f"Task {task['id']} ({task.get('title')}) {status}: {summary}"
        if len(text) > MAX_REPORT_CHARS:
            text = text[:MAX_REPORT_CHARS] + "…[truncated]"
        try:
            self.bus.broadcast(self.name, text, ["main"])
        except (OSError, ValueError) as exc:
            log.warning("cannot report task %s to main: %s", task["id"], exc)


def main(spec: SpawnSpec, ctx: WorkerContext) -> int:
    """Worker entry: build the teammate from its spec and run its loop."""
    try:
        worker = TeammateWorker(spec)
    except Exception as exc:
        log.exception("teammate %s could not start", spec.name)
        from bareagent.orchestrator.registry import Registry

        with contextlib.suppress(Exception):
            Registry(spec.state_root).update(spec.worker_id, error=f"{type(exc).__name__}: {exc}")
        return 1
    return worker.run()
