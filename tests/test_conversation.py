"""Whole conversations: agent_loop + real SDK providers + the scripted server (SPEC §2-§4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bareagent.core.loop import LLMCallError, LoopOptions, agent_loop
from bareagent.core.tools import get_handlers, get_tools
from bareagent.permission import PermissionGuard, PermissionMode
from bareagent.provider import Provider, create_provider
from bareagent.testing import ScriptedLLMServer

pytestmark = pytest.mark.timeout(60)

FLAVOURS = [
    ("anthropic", "chat", False),
    ("anthropic", "chat", True),
    ("openai", "chat", False),
    ("openai", "chat", True),
    ("openai", "responses", False),
    ("openai", "responses", True),
]


@pytest.fixture(params=FLAVOURS, ids=lambda f: f"{f[0]}-{f[1]}-{'stream' if f[2] else 'plain'}")
def flavour(request: pytest.FixtureRequest) -> tuple[str, str, bool]:
    return request.param  # type: ignore[no-any-return]


def make_provider(server: ScriptedLLMServer, name: str, api: str) -> Provider:
    base = server.anthropic_base_url if name == "anthropic" else server.openai_base_url
    return create_provider(
        {"name": name, "api": api, "model": "m", "api_key": "k", "base_url": base,
         "max_retries": 0, "timeout": 10.0}
    )  # fmt: skip


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedLLMServer] = []

    def start(script: dict[str, Any]) -> ScriptedLLMServer:
        server = ScriptedLLMServer(script).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def converse(
    server: ScriptedLLMServer,
    flavour: tuple[str, str, bool],
    workspace: Path,
    mode: PermissionMode = PermissionMode.BYPASS,
    max_iterations: int = 20,
) -> tuple[str, list[dict[str, Any]]]:
    name, api, stream = flavour
    provider = make_provider(server, name, api)
    guard = PermissionGuard(mode, fail_closed=True)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a test agent."},
        {"role": "user", "content": "do the thing"},
    ]
    opts = LoopOptions(max_iterations=max_iterations, stream=stream)
    text = agent_loop(
        messages, provider, get_tools(), get_handlers(workspace),
        permission_guard=guard, options=opts,
    )  # fmt: skip
    return text, messages


def tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
    ]


def request_text(server: ScriptedLLMServer, index: int) -> str:
    return json.dumps(server.requests[index].body)


def test_tools_run_and_results_feed_back(
    serve: Any, flavour: tuple[str, str, bool], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    server = serve(
        {
            "turns": [
                {"text": "Let me look.", "tool_calls": [
                    {"name": "read_file", "input": {"file_path": "notes.txt"}},
                    {"name": "grep", "input": {"pattern": "bet"}},
                ]},
                {"tool_calls": [{"name": "write_file",
                                 "input": {"file_path": "out.txt", "content": "done"}}]},
                {"text": "All done."},
            ]
        }
    )  # fmt: skip
    text, messages = converse(server, flavour, tmp_path)
    assert text == "All done."
    assert (tmp_path / "out.txt").read_text() == "done"
    results = [b["content"] for b in tool_results(messages)]
    assert results == [
        "1: alpha\n2: beta",
        '[\n  "notes.txt:2:beta"\n]',
        "Wrote 4 characters to out.txt",
    ]
    assert len(server.requests) == 3
    assert "1: alpha" in request_text(server, 1)
    assert "Wrote 4 characters to out.txt" in request_text(server, 2)


def test_plan_mode_denies_and_unknown_and_errors(
    serve: Any, flavour: tuple[str, str, bool], tmp_path: Path
) -> None:
    server = serve(
        {
            "turns": [
                {"tool_calls": [
                    {"name": "bash", "input": {"command": "touch pwned"}},
                    {"name": "no_such_tool", "input": {}},
                    {"name": "read_file", "input": {"file_path": "missing.txt"}},
                    {"name": "read_file", "input": {"file_path": "/etc/passwd"}},
                ]},
                {"text": "understood"},
            ]
        }
    )  # fmt: skip
    text, messages = converse(server, flavour, tmp_path, mode=PermissionMode.PLAN)
    assert text == "understood"
    assert not (tmp_path / "pwned").exists()
    blocks = tool_results(messages)
    assert [b["is_error"] for b in blocks] == [True, True, True, True]
    assert blocks[0]["content"] == "User denied."
    assert blocks[1]["content"] == "Unknown tool: no_such_tool"
    assert blocks[2]["content"].startswith("Error: FileNotFoundError:")
    assert blocks[3]["content"].startswith("Error: PermissionError:")
    assert "User denied." in request_text(server, 1)
    assert "Unknown tool: no_such_tool" in request_text(server, 1)


def test_iteration_limit(serve: Any, flavour: tuple[str, str, bool], tmp_path: Path) -> None:
    loop_turn = {"tool_calls": [{"name": "todo_read", "input": {}}]}
    server = serve({"turns": [loop_turn] * 5})
    with pytest.raises(LLMCallError, match="3 iterations"):
        converse(server, flavour, tmp_path, max_iterations=3)
    assert len(server.requests) == 3


def test_provider_error_surfaces_as_llm_call_error(
    serve: Any, flavour: tuple[str, str, bool], tmp_path: Path
) -> None:
    server = serve({"models": ["other"], "turns": [{"text": "never"}]})
    with pytest.raises(LLMCallError, match=r"^LLM call failed: .*404"):
        converse(server, flavour, tmp_path)
