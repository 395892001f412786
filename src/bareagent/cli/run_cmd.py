"""`bareagent run PROMPT`: one agent turn to completion, final text on stdout."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from bareagent.cli.common import config_from_args, resolve_workspace
from bareagent.cli.render import EventPrinter, make_confirm
from bareagent.cli.runtime import open_session


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the `run` subcommand."""
    parser = sub.add_parser("run", help="run one prompt to completion and print the answer")
    from bareagent.cli.common import add_provider_flags

    add_provider_flags(parser)
    parser.add_argument("prompt", nargs="+", help="what the agent should do")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run one turn; tool activity goes to stderr, the final text to stdout."""
    workspace = resolve_workspace(args.workspace)
    config = config_from_args(args, workspace)
    err = Console(stderr=True)
    interactive = sys.stdout.isatty()
    printer = EventPrinter(err if not interactive else Console(), show_text=interactive)
    prompt = " ".join(args.prompt)
    with open_session(workspace, config, ask_user_fn=make_confirm(err)) as session:
        try:
            text = session.run_turn(prompt, on_event=printer)
        except KeyboardInterrupt:
            err.print("[yellow]Cancelled.[/yellow]")
            return 130
    if not printer.streamed_text:
        print(text)
    elif not text.endswith("\n"):
        print()
    return 0
