"""The demo's scripted conversation (format: `bareagent.testing.script`).

One script serves four agents at once: the lead (the user's session), teammates alice
and bob, and an `explore` subagent. Every turn says whose it is with `when`: teammates
and the subagent by their system prompt, the lead by text that only its own
conversation contains (the kickoff marker, its tool results, the report marker).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from typing import Any

from bareagent.demo.project import FILES

KICKOFF = "[demo:kickoff]"
REPORT = "[demo:report]"
EXPLORE_MARKER = "[demo:explore]"
BUILD_JOB = "build"
EXPLORE_FINDING = "mean() is defined in"

TEAMMATES = {
    "alice": ("reviewer", "You review plans for risk and missing steps. Answer APPROVE or REJECT."),
    "bob": ("tester", "You run the test suite when asked and report the result."),
}

PLAN = (
    "Release calc 0.1:\n"
    "1. bob runs the unit tests\n"
    "2. build dist/calc-0.1.tar.gz in the background (python build.py)\n"
    "3. an explore subagent lists every caller of mean(), whose empty-list error is new\n"
    "4. ship only if the tests pass and the build succeeds"
)


def python_command(*args: str) -> str:
    """A shell command line running this interpreter (bash, or powershell on Windows)."""
    if sys.platform == "win32":  # untested: powershell needs `&` to run a quoted path
        return "& " + " ".join(f'"{part}"' for part in (sys.executable, *args))
    return shlex.join([sys.executable, *args])


TEST_REQUEST_MARKER = "Please run the unit tests"


def test_request() -> str:
    """The lead's mail to bob."""
    return f"{TEST_REQUEST_MARKER}: `{python_command('-m', 'unittest', '-q')}`. Tell me the result."


def allow_rules() -> list[str]:
    """The calls the demo needs beyond `default` mode; other calls still ask.

    Rules match by prefix, so `team_spawn(alice)` would also cover a teammate `alice2`.
    """
    return [
        "team_spawn(alice)",
        "team_spawn(bob)",
        "team_send(alice)",
        "team_send(bob)",
        "subagent(explore)",
        f"background_run(prefix:{python_command('build.py')})",
        # Teammates inherit the rules; bob runs the tests with this interpreter.
        f"bash(prefix:{python_command('-m', 'unittest')})",
    ]


def lead_prompt() -> str:
    """The user's request that starts the demo."""
    return (
        "Get calc 0.1 ready for release. Start the team (alice reviews, bob tests), have "
        "alice review the plan and bob run the tests, build in the background and find out "
        "who calls mean(). " + KICKOFF
    )


def report_prompt() -> str:
    """The user's second request, after the background work has finished."""
    return "Everything you started has finished. Summarise where the release stands. " + REPORT


def _calls(pattern: str) -> list[str]:
    """`file:line` of every line of the project matching `pattern` (as grep reports)."""
    found = []
    for name in sorted(FILES):
        for number, line in enumerate(FILES[name].splitlines(), start=1):
            if re.search(pattern, line):
                found.append(f"{name}:{number}")
    return found


def _explore_answer() -> str:
    hits = _calls(r"\bmean\(")
    defined = next(h for h in hits if h.startswith("calc.py"))
    callers = [h for h in hits if not h.startswith("calc.py")]
    return (
        f"{EXPLORE_FINDING} {defined.split(':')[0]} (line {defined.split(':')[1]}) and called "
        f"from {', '.join(callers)}. report.summary() passes its scores straight through, so "
        "an empty score list now raises ValueError there; test_calc.py already covers that "
        "case."
    )


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "input": arguments}


def _lead_turns() -> list[dict[str, Any]]:
    return [
        {
            "when": {"last_user_contains": KICKOFF},
            "text": "Starting the team: alice reviews plans, bob runs tests.",
            "tool_calls": [_call("team_spawn", name="alice"), _call("team_spawn", name="bob")],
        },
        {
            "when": {"last_user_contains": "Spawned teammate bob"},
            "text": (
                "Sending alice the plan for review and bob the test run, starting the build "
                "and asking an explore subagent about mean()."
            ),
            "tool_calls": [
                _call(
                    "team_send",
                    to_agent="alice",
                    content=json.dumps({"protocol": "plan_approval", "content": PLAN}),
                ),
                _call("team_send", to_agent="bob", content=test_request()),
                _call(
                    "background_run",
                    command=python_command("build.py"),
                    task_id=BUILD_JOB,
                    timeout=120,
                ),
                _call(
                    "subagent",
                    agent_type="explore",
                    task=f"{EXPLORE_MARKER} Find every caller of mean() in this project.",
                ),
            ],
        },
        {
            "when": {"last_user_contains": EXPLORE_FINDING},
            "text": (
                "The review, the test run and the build are under way in their own "
                "processes; I will report when they are done."
            ),
        },
        {
            "when": {"last_user_contains": REPORT},
            "text": (
                "Release status for calc 0.1: alice reviewed the plan, bob ran the unit "
                "tests, the build job finished and the subagent mapped the callers of "
                "mean(). Details are in the notifications above; the artefact is "
                "dist/calc-0.1.tar.gz."
            ),
        },
    ]


def _teammate_turns() -> list[dict[str, Any]]:
    alice = "You are teammate 'alice'"
    bob = "You are teammate 'bob'"
    return [
        {
            "when": {"system_contains": alice, "last_user_contains": "<plan>"},
            "text": "Checking the plan against calc.py first.",
            "tool_calls": [_call("read_file", file_path="calc.py")],
        },
        {
            "when": {"system_contains": alice, "last_user_contains": "def mean"},
            "text": (
                "APPROVE. The order is right: tests and build gate the release. mean() now "
                "raises on an empty list, so step 3 (finding its callers) is the right "
                "check before shipping."
            ),
        },
        {
            "when": {"system_contains": bob, "last_user_contains": TEST_REQUEST_MARKER},
            "text": "Running the unit tests.",
            "tool_calls": [_call("bash", command=python_command("-m", "unittest", "-q"))],
        },
        # Two endings; the real test output decides which one the model gives.
        {
            "when": {"system_contains": bob, "last_user_contains": "\nOK"},
            "text": "All unit tests pass (python -m unittest -q: OK).",
        },
        {
            "when": {"system_contains": bob, "last_user_contains": "FAILED"},
            "text": "The unit tests FAIL; see the output above. Do not ship.",
        },
    ]


def _subagent_turns() -> list[dict[str, Any]]:
    explore = "You are a explore subagent"
    return [
        {
            "when": {"system_contains": explore, "last_user_contains": EXPLORE_MARKER},
            "text": "Searching for calls.",
            "tool_calls": [_call("grep", pattern=r"\bmean\(", include="*.py")],
        },
        {
            "when": {"system_contains": explore, "last_user_contains": "report.py:"},
            "text": _explore_answer(),
        },
    ]


def demo_script() -> dict[str, Any]:
    """The whole scripted conversation for `ScriptedLLMServer`."""
    return {
        "description": "bareagent demo: lead, two teammates and an explore subagent",
        "turns": [*_lead_turns(), *_teammate_turns(), *_subagent_turns()],
    }
