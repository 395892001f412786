"""The small Python project the demo's agents work on, written into a fresh workspace."""

from __future__ import annotations

from pathlib import Path

CALC = '''\
"""A tiny statistics module: the project the BareAgent demo works on."""


def add(a: float, b: float) -> float:
    """The sum of two numbers."""
    return a + b


def mean(values: list[float]) -> float:
    """The arithmetic mean; an empty list is an error, not zero."""
    if not values:
        raise ValueError("mean() of an empty list")
    return sum(values) / len(values)
'''

REPORT = '''\
"""Formats scores for the weekly report."""

from calc import mean


def summary(scores: list[float]) -> str:
    """One line for the report."""
    return f"average score: {mean(scores):.1f} over {len(scores)} runs"
'''

TESTS = """\
import unittest

from calc import add, mean
from report import summary


class CalcTest(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(add(2, 3), 5)

    def test_mean(self) -> None:
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_mean_of_nothing_is_an_error(self) -> None:
        with self.assertRaises(ValueError):
            mean([])

    def test_summary(self) -> None:
        self.assertEqual(summary([3, 4]), "average score: 3.5 over 2 runs")


if __name__ == "__main__":
    unittest.main()
"""

# The build really compiles and packs the sources; the pauses stand in for a slow
# toolchain so the demo can show a long-running supervised job.
BUILD = '''\
"""Build calc: byte-compile the sources and pack them into dist/ (a few seconds)."""

import py_compile
import tarfile
import time
from pathlib import Path

SOURCES = ["calc.py", "report.py"]
STEPS = len(SOURCES) + 2

print(f"[1/{STEPS}] checking sources", flush=True)
time.sleep(1.2)
for number, source in enumerate(SOURCES, start=2):
    py_compile.compile(source, doraise=True)
    print(f"[{number}/{STEPS}] compiled {source}", flush=True)
    time.sleep(1.2)
Path("dist").mkdir(exist_ok=True)
with tarfile.open("dist/calc-0.1.tar.gz", "w:gz") as archive:
    for source in SOURCES:
        archive.add(source)
time.sleep(1.2)
print(f"[{STEPS}/{STEPS}] packed dist/calc-0.1.tar.gz", flush=True)
print("build ok", flush=True)
'''

README = """\
# calc

A tiny statistics module. `python build.py` builds `dist/calc-0.1.tar.gz`;
`python -m unittest` runs the tests.
"""

FILES = {
    "calc.py": CALC,
    "report.py": REPORT,
    "test_calc.py": TESTS,
    "build.py": BUILD,
    "README.md": README,
}


def write_project(workspace: Path) -> list[str]:
    """Write the demo project into `workspace`; returns the file names."""
    workspace.mkdir(parents=True, exist_ok=True)
    for name, text in FILES.items():
        (workspace / name).write_text(text, encoding="utf-8")
    return sorted(FILES)
