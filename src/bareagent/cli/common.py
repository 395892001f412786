"""Shared CLI plumbing: workspace and config resolution, one-line errors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bareagent.config import Config, load_config


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


def fail(message: str, code: int = 1) -> int:
    """Print `bareagent: error: ...` as one line on stderr and return the exit code."""
    one_line = " ".join(str(message).split())
    print(f"bareagent: error: {one_line}", file=sys.stderr)
    return code


def resolve_workspace(value: str | None) -> Path:
    """The workspace directory from --workspace or the current directory."""
    path = Path(value).expanduser() if value else Path.cwd()
    if not path.is_dir():
        raise CLIError(f"workspace is not a directory: {path}")
    return path.resolve()


def add_provider_flags(parser: argparse.ArgumentParser) -> None:
    """Flags that override the config file for one run."""
    parser.add_argument("--workspace", "-w", metavar="DIR", help="workspace directory (default: .)")
    parser.add_argument(
        "--mode",
        choices=["default", "auto", "plan", "bypass"],
        help="permission mode",
    )
    parser.add_argument("--provider", metavar="NAME", help="anthropic, openai or a preset")
    parser.add_argument("--model", metavar="NAME", help="model name")
    parser.add_argument("--base-url", metavar="URL", help="API base URL")
    parser.add_argument("--api", choices=["chat", "responses"], help="OpenAI API flavour")
    parser.add_argument("--no-stream", action="store_true", help="do not stream the reply")


def config_from_args(args: argparse.Namespace, workspace: Path) -> Config:
    """Load the merged config with command-line overrides applied."""
    overrides: dict[str, dict[str, Any]] = {
        "provider": {
            "name": args.provider,
            "model": args.model,
            "base_url": args.base_url,
            "api": args.api,
        },
        "permission": {"mode": args.mode},
        "agent": {"stream": False if args.no_stream else None},
    }
    return load_config(workspace, overrides)
