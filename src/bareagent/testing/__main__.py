"""`python -m bareagent.testing SCRIPT.json [--port N]`: serve a script until stopped.

The first line on stdout is the base URL (for scripts to read); hints go to stderr.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from bareagent.testing.script import ScriptError
from bareagent.testing.scripted_server import ScriptedLLMServer


def main(argv: list[str] | None = None) -> int:
    """Serve SCRIPT on 127.0.0.1 until SIGINT/SIGTERM; exit 2 on a bad script."""
    parser = argparse.ArgumentParser(
        prog="python -m bareagent.testing",
        description="Serve a scripted conversation over the Anthropic and OpenAI APIs.",
    )
    parser.add_argument("script", help="JSON script file ({'turns': [...]})")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    args = parser.parse_args(argv)
    try:
        server = ScriptedLLMServer(args.script, port=args.port)
    except ScriptError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with server:
        print(server.url, flush=True)
        print(
            f"ANTHROPIC_BASE_URL={server.anthropic_base_url} "
            f"OPENAI_BASE_URL={server.openai_base_url}",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
