"""`bareagent team ...`: register, spawn, message, review, list and shut down teammates.

Teammates started here are detached: they outlive this command (they belong to the
workspace) until `team shutdown` or `bareagent kill`. Every verb works from any terminal
because teammates, their mailboxes and the live registry live in the workspace's state
root. See docs/team.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from collections.abc import Callable
from typing import Any

from bareagent.cli.common import CLIError, config_from_args, resolve_workspace
from bareagent.orchestrator.team import DEFAULT_REVIEW_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT, Team
from bareagent.orchestrator.team_mail import mail_line
from bareagent.orchestrator.teammates import TeamError, TeammateManager, TeamStoreError

VERBS = ("list", "register", "spawn", "send", "shutdown", "review", "remove")

Command = Callable[[argparse.Namespace], int]


def _user_errors(func: Command) -> Command:
    """Team and store errors become one-line CLI errors."""

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (TeamError, TeamStoreError) as exc:
            raise CLIError(str(exc)) from None

    return wrapper


def _suppressed(parser: argparse.ArgumentParser, *flags: str, **kw: Any) -> None:
    # SUPPRESS keeps `bareagent -w DIR team ...` working: the top-level value stays.
    parser.add_argument(*flags, default=argparse.SUPPRESS, **kw)


def _workspace_flag(parser: argparse.ArgumentParser) -> None:
    _suppressed(parser, "--workspace", "-w", metavar="DIR", help="workspace directory (default: .)")


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {value!r}")
    return seconds


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `team` and its verbs."""
    team = sub.add_parser("team", help="autonomous teammates: " + "|".join(VERBS))
    team.set_defaults(func=_missing_verb)
    verbs = team.add_subparsers(title="verbs", metavar="VERB")

    p = verbs.add_parser("list", help="registered teammates and whether they run")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    _workspace_flag(p)
    p.set_defaults(func=cmd_list)

    p = verbs.add_parser("register", help="define a teammate in <workspace>/.team.json")
    p.add_argument("name", metavar="NAME", help="letters, digits, '_' and '-'")
    p.add_argument("role", metavar="ROLE", help="one line, e.g. 'reviewer'")
    p.add_argument("system_prompt", metavar="SYSTEM_PROMPT", help="its instructions")
    p.add_argument(
        "--provider-config",
        metavar="JSON",
        help='overrides of [provider] for this teammate, e.g. \'{"model": "m"}\'',
    )
    _workspace_flag(p)
    p.set_defaults(func=cmd_register)

    p = verbs.add_parser("spawn", help="start a registered teammate (detached)")
    p.add_argument("name", metavar="NAME")
    _workspace_flag(p)
    _suppressed(p, "--mode", choices=["default", "auto", "plan", "bypass"], help="permission mode")
    _suppressed(p, "--provider", metavar="NAME", help="anthropic, openai or a preset")
    _suppressed(p, "--model", metavar="NAME", help="model name")
    _suppressed(p, "--base-url", metavar="URL", help="API base URL")
    p.set_defaults(func=cmd_spawn)

    p = verbs.add_parser("send", help="send a message to a teammate")
    p.add_argument("name", metavar="NAME")
    p.add_argument("message", metavar="MESSAGE")
    p.add_argument(
        "--wait", type=_seconds, metavar="S", help="wait up to S seconds for the reply and print it"
    )
    _workspace_flag(p)
    p.set_defaults(func=cmd_send)

    p = verbs.add_parser("shutdown", help="ask a teammate to stop; kill it after the timeout")
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_SHUTDOWN_TIMEOUT,
        metavar="S",
        help=f"seconds to wait before killing it (default {DEFAULT_SHUTDOWN_TIMEOUT:g})",
    )
    _workspace_flag(p)
    p.set_defaults(func=cmd_shutdown)

    p = verbs.add_parser("review", help="ask a teammate to APPROVE or REJECT a plan")
    p.add_argument("name", metavar="NAME")
    p.add_argument("plan", metavar="PLAN")
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_REVIEW_TIMEOUT,
        metavar="S",
        help=f"seconds to wait for the review (default {DEFAULT_REVIEW_TIMEOUT:g})",
    )
    _workspace_flag(p)
    p.set_defaults(func=cmd_review)

    p = verbs.add_parser("remove", help="forget a teammate's definition")
    p.add_argument("name", metavar="NAME")
    _workspace_flag(p)
    p.set_defaults(func=cmd_remove)


def _missing_verb(_args: argparse.Namespace) -> int:
    raise CLIError(f"team needs a verb: {', '.join(VERBS)} (see `bareagent team --help`)")


def _workspace(args: argparse.Namespace) -> Any:
    value = getattr(args, "workspace", None)
    return resolve_workspace(value if isinstance(value, str) else None)


def _parse_provider_config(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CLIError(f"--provider-config is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CLIError("--provider-config must be a JSON object")
    return value


def format_rows(rows: list[dict[str, Any]]) -> str:
    """`team list` as aligned plain text."""
    if not rows:
        return "No teammates registered."
    table = [("NAME", "ROLE", "RUNNING", "STATUS", "WORKER", "PID", "TASK")]
    for row in rows:
        table.append(
            (
                str(row["name"]),
                str(row["role"]),
                "yes" if row["running"] else "no",
                str(row["status"] or "-"),
                str(row["worker_id"] or "-"),
                str(row["pid"] or "-"),
                str(row.get("current_task") or "-"),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in table
    )


@_user_errors
def cmd_list(args: argparse.Namespace) -> int:
    """`bareagent team list`."""
    with Team(_workspace(args)) as team:
        rows = team.list()
    print(json.dumps(rows, indent=2, ensure_ascii=False) if args.json else format_rows(rows))
    return 0


@_user_errors
def cmd_register(args: argparse.Namespace) -> int:
    """`bareagent team register NAME ROLE SYSTEM_PROMPT`."""
    manager = TeammateManager(_workspace(args))
    definition = manager.register(
        args.name, args.role, args.system_prompt, _parse_provider_config(args.provider_config)
    )
    print(f"Registered teammate {definition.name} ({definition.role}).")
    return 0


@_user_errors
def cmd_spawn(args: argparse.Namespace) -> int:
    """`bareagent team spawn NAME`."""
    from bareagent.core.session import guard_from_config

    workspace = _workspace(args)
    config = config_from_args(args, workspace)
    with Team(workspace, config, guard_from_config(config)) as team:
        print(team.spawn(args.name))
    return 0


@_user_errors
def cmd_send(args: argparse.Namespace) -> int:
    """`bareagent team send NAME MESSAGE [--wait S]`."""
    with Team(_workspace(args)) as team:
        message = team.send_message(args.name, args.message)
        print(f"Sent message {message.id} to {args.name}", flush=True)
        if args.wait is None:
            return 0
        reply = team.wait_reply(message.id, args.wait)
    if reply is None:
        raise CLIError(f"no reply from {args.name} within {args.wait:g} seconds")
    print(mail_line(reply, label="response"))
    return 0


@_user_errors
def cmd_shutdown(args: argparse.Namespace) -> int:
    """`bareagent team shutdown NAME [--timeout S]`."""
    with Team(_workspace(args)) as team:
        print(team.shutdown(args.name, args.timeout))
    return 0


@_user_errors
def cmd_review(args: argparse.Namespace) -> int:
    """`bareagent team review NAME PLAN [--timeout S]`: prints the teammate's review."""
    with Team(_workspace(args)) as team:
        print(team.review(args.name, args.plan, args.timeout))
    return 0


@_user_errors
def cmd_remove(args: argparse.Namespace) -> int:
    """`bareagent team remove NAME`."""
    with Team(_workspace(args)) as team:
        if team.is_running(args.name):
            raise CLIError(
                f"Teammate {args.name} is running; stop it first (`bareagent team shutdown`)."
            )
        removed = team.manager.remove(args.name)
    print(f"Removed teammate {removed.name}.")
    return 0
