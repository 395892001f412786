"""Allow/deny rule parsing and matching."""

from __future__ import annotations

import logging

import pytest

from bareagent.permission import PermissionGuard, PermissionMode, parse_rule, parse_rules
from bareagent.permission.rules import subject_of


@pytest.mark.parametrize(
    ("text", "tool", "prefix"),
    [
        ("bash(prefix:git commit*)", "bash", "git commit"),
        ("Bash(prefix:git commit*)", "bash", "git commit"),
        ("BASH ( prefix:npm run test** )", "bash", "npm run test"),
        ("bash(prefix:make *)", "bash", "make "),
        ("bash(git commit*)", "bash", "git commit"),
        ("bash(npm run test:*)", "bash", "npm run test"),
        ("bash(prefix:echo (a) b)", "bash", "echo (a) b"),
        ("bash", "bash", None),
        ("Bash", "bash", None),
        ("bash()", "bash", None),
        ("bash(*)", "bash", None),
        ("bash(prefix:*)", "bash", None),
        ("write_file(prefix:docs/)", "write_file", "docs/"),
        ("  team_send  ", "team_send", None),
    ],
)
def test_parse_rule(text: str, tool: str, prefix: str | None) -> None:
    rule = parse_rule(text)
    assert rule is not None
    assert (rule.tool, rule.prefix, rule.source) == (tool, prefix, text)
    assert rule.whole_tool is (prefix is None)


@pytest.mark.parametrize("text", ["", "   ", "bash(git", "(git)", "9bash", "bash)x(", 42, None])
def test_unparseable_rules_are_ignored_with_a_warning(
    text: object, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="bareagent.permission.rules"):
        assert parse_rule(text) is None
    assert "ignoring permission rule" in caplog.text


def test_parse_rules_keeps_good_rules_in_order() -> None:
    rules = parse_rules(["bash(prefix:ls)", "bad(", "write_file", 3])
    assert [r.source for r in rules] == ["bash(prefix:ls)", "write_file"]
    assert parse_rules(None) == []
    assert [r.tool for r in parse_rules("bash")] == ["bash"]


@pytest.mark.parametrize(
    ("rule", "tool", "tool_input", "expected"),
    [
        ("bash(prefix:git commit*)", "bash", {"command": "git commit -m x"}, True),
        ("bash(prefix:git commit*)", "bash", {"command": "   git commit"}, True),
        ("bash(prefix:git commit*)", "bash", {"command": "git commits"}, True),
        ("bash(prefix:git commit*)", "bash", {"command": "git status"}, False),
        ("bash(prefix:git commit*)", "BASH", {"command": "git commit"}, True),
        ("bash(prefix:git commit*)", "background_run", {"command": "git commit"}, False),
        ("bash(prefix:git commit*)", "bash", {"command": 3}, False),
        ("bash(prefix:git commit*)", "bash", {}, False),
        ("bash", "bash", {}, True),
        ("write_file(prefix:docs/)", "write_file", {"file_path": "docs/a.md"}, True),
        ("write_file(prefix:docs/)", "write_file", {"file_path": "./docs/a.md"}, True),
        ("write_file(prefix:docs/)", "write_file", {"file_path": "docs/../a.md"}, False),
        ("write_file(prefix:docs/)", "edit_file", {"file_path": "docs/a.md"}, False),
        ("team_send(prefix:bob)", "team_send", {"to_agent": "bob"}, True),
        ("mystery(prefix:x)", "mystery", {"anything": "x"}, False),
        ("mystery", "Mystery", {"anything": "x"}, True),
    ],
)
def test_rule_matching(rule: str, tool: str, tool_input: dict[str, object], expected: bool) -> None:
    parsed = parse_rule(rule)
    assert parsed is not None
    assert parsed.matches(tool, tool_input) is expected


def test_subject_of() -> None:
    assert subject_of("bash", {"command": "ls"}) == "ls"
    assert subject_of("edit_file", {"file_path": "a\\b/../c.txt"}) == "a/c.txt"
    assert subject_of("unknown", {"command": "ls"}) is None


# --- rules inside the guard ------------------------------------------------------------


def guard(allow: list[str] = [], deny: list[str] = [], mode: str = "default") -> PermissionGuard:  # noqa: B006
    return PermissionGuard(PermissionMode.parse(mode), allow_rules=allow, deny_rules=deny)


@pytest.mark.parametrize(
    ("allow", "command", "confirm"),
    [
        (["bash(prefix:make)"], "make build", False),
        (["bash(prefix:make)"], "  make build", False),
        (["bash(prefix:make)"], "make build 2>&1 | tail -20", False),
        (["bash(prefix:make)"], "make build > build.log", False),
        (["bash(prefix:make)"], "make build && ./deploy.sh", True),
        (["bash(prefix:make)"], "make build; python x.py", True),
        (["bash(prefix:make)"], "make $(python gen.py)", True),
        (["bash(prefix:make)", "bash(prefix:./deploy.sh)"], "make && ./deploy.sh", False),
        (["bash(prefix:cd web && npm run build)"], "cd web && npm run build", False),
        (["bash(prefix:cd web && npm run build)"], "cd web && npm run build && make", True),
        (["bash(prefix:npm)"], "npm run build", False),
        (["bash(prefix:npm)"], "npm publish", True),
        (["bash"], "python x.py && make", False),
        (["bash"], "python x.py && rm -rf /", True),
        (["bash(prefix:git status)"], "make && git status", True),
        (["bash(prefix:make *)"], "make", True),
        (["bash(prefix:make *)"], "make all", False),
    ],
)
def test_allow_rules_cover_only_their_own_commands(
    allow: list[str], command: str, confirm: bool
) -> None:
    assert guard(allow).requires_confirm("bash", {"command": command}) is confirm


@pytest.mark.parametrize(
    ("deny", "command", "confirm"),
    [
        (["bash(prefix:git push)"], "git push", True),
        (["bash(prefix:git push)"], "git status && git push origin", True),
        (["bash(prefix:git push)"], "(cd x; git push)", True),
        (["bash(prefix:git push)"], "echo $(git push)", True),
        (["bash(prefix:git push)"], "git  push", True),
        (["bash(prefix:git push)"], "command git push", True),
        (["bash(prefix:git push)"], "nice -n 5 git push", True),
        (["bash(prefix:git push)"], "git status", False),
        (["bash(prefix:ls)"], "ls -la", True),
        (["bash(prefix:cat)"], "ls | cat", True),
        (["write_file"], "ls", False),
    ],
)
def test_deny_rules_match_every_simple_command(
    deny: list[str], command: str, confirm: bool
) -> None:
    assert guard(deny=deny).requires_confirm("bash", {"command": command}) is confirm


def test_deny_rule_on_safe_tool_warns_and_has_no_effect(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="bareagent.permission.guard"):
        g = guard(deny=["read_file"])
    assert "has no effect" in caplog.text
    assert not g.requires_confirm("read_file", {"file_path": "x"})


def test_allow_rule_for_other_tool_does_not_work_in_plan() -> None:
    g = guard(allow=["write_file", "bash"], mode="plan")
    assert g.requires_confirm("write_file", {"file_path": "x"})
    assert g.requires_confirm("bash", {"command": "ls"})
