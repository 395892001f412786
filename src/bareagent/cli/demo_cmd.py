"""`bareagent demo`: the scripted, offline tour (see bareagent.demo)."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from rich.console import Console

from bareagent.cli.common import CLIError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the `demo` subcommand."""
    parser = sub.add_parser(
        "demo",
        help="watch a lead agent, two teammates, a job and a subagent work (no API key)",
        description=(
            "Run a scripted model on 127.0.0.1 and let a lead agent spawn two teammates, "
            "send a plan for review, start a background build and delegate to an explore "
            "subagent, in a temporary workspace. Needs no API key and no network; leaves "
            "no process behind."
        ),
    )
    parser.add_argument(
        "--provider",
        choices=("anthropic", "openai"),
        default="anthropic",
        help="which API the scripted model speaks (default anthropic)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary workspace and state afterwards"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="create the temporary directory under DIR"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo; a failure is one line on stderr and exit 1."""
    from bareagent.demo.driver import Demo, DemoFailed, DemoOptions

    if args.dir is not None and not args.dir.is_dir():
        raise CLIError(f"--dir {args.dir} is not a directory")
    options = DemoOptions(provider=args.provider, keep=args.keep, base_dir=args.dir)
    console = Console()
    try:
        demo = Demo(console, options)
    except OSError as exc:
        where = args.dir if args.dir is not None else "the temporary directory"
        raise CLIError(f"cannot create the demo directory in {where}: {exc}") from None
    try:
        demo.run()
    except DemoFailed as exc:
        raise CLIError(f"demo failed: {exc}") from None
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            if demo.survivors:
                console.print(f"[red]Demo cancelled; could not stop {demo.survivors}.[/red]")
            else:
                console.print("[yellow]Demo cancelled; everything it started was stopped.[/yellow]")
        return demo.signals.exit_status or 130
    except OSError as exc:
        if demo.signals.exit_status is None:
            raise CLIError(f"demo failed: {exc}") from None
        return demo.signals.exit_status  # the hang-up broke a write before it unwound
    return 0
