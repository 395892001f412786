#!/usr/bin/env python3
"""Fuzz the bash classifier with random UTF-8 commands, each in a fresh child process.

tree-sitter-bash can crash the whole process (a segfault, not an exception), so every
batch runs in its own child, which writes each input to a file before classifying it.
When a child dies, the last input in its file is the crasher; it is printed and kept.

    python scripts/fuzz_bash_parser.py [--batches 12] [--per-batch 20000] [--max-size 80]
    python scripts/fuzz_bash_parser.py --raw ...   # the bare parser, without our checks
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import sys
from hypothesis import HealthCheck, given, settings, strategies as st

out = open(sys.argv[1], "wb", buffering=0)
count, max_size, raw = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
if raw:
    from bareagent.permission.bash_parse import _PARSER

    def check(text):
        _PARSER.parse(text.encode("utf-8", "surrogatepass"))
else:
    from bareagent.permission.bash_analysis import classify_bash as check


@settings(
    max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=max_size))
def fuzz(text):
    data = text.encode("utf-8", "surrogatepass")
    out.write(len(data).to_bytes(4, "big") + data)
    check(text)


fuzz()
"""


def last_input(path: Path) -> tuple[int, bytes]:
    """How many inputs a batch wrote, and the last one (the crasher if it died)."""
    data = path.read_bytes()
    count, offset, last = 0, 0, b""
    while offset + 4 <= len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        last = data[offset + 4 : offset + 4 + size]
        offset += 4 + size
        count += 1
    return count, last


def main() -> int:
    """Run the batches; exit 1 and print the input when a child crashes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--per-batch", type=int, default=20_000)
    parser.add_argument("--max-size", type=int, default=80)
    parser.add_argument("--raw", action="store_true", help="fuzz the bare tree-sitter parser")
    args = parser.parse_args()
    total = 0
    with tempfile.TemporaryDirectory(prefix="fuzz-bash-") as tmp:
        for batch in range(1, args.batches + 1):
            log = Path(tmp) / f"batch-{batch}.bin"
            result = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(log),
                    str(args.per_batch),
                    str(args.max_size),
                    "1" if args.raw else "0",
                ],
                capture_output=True,
                text=True,
            )
            count, last = last_input(log)
            total += count
            if result.returncode != 0:
                print(f"batch {batch}: child exited {result.returncode} after {count} inputs")
                print(f"last input: {last!r}")
                print(result.stderr[-2000:])
                return 1
            print(f"batch {batch}: {count} inputs, no crash", flush=True)
    print(f"{total} inputs in {args.batches} batches, no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
