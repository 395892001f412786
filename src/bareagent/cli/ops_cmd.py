"""Operator commands: `ps`, `top`, `logs`, `kill`, `jobs` (see docs/operator.md).

They read (and for `kill`, update) the workspace's state root only, so they work from
any terminal, whichever process started the workers.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from rich.console import Console

from bareagent.cli.common import CLIError, resolve_workspace
from bareagent.cli.ops_jobs import collect_jobs, jobs_json, jobs_plain, jobs_table
from bareagent.cli.ops_kill import DEFAULT_GRACE, kill, parse_signal
from bareagent.cli.ops_logs import show_logs
from bareagent.cli.ops_top import run_top
from bareagent.cli.ops_view import collect_rows, ps_plain, ps_table


def _workspace_flag(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS keeps `bareagent -w DIR ps` working: the top-level value is not overwritten.
    parser.add_argument(
        "--workspace",
        "-w",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="workspace directory (default: .)",
    )


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON list")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `ps`, `top`, `logs`, `kill` and `jobs`."""
    ps = sub.add_parser("ps", help="list this workspace's worker processes")
    _json_flag(ps)
    ps.add_argument("--all", "-a", action="store_true", help="include finished workers")
    _workspace_flag(ps)
    ps.set_defaults(func=cmd_ps)

    top = sub.add_parser("top", help="live view of the workers, busiest first (q quits)")
    top.add_argument(
        "--interval", "-d", type=float, default=2.0, metavar="S", help="refresh every S seconds"
    )
    top.add_argument("--once", action="store_true", help="show one frame and exit")
    top.add_argument("--iterations", "-n", type=int, metavar="N", help="exit after N frames")
    _workspace_flag(top)
    top.set_defaults(func=cmd_top)

    logs = sub.add_parser("logs", help="print a worker's log (a job's output)")
    logs.add_argument("id", metavar="ID", help="worker id, job id or teammate name")
    logs.add_argument(
        "--follow", "-f", action="store_true", help="keep printing until the worker ends"
    )
    _workspace_flag(logs)
    logs.set_defaults(func=cmd_logs)

    kill_p = sub.add_parser("kill", help="stop a worker and its whole process tree")
    kill_p.add_argument("id", metavar="ID", help="worker id, job id or teammate name")
    kill_p.add_argument(
        "--signal",
        "-s",
        default="TERM",
        metavar="TERM|KILL",
        help="TERM: ask/terminate, kill after the grace period (default); KILL: at once",
    )
    kill_p.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE,
        metavar="S",
        help=f"seconds to wait before SIGKILL (default {DEFAULT_GRACE:g})",
    )
    _workspace_flag(kill_p)
    kill_p.set_defaults(func=cmd_kill)

    jobs = sub.add_parser("jobs", help="background jobs with status, exit code and output tail")
    _json_flag(jobs)
    jobs.add_argument(
        "--tail", type=int, default=5, metavar="N", help="output lines per job (default 5)"
    )
    _workspace_flag(jobs)
    jobs.set_defaults(func=cmd_jobs)


def _workspace(args: argparse.Namespace) -> str | None:
    value = getattr(args, "workspace", None)
    return value if isinstance(value, str) else None


def cmd_ps(args: argparse.Namespace) -> int:
    """`bareagent ps`."""
    workspace = resolve_workspace(_workspace(args))
    rows = collect_rows(workspace, include_finished=args.all)
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2, ensure_ascii=False))
    elif sys.stdout.isatty():
        console = Console()
        if rows:
            console.print(ps_table(rows))
        else:
            hint = "" if args.all else " (--all includes finished ones)"
            console.print(f"[dim]No workers running in {workspace}{hint}.[/dim]")
    else:
        print(ps_plain(rows))
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    """`bareagent top`."""
    workspace = resolve_workspace(_workspace(args))
    if args.iterations is not None and args.iterations < 1:
        raise CLIError(f"--iterations must be at least 1, got {args.iterations}")
    return run_top(workspace, interval=args.interval, once=args.once, iterations=args.iterations)


def cmd_logs(args: argparse.Namespace) -> int:
    """`bareagent logs ID [-f]`."""
    workspace = resolve_workspace(_workspace(args))
    return show_logs(workspace, args.id, follow=args.follow)


def cmd_kill(args: argparse.Namespace) -> int:
    """`bareagent kill ID`."""
    workspace = resolve_workspace(_workspace(args))
    signal = parse_signal(args.signal)
    if not math.isfinite(args.grace) or args.grace < 0:
        raise CLIError(f"--grace must be a non-negative number of seconds, got {args.grace}")
    print(kill(workspace, args.id, signal=signal, grace=args.grace))
    return 0


def cmd_jobs(args: argparse.Namespace) -> int:
    """`bareagent jobs`."""
    workspace = resolve_workspace(_workspace(args))
    if args.tail < 0:
        raise CLIError(f"--tail must be 0 or more, got {args.tail}")
    rows = collect_jobs(workspace, tail_lines=args.tail)
    if args.json:
        print(jobs_json(rows))
    elif sys.stdout.isatty():
        console = Console()
        if rows:
            console.print(jobs_table(rows))
        else:
            console.print(f"[dim]No background jobs in {workspace}.[/dim]")
    else:
        print(jobs_plain(rows))
    return 0
