"""`bareagent` command line: REPL by default, subcommands for one-shot and operator use."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import bareagent.cli.team_cmd as team_cmd
from bareagent import __version__
from bareagent.cli import demo_cmd, ops_cmd, repl, run_cmd
from bareagent.cli.common import CLIError, add_provider_flags, fail
from bareagent.config import ConfigError
from bareagent.core.loop import LLMCallError
from bareagent.provider import ProviderError


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="bareagent",
        description="A terminal coding agent whose long-running parts are supervised processes. "
        "Without a subcommand, starts the interactive REPL in the workspace.",
    )
    parser.add_argument("--version", action="version", version=f"bareagent {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    add_provider_flags(parser)
    parser.set_defaults(func=repl.run_repl)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    run_cmd.add_parser(sub)
    ops_cmd.add_parser(sub)
    team_cmd.add_parser(sub)
    demo_cmd.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the command, and turn user errors into one-line messages."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else 10
    logging.basicConfig(level=level, format="bareagent: %(levelname)s: %(message)s")
    try:
        return int(args.func(args))
    except (CLIError, ConfigError, ProviderError, LLMCallError) as exc:
        return fail(str(exc))
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
