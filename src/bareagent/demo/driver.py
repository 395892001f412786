"""Run the demo: a scripted model, a throw-away workspace, real worker processes.

Everything the demo starts lives under one temporary directory (the workspace and the
state root), and it proves on the way out that no process it started is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from bareagent.cli.ops_jobs import collect_jobs
from bareagent.cli.ops_view import collect_rows, ps_plain, ps_table
from bareagent.cli.runtime import open_session, session_team
from bareagent.config import Config, load_config
from bareagent.core.session import Session
from bareagent.demo import scenario
from bareagent.demo.leftovers import descendants, find_leftovers, kill_leftovers
from bareagent.demo.printer import DemoPrinter
from bareagent.demo.project import write_project
from bareagent.demo.safety import SignalGuard, demo_environment
from bareagent.demo.watch import Status, WaitTimeout, Watch, wait_all
from bareagent.orchestrator.registry import Registry
from bareagent.orchestrator.results import FINAL_STATUSES
from bareagent.orchestrator.state import state_root
from bareagent.orchestrator.team import Team
from bareagent.testing import ScriptedLLMServer

PROVIDERS = ("anthropic", "openai")
DEMO_API_KEY = "demo-key-not-a-secret"
WAIT_SECONDS = 40.0
SHUTDOWN_SECONDS = 10.0
_API_NAMES = {"anthropic": "Anthropic Messages API", "openai": "OpenAI Chat Completions API"}


class DemoFailed(Exception):
    """The demo could not show what it promises; the message says what went wrong."""


@dataclass
class DemoOptions:
    """`bareagent demo` flags."""

    provider: str = "anthropic"
    keep: bool = False
    base_dir: Path | None = None
    wait_seconds: float = WAIT_SECONDS


@dataclass
class _Mail:
    """Team mail lines the lead's inbox has seen (the listener fills it)."""

    lines: list[str] = field(default_factory=list)

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    def from_agent(self, name: str) -> str | None:
        prefix = f"Team response from {name}"
        return next((line for line in self.lines if line.startswith(prefix)), None)


def demo_config(workspace: Path, provider: str, base_url: str, user_file: Path) -> Config:
    """Defaults plus the scripted server; the user's own config file is not read."""
    return load_config(
        workspace,
        {
            "provider": {"name": provider, "base_url": base_url, "api_key": DEMO_API_KEY},
            "permission": {"mode": "default", "allow": scenario.allow_rules()},
        },
        user_file=user_file,
    )


class Demo:
    """One run of the demo, narrated on `console`."""

    def __init__(self, console: Console, options: DemoOptions) -> None:
        if options.provider not in PROVIDERS:
            raise DemoFailed(f"unknown provider {options.provider!r}; use one of {PROVIDERS}")
        self.console = console
        self.options = options
        self.root = Path(tempfile.mkdtemp(prefix="bareagent-demo-", dir=options.base_dir))
        self.workspace = self.root / "calc"
        self.home = self.root / "state"
        self.mail = _Mail()
        self.started = time.monotonic()
        self._before = descendants()
        self._server: ScriptedLLMServer | None = None
        self._step = 0
        self.signals = SignalGuard(on_hangup=self._hang_up)
        self.survivors: list[int] = []
        self._devnull: IO[str] | None = None

    # -- narration ---------------------------------------------------------------------

    def step(self, title: str) -> None:
        """A numbered section header."""
        self._step += 1
        self.console.print()
        self.console.print(Rule(f"[bold]{self._step} · {escape(title)}[/bold]", align="left"))

    def say(self, text: str) -> None:
        """One narration line (rich markup allowed)."""
        self.console.print(text, highlight=False)

    # -- the run -------------------------------------------------------------------------

    def run(self) -> None:
        """Run every step; DemoFailed says what did not work. Always cleans up."""
        self.signals.install()
        try:
            with (
                demo_environment(self.home),
                ScriptedLLMServer(scenario.demo_script()) as server,
            ):
                self._run(server)
        finally:
            self.signals.cleaning = True
            try:
                self._sweep()
            finally:
                self.signals.restore()

    def _sweep(self) -> None:
        """On every exit path: kill what is left, then look again; remove the directory."""
        killed = kill_leftovers(self.root, self._before)
        self.survivors = [p.pid for p in find_leftovers(self.root, self._before)]
        if not self.options.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        # After a SIGHUP the terminal is gone: printing may fail, cleaning up must not.
        with contextlib.suppress(OSError):
            if killed:
                self.say(f"[red]killed {len(killed)} leftover process(es): {killed}[/red]")
            if self.survivors:
                self.say(f"[red]could not stop process(es) {self.survivors}[/red]")
            if self.options.keep:
                self.say(f"[dim]Kept {self.root} (--keep).[/dim]")

    def _hang_up(self) -> None:
        """SIGHUP: the terminal is gone, so the rest of the narration goes nowhere."""
        if self._devnull is None:
            # Kept open to the end: the console (and rich's refresh thread) may still write.
            self._devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
            self.console.file = self._devnull

    def _run(self, server: ScriptedLLMServer) -> None:
        self._server = server
        files = write_project(self.workspace)
        base_url = (
            server.anthropic_base_url
            if self.options.provider == "anthropic"
            else server.openai_base_url
        )
        config = demo_config(
            self.workspace, self.options.provider, base_url, self.root / "no-user-config.toml"
        )
        self._intro(files, server)
        # Not detached: if the demo itself is killed, its helper takes the teammates down.
        with open_session(
            self.workspace, config, ask_user_fn=self._refuse, detach_teammates=False
        ) as session:
            team = session_team(session)
            if team is None:
                raise DemoFailed("the session has no team handle")
            team.inbox.listeners.append(self.mail)
            try:
                self._register(team)
                self._kickoff(session)
                self._wait_for_background(team)
                self._inside_workers()
                self._report(session)
                self._ps()
                self._shutdown(team)
            finally:
                self._kill_teammates(team)
        self._prove_clean()

    def _intro(self, files: list[str], server: ScriptedLLMServer) -> None:
        self.console.print(
            "[bold]BareAgent demo[/bold] · a scripted model on this machine: no API key, no network"
        )
        rows = [
            ("workspace", f"{self.workspace}  ({', '.join(files)})"),
            ("model", f"{server.url}  ({_API_NAMES[self.options.provider]}, real SDK)"),
            ("state", f"{self.home}  (registry, mailboxes, logs)"),
            ("mode", "default, plus allow rules for the calls the demo makes:"),
        ]
        for key, value in rows:
            self.say(f"  [dim]{key:<9}[/dim] {escape(value)}")
        for rule in scenario.allow_rules():
            self.say(f"  {'':<9} [dim]allow[/dim] {escape(rule)}")
        self.say(
            f"  {'':<9} [dim]anything else that would ask is refused: nobody answers here[/dim]"
        )

    def _refuse(self, call: Any) -> bool:
        """Nobody sits at the demo's keyboard: a call that needs a yes is refused."""
        self.say(f"[yellow]  ? {escape(call.name)} would need a yes; the demo says no[/yellow]")
        return False

    def _register(self, team: Team) -> None:
        self.step("Register two teammates (.team.json in the workspace)")
        for name, (role, instructions) in scenario.TEAMMATES.items():
            team.manager.register(name, role, instructions)
            self.say(f"  [cyan]{name:<6}[/cyan] {role:<9} [dim]{escape(instructions)}[/dim]")

    def _turn(self, session: Session, prompt: str) -> None:
        self.say(f"[bold green]you ›[/bold green] {escape(prompt)}")
        printer = DemoPrinter(self.console)
        try:
            session.run_turn(prompt, on_event=printer)
        finally:
            printer.finish()
        self._check_script()

    def _kickoff(self, session: Session) -> None:
        self.step("The lead agent spawns the team, sends a plan, starts a build, delegates")
        # Results are held back until the report turn, so that every run tells the story
        # in the same order whatever the machine's speed; the inbox keeps them meanwhile.
        notifications, session.notifications = session.notifications, None
        try:
            self._turn(session, scenario.lead_prompt())
        finally:
            session.notifications = notifications

    def _wait_for_background(self, team: Team) -> None:
        self.step("Background work: each of these is its own supervised process")
        watches = [
            Watch("build job", self._build_status),
            Watch("alice", self._review_status),
            Watch("bob", self._test_status),
        ]
        try:
            wait_all(
                self.console,
                watches,
                timeout=self.options.wait_seconds,
                tick=team.inbox.poll,
            )
        except WaitTimeout as exc:
            raise DemoFailed(f"{exc} (logs: {state_root(self.workspace) / 'logs'})") from None
        failed = [f"{w.label} ({w.last.detail})" for w in watches if not w.last.ok]
        if failed:
            raise DemoFailed(f"background work went wrong: {'; '.join(failed)}")

    def _inside_workers(self) -> None:
        """What the teammates and the subagent did, from their own logs (`bareagent logs`)."""
        self.step("Inside the workers (excerpts of `bareagent logs ID`)")
        for row in collect_rows(self.workspace, include_finished=True):
            if row.kind == "job":
                continue
            self.say(f"  [cyan]{escape(row.name)}[/cyan] [dim]{row.kind} {row.id}[/dim]")
            for line in worker_story(Path(row.log_path)):
                self.say(f"    [dim]{escape(_cut(line, 100))}[/dim]")

    def _build_status(self) -> Status:
        row = next((j for j in collect_jobs(self.workspace, 1) if j.id == scenario.BUILD_JOB), None)
        if row is None:
            return Status(False, "not started")
        last = row.output_tail[-1] if row.output_tail else row.status
        if row.status in FINAL_STATUSES:
            ok = row.status == "done" and row.exit_code == 0
            took = f" in {row.duration_seconds:.1f} s" if row.duration_seconds is not None else ""
            return Status(True, f"{row.status}{took}, exit {row.exit_code}: {last}", ok)
        return Status(False, last)

    def _review_status(self) -> Status:
        line = self.mail.from_agent("alice")
        if line is None:
            return Status(False, "reviewing the plan…")
        verdict = line.split(":", 1)[1].strip()
        return Status(True, f"review: {_cut(verdict, 60)}", verdict.startswith("APPROVE"))

    def _test_status(self) -> Status:
        line = self.mail.from_agent("bob")
        if line is None:
            return Status(False, "running the unit tests…")
        answer = line.split(":", 1)[1].strip()
        return Status(True, f"tests: {_cut(answer, 60)}", "pass" in answer and "FAIL" not in answer)

    def _report(self, session: Session) -> None:
        self.step("The lead reads the results (they arrive as notifications)")
        self._turn(session, scenario.report_prompt())

    def _check_script(self) -> None:
        """Fail fast when an agent asked the scripted model something off-script."""
        assert self._server is not None
        stray = [r for r in self._server.requests if r.turn is None or r.status != 200]
        if stray:
            raise DemoFailed(
                f"the scripted model got {len(stray)} request(s) it had no answer for "
                f"(first: {stray[0].path}, status {stray[0].status})"
            )

    def _ps(self) -> None:
        self.step("bareagent ps --all")
        rows = collect_rows(self.workspace, include_finished=True)
        if self.console.is_terminal:
            self.console.print(ps_table(rows))
        else:
            self.console.print(ps_plain(rows), highlight=False, soft_wrap=True)

    def _shutdown(self, team: Team) -> None:
        self.step("Clean up: teammates get a SHUTDOWN message, the session stops the rest")
        forced = []
        for name in scenario.TEAMMATES:
            with self.console.status(f"shutting down {name}…"):
                result = team.shutdown(name, timeout=SHUTDOWN_SECONDS)
            if result == f"Teammate {name} shut down.":
                self.say(f"  [green]✓[/green] {escape(result)}")
            else:
                forced.append(name)
                self.say(f"  [red]✗[/red] {escape(result)}")
        if forced:
            raise DemoFailed(f"{', '.join(forced)} did not stop on a SHUTDOWN request")
        self._check_script()  # the teammates' last requests too

    def _kill_teammates(self, team: Team) -> None:
        """After a failure or a signal, teammates still running are killed, not asked."""
        for name in scenario.TEAMMATES:
            records = team.live_records(name)
            if records:
                team.kill(records)

    def _prove_clean(self) -> None:
        records = Registry(state_root(self.workspace)).list(include_finished=True)
        live = [r for r in records if r.is_live_status]
        leftovers = find_leftovers(self.root, self._before)
        if live or leftovers:
            raise DemoFailed(
                f"processes left behind: {len(live)} live worker record(s), "
                f"pids {sorted(p.pid for p in leftovers)}"
            )
        self.say(
            f"  [green]✓[/green] no process left: {len(records)} workers started, all ended; "
            f"nothing runs in {escape(str(self.root))}"
        )
        self.say(
            f"\n[bold]Demo finished in {time.monotonic() - self.started:.1f} s.[/bold] "
            "For real work: set ANTHROPIC_API_KEY (or OPENAI_API_KEY) and run "
            "[bold]bareagent[/bold] in your project."
        )


_STORY_MARKERS = (": tool ", "claimed task", "request ", " answered ", "is up;", " done")


def worker_story(log_path: Path, limit: int = 6) -> list[str]:
    """The lines of a worker log that say what it did, without timestamp and logger."""
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    story = []
    for line in lines:
        if any(marker in line for marker in _STORY_MARKERS):
            story.append(line.split(": ", 1)[1] if "] INFO " in line else line)
    return story[:limit]


def _cut(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
