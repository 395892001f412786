"""The REPL's `/team` command and the display of the team inbox (`main`).

`install(repl)` registers `/team list|spawn|send|shutdown|register|review|remove` and
makes every drained team message print as `Team response from X: ...` (also when it is
drained in the middle of a turn); `show_inbox(repl)` prints mail that arrived while the
user was at the prompt (the model still gets it with the next turn).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from bareagent.cli.runtime import session_team
from bareagent.orchestrator.team import DEFAULT_REVIEW_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT, Team
from bareagent.orchestrator.teammates import TeamError, TeamStoreError

if TYPE_CHECKING:
    from bareagent.cli.repl import Repl

USAGE = """\
/team list                              teammates and whether they run
/team register NAME ROLE SYSTEM_PROMPT  define a teammate (quote words with spaces)
/team spawn NAME                        start it (it keeps running after you leave)
/team send NAME MESSAGE                 send it a message; the reply shows up here
/team review NAME PLAN                  ask it to APPROVE or REJECT a plan (waits)
/team shutdown NAME                     ask it to stop; killed after 10 s
/team remove NAME                       forget a stopped teammate"""


def install(repl: Repl) -> None:
    """Register `/team` and print team mail as it is drained."""
    team = session_team(repl.session)
    if team is None:
        return

    def printer(line: str) -> None:
        repl.console.print(f"[magenta]{escape(line)}[/magenta]", highlight=False)

    team.inbox.listeners.append(printer)
    repl.commands["/team"] = lambda args: run_team_command(repl, team, args)


def show_inbox(repl: Repl) -> None:
    """Print mail that arrived since the last look (kept for the model's next turn)."""
    team = session_team(repl.session)
    if team is not None:
        team.inbox.poll()


def run_team_command(repl: Repl, team: Team, args: list[str]) -> None:
    """Run one `/team` verb; errors are one red line."""
    try:
        # handle_command split on whitespace; re-split so quoted arguments stay whole.
        words = shlex.split(" ".join(args))
    except ValueError as exc:
        repl.console.print(f"[red]{escape(str(exc))}[/red]")
        return
    try:
        output = _dispatch(team, words)
    except (TeamError, TeamStoreError, ValueError, OSError) as exc:
        repl.console.print(f"[red]{escape(' '.join(str(exc).split()))}[/red]", highlight=False)
        return
    except KeyboardInterrupt:
        repl.console.print("[yellow]Stopped waiting.[/yellow]")
        return
    repl.console.print(escape(output), highlight=False)


def _need(words: list[str], count: int, usage: str) -> list[str]:
    if len(words) - 1 < count:
        raise TeamError(f"usage: /team {usage}")
    return words[1:]


def _dispatch(team: Team, words: list[str]) -> str:
    verb = words[0].lower() if words else "help"
    if verb == "list":
        return _format(team.list())
    if verb == "spawn":
        return team.spawn(_need(words, 1, "spawn NAME")[0])
    if verb == "send":
        rest = _need(words, 2, "send NAME MESSAGE")
        return team.send(rest[0], " ".join(rest[1:]))
    if verb == "shutdown":
        return team.shutdown(_need(words, 1, "shutdown NAME")[0], DEFAULT_SHUTDOWN_TIMEOUT)
    if verb == "review":
        rest = _need(words, 2, "review NAME PLAN")
        review = team.review(rest[0], " ".join(rest[1:]), DEFAULT_REVIEW_TIMEOUT)
        return f"Review from {rest[0]}: {review}"
    if verb == "register":
        rest = _need(words, 3, "register NAME ROLE SYSTEM_PROMPT")
        definition = team.manager.register(rest[0], rest[1], " ".join(rest[2:]))
        return f"Registered teammate {definition.name} ({definition.role})."
    if verb == "remove":
        name = _need(words, 1, "remove NAME")[0]
        if team.is_running(name):
            raise TeamError(f"Teammate {name} is running; stop it first (/team shutdown {name}).")
        return f"Removed teammate {team.manager.remove(name).name}."
    return USAGE


def _format(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No teammates registered (/team register NAME ROLE SYSTEM_PROMPT)."
    lines = []
    for row in rows:
        state = f"running, {row['status']}, pid {row['pid']}" if row["running"] else "stopped"
        task = f", task {row['current_task']}" if row.get("current_task") else ""
        lines.append(f"{row['name']} ({row['role']}): {state}{task}")
    return "\n".join(lines)
