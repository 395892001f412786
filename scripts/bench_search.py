#!/usr/bin/env python3
"""Benchmark the glob and grep tools against a straightforward baseline.

Builds a synthetic workspace in a temporary directory (source files plus a large
node_modules and a small .git), then times, in the same run and alternating:

- ours:     bareagent.core.handlers.glob_search.glob_files / grep_search.grep_files
- baseline: os.walk over everything, skip dirs filtered after the fact, fnmatch on names;
            for grep, every candidate file read and searched line by line.

Both sides must return identical result lists (asserted), so the timing compares like
with like. Reports the median of --runs runs and the speedup.

    python scripts/bench_search.py [--files 20000] [--node-modules-files 30000] [--runs 5]
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bareagent.core.handlers.glob_search import glob_files
from bareagent.core.handlers.grep_search import grep_files

SKIP = {".git", ".pytest_cache", ".venv", "__pycache__", "node_modules"}
MAX_BYTES = 1_048_576
NEEDLE = "TODO(bench-"
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "value",
    "result",
    "item",
    "index",
    "count",
    "data",
    "node",
    "self",
    "return",
]


def _source_line(rng: random.Random) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8)))
    return f"    {rng.choice(WORDS)} = compute({words!r})  # {rng.randint(0, 9999)}"


def _file_text(rng: random.Random, lines: int, needle_every: int) -> str:
    out = [f"import {rng.choice(WORDS)}", ""]
    for _ in range(lines):
        out.append(_source_line(rng))
        if rng.randrange(needle_every) == 0:
            out.append(f"    # {NEEDLE}{rng.randint(0, 99)}) tidy this up")
    return "\n".join(out) + "\n"


def build_tree(root: Path, files: int, nm_files: int, seed: int = 7) -> None:
    """Create `files` source files, `nm_files` files in node_modules and a small .git."""
    rng = random.Random(seed)
    exts = [".py", ".py", ".py", ".js", ".md", ".txt"]
    per_dir = 25
    for i in range(files):
        d = root / "src" / f"pkg{i // (per_dir * 20):03d}" / f"mod{(i // per_dir) % 20:02d}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        ext = exts[i % len(exts)]
        (d / f"file{i:05d}{ext}").write_text(_file_text(rng, rng.randint(20, 60), 1500))
    # A few binary / non-UTF-8 files and one oversized file, which both sides must skip.
    (root / "assets").mkdir()
    for i in range(50):
        (root / "assets" / f"img{i}.png").write_bytes(b"\x89PNG\xff\xfe" + os.urandom(2000))
    (root / "big.log").write_text(f"{NEEDLE}1) in a big file\n" * (MAX_BYTES // 20))
    nm = root / "node_modules"
    for i in range(nm_files):
        d = nm / f"package-{i // 100:04d}" / ("lib" if i % 2 else "dist")
        if i % 100 < 2:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"index{i:05d}.js").write_text(_file_text(rng, 15, 20))
    git = root / ".git" / "objects"
    for i in range(2000):
        d = git / f"{i % 256:02x}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i:038x}").write_bytes(os.urandom(200))


def _skipped(rel: str) -> bool:
    return any(part in SKIP for part in rel.split(os.sep)[:-1])


def baseline_glob(root: Path, pattern: str) -> list[str]:
    """os.walk everything; filter skip dirs and the pattern per file."""
    out = []
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if _skipped(rel) or os.path.islink(full):
                continue
            if fnmatch.fnmatchcase(name, pattern):
                out.append(rel.replace(os.sep, "/"))
    return sorted(set(out))


def baseline_grep(root: Path, pattern: str, include: str = "") -> list[str]:
    """os.walk everything; filter afterwards; per-line regex over every candidate file."""
    rx = re.compile(pattern)
    found: list[tuple[str, int, str]] = []
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if _skipped(rel) or os.path.islink(full):
                continue
            if include and not fnmatch.fnmatchcase(name, include):
                continue
            if os.path.getsize(full) > MAX_BYTES:
                continue
            try:
                with open(full, encoding="utf-8", newline="") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError):
                continue
            lines = text.replace("\r\n", "\n").split("\n")
            if lines[-1] == "":
                lines.pop()
            posix = rel.replace(os.sep, "/")
            for lineno, line in enumerate(lines, 1):
                if rx.search(line):
                    found.append((posix, lineno, line))
    found.sort(key=lambda hit: (hit[0], hit[1]))
    return [f"{path}:{lineno}:{line}" for path, lineno, line in found][:1000]


def _time(fn: Callable[[], list[str]]) -> tuple[float, list[str]]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


@dataclass(frozen=True)
class Case:
    """Medians (seconds) for one benchmark case."""

    label: str
    results: int
    ours: float
    baseline: float

    @property
    def speedup(self) -> float:
        return self.baseline / self.ours


def bench(
    label: str, ours: Callable[[], list[str]], base: Callable[[], list[str]], runs: int
) -> Case:
    """Time both alternately after one warm-up each; assert identical results."""
    _, ours_result = _time(ours)
    _, base_result = _time(base)
    if ours_result != base_result:
        raise AssertionError(
            f"{label}: results differ ({len(ours_result)} vs {len(base_result)} entries)"
        )
    ours_times, base_times = [], []
    for _ in range(runs):
        ours_times.append(_time(ours)[0])
        base_times.append(_time(base)[0])
    return Case(
        label, len(ours_result), statistics.median(ours_times), statistics.median(base_times)
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    """Build the tree, run the benchmarks, print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000, help="source files (default 20000)")
    parser.add_argument(
        "--node-modules-files", type=int, default=30_000, help="files in node_modules"
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per case (median)")
    parser.add_argument("--keep", action="store_true", help="keep the generated tree")
    args = parser.parse_args(argv)
    if args.files < 1 or args.node_modules_files < 0 or args.runs < 1:
        parser.error("--files and --runs must be positive, --node-modules-files >= 0")

    tmp = Path(tempfile.mkdtemp(prefix="bareagent-bench-")).resolve()
    try:
        started = time.perf_counter()
        build_tree(tmp, args.files, args.node_modules_files)
        build_s = time.perf_counter() - started
        total = sum(len(files) for _, _, files in os.walk(tmp))
        needle = re.escape(NEEDLE) + r"\d+\)"
        cases = [
            bench(
                "glob `*.py`",
                lambda: glob_files(tmp, "*.py"),
                lambda: baseline_glob(tmp, "*.py"),
                args.runs,
            ),
            bench(
                "glob `*.md`",
                lambda: glob_files(tmp, "*.md"),
                lambda: baseline_glob(tmp, "*.md"),
                args.runs,
            ),
            bench(
                f"grep `{needle}`",
                lambda: grep_files(tmp, needle),
                lambda: baseline_grep(tmp, needle),
                args.runs,
            ),
            bench(
                f"grep `{needle}` include `*.py`",
                lambda: grep_files(tmp, needle, include="*.py"),
                lambda: baseline_grep(tmp, needle, include="*.py"),
                args.runs,
            ),
            bench(
                r"grep `^import [ab]\w*$` (hits the 1000 cap)",
                lambda: grep_files(tmp, r"^import [ab]\w*$"),
                lambda: baseline_grep(tmp, r"^import [ab]\w*$"),
                args.runs,
            ),
        ]
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"machine: {os.cpu_count()} CPUs, {_cpu_model()}, {platform.system()} {platform.release()}"
    )
    print(f"python: {platform.python_implementation()} {platform.python_version()}")
    print(
        f"tree: {total} files ({args.files} source, {args.node_modules_files} in node_modules, "
        f"2000 in .git, 51 binary/oversized); built in {build_s:.1f} s; runs={args.runs}"
    )
    print()
    print("| case | results | ours (median) | baseline (median) | speedup |")
    print("|---|---:|---:|---:|---:|")
    for case in cases:
        print(
            f"| {case.label} | {case.results} | {case.ours * 1000:.0f} ms "
            f"| {case.baseline * 1000:.0f} ms | {case.speedup:.1f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
