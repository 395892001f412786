"""Anthropic provider: message translation, and the real `anthropic` SDK against the
scripted server (plain, streaming, tools, thinking, errors, retries, base URL env)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bareagent.provider import LLMResponse, Provider, ProviderError, create_provider
from bareagent.provider.anthropic_provider import (
    parse_anthropic_message,
    to_anthropic_messages,
    to_anthropic_tools,
)
from bareagent.testing import ScriptedLLMServer

TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
    {"name": "glob", "description": "Find files", "parameters": {"type": "object"}},
]
NOTE = "<background-notifications>job 1 done</background-notifications>"

MakeProvider = Callable[..., Provider]


@pytest.fixture
def make_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeProvider]:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    made: list[Provider] = []

    def make(server: ScriptedLLMServer | None = None, **overrides: Any) -> Provider:
        config: dict[str, Any] = {
            "name": "anthropic",
            "model": "claude-test",
            "api_key": "sk-dummy-secret",
            "timeout": 5,
            "max_retries": 0,
        }
        if server is not None:
            config["base_url"] = server.anthropic_base_url
        config.update(overrides)
        provider = create_provider(config)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        provider.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tool_round(response: LLMResponse, content: str = "file text") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": content, "is_error": False}
            for c in response.tool_calls
        ],
    }


# --------------------------------------------------------------------------- translation


def test_leading_system_merged_and_later_system_kept_in_place() -> None:
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "Workspace: /w"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        {"role": "system", "content": NOTE},
        {"role": "user", "content": "next"},
    ]
    system, wire = to_anthropic_messages(messages)
    assert system == "You are terse.\n\nWorkspace: /w"
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[2]["content"] == [{"type": "text", "text": NOTE}, {"type": "text", "text": "next"}]


def test_notification_after_tool_results_keeps_results_first() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "glob", "input": {}}],
        },
        {"role": "system", "content": NOTE},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "x", "is_error": True}
            ],
        },
    ]
    system, wire = to_anthropic_messages(messages)
    assert system == ""
    assert wire[-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "x", "is_error": True},
        {"type": "text", "text": NOTE},
    ]


def test_assistant_blocks_filtered_for_the_api() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "from openai", "signature": ""},
                {"type": "thinking", "thinking": "signed", "signature": "s1"},
                {"type": "text", "text": ""},
                {"type": "text", "text": "answer"},
            ],
        },
        {"role": "assistant", "content": ""},
    ]
    _, wire = to_anthropic_messages(messages)
    assert wire[1]["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": "s1"},
        {"type": "text", "text": "answer"},
    ]
    assert len(wire) == 2
    with pytest.raises(ProviderError, match="role 'tool'"):
        to_anthropic_messages([{"role": "tool", "content": "x"}])


def test_tools_and_parse() -> None:
    assert to_anthropic_tools(TOOLS)[0] == {
        "name": "read_file",
        "description": "Read a file",
        "input_schema": TOOLS[0]["parameters"],
    }
    response = parse_anthropic_message(
        {
            "content": [
                {"type": "text", "text": "a"},
                {"type": "tool_use", "id": "t", "name": "glob", "input": {"pattern": "*"}},
                {"type": "text", "text": "b"},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 10},
        }
    )
    assert response.text == "ab" and response.stop_reason == "tool_use"
    assert (response.input_tokens, response.output_tokens) == (13, 4)
    assert response.tool_calls[0].input == {"pattern": "*"}


# --------------------------------------------------------------------------- through the SDK


def test_text_reply_and_request_shape(make_provider: MakeProvider) -> None:
    with ScriptedLLMServer({"turns": [{"text": "Hello there, friend."}]}) as server:
        provider = make_provider(server, max_tokens=321, temperature=0.2)
        messages = [{"role": "system", "content": "Be nice."}, {"role": "user", "content": "hi"}]
        response = provider.create(messages, TOOLS)
    assert response.text == "Hello there, friend."
    assert response.stop_reason == "end_turn" and not response.has_tool_calls
    assert response.input_tokens > 0 and response.output_tokens == 5  # 3 words + 2 marks
    (request,) = server.requests
    assert request.path == "/v1/messages" and request.turn == 0
    body = request.body
    assert body["model"] == "claude-test" and body["max_tokens"] == 321
    assert body["system"] == "Be nice." and body["temperature"] == 0.2
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["tools"][0]["input_schema"]["required"] == ["file_path"]
    assert "thinking" not in body
    assert "anthropic-version" in request.headers
    assert "sk-dummy-secret" not in repr(request.headers)


def test_tool_calls_and_result_round_trip(make_provider: MakeProvider) -> None:
    script = {
        "turns": [
            {
                "text": "Let me look.",
                "tool_calls": [
                    {"name": "read_file", "input": {"file_path": "a.py"}, "id": "toolu_fixed"},
                    {"name": "glob", "input": {"pattern": "*.py"}},
                ],
            },
            {"text": "Done.", "when": {"last_user_contains": "print(1)"}},
        ]
    }
    with ScriptedLLMServer(script) as server:
        provider = make_provider(server)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "read a.py"}]
        first = provider.create(messages, TOOLS)
        assert first.stop_reason == "tool_use"
        assert (first.tool_calls[0].id, first.tool_calls[0].name, first.tool_calls[0].input) == (
            "toolu_fixed",
            "read_file",
            {"file_path": "a.py"},
        )
        assert first.tool_calls[1].id.startswith("toolu_")
        messages += [first.to_message(), tool_round(first, "print(1)")]
        second = provider.create(messages, TOOLS)
    assert second.text == "Done." and server.requests[1].turn == 1
    sent = server.requests[1].body["messages"]
    assert sent[1]["content"][1:] == [
        {
            "type": "tool_use",
            "id": "toolu_fixed",
            "name": "read_file",
            "input": {"file_path": "a.py"},
        },
        {
            "type": "tool_use",
            "id": first.tool_calls[1].id,
            "name": "glob",
            "input": {"pattern": "*.py"},
        },
    ]
    assert sent[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": "print(1)"}
            for c in first.tool_calls
        ],
    }


def test_notification_placement_accepted_by_server(make_provider: MakeProvider) -> None:
    script = {"turns": [{"tool_calls": [{"name": "glob", "input": {}}]}, {"text": "ok"}]}
    with ScriptedLLMServer(script) as server:
        provider = make_provider(server)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "go"},
        ]
        first = provider.create(messages, TOOLS)
        messages += [first.to_message(), tool_round(first), {"role": "system", "content": NOTE}]
        assert provider.create(messages, TOOLS).text == "ok"
    body = server.requests[1].body
    assert body["system"] == "sys"
    last = body["messages"][-1]
    assert [b["type"] for b in last["content"]] == ["tool_result", "text"]
    assert last["content"][1]["text"] == NOTE


def test_streaming_text(make_provider: MakeProvider) -> None:
    text = "Streaming works in several small pieces."
    with ScriptedLLMServer({"turns": [{"text": text}]}) as server:
        events = list(make_provider(server).create_stream([{"role": "user", "content": "x"}], []))
    deltas = [e.text for e in events if e.type == "text"]
    assert len(deltas) > 3 and "".join(deltas) == text
    assert events[-1].type == "response" and [e.type for e in events].count("response") == 1
    final = events[-1].response
    assert final is not None and final.text == text and final.stop_reason == "end_turn"
    assert final.output_tokens == 7 and final.input_tokens > 0
    assert server.requests[0].body["stream"] is True


def test_streaming_tool_calls(make_provider: MakeProvider) -> None:
    big_input = {"file_path": "src/" + "deep/" * 20 + "x.py"}
    script = {
        "turns": [
            {
                "text": "Two calls.",
                "tool_calls": [
                    {"name": "read_file", "input": big_input},
                    {"name": "glob", "input": {"pattern": "**/*.md"}},
                ],
            }
        ]
    }
    with ScriptedLLMServer(script) as server:
        events = list(
            make_provider(server).create_stream([{"role": "user", "content": "x"}], TOOLS)
        )
    calls = [e.tool_call for e in events if e.type == "tool_call"]
    assert [(c.name, c.input) for c in calls if c] == [
        ("read_file", big_input),
        ("glob", {"pattern": "**/*.md"}),
    ]
    final = events[-1].response
    assert final is not None and final.stop_reason == "tool_use"
    assert final.tool_calls == calls


def test_thinking_round_trip(make_provider: MakeProvider) -> None:
    script = {
        "turns": [
            {"thinking": "The user wants a file.", "tool_calls": [{"name": "glob", "input": {}}]},
            {"text": "Finished."},
            {"text": "never reached"},
        ]
    }
    with ScriptedLLMServer(script) as server:
        provider = make_provider(server, thinking_budget=2048)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "find it"}]
        events = list(provider.create_stream(messages, TOOLS))
        assert "".join(e.text for e in events if e.type == "thinking") == "The user wants a file."
        first = events[-1].response
        assert first is not None and first.thinking == "The user wants a file."
        thinking_block = first.content_blocks[0]
        assert thinking_block["type"] == "thinking" and thinking_block["signature"]
        messages += [first.to_message(), tool_round(first)]
        assert provider.create(messages, TOOLS).text == "Finished."
        sent = server.requests[1].body
        assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert sent["messages"][1]["content"][0] == thinking_block
        # A tampered signature is what the real API rejects; the server does too.
        messages[1]["content"][0]["signature"] = "forged"
        with pytest.raises(ProviderError, match=r"Anthropic API error 400: .*signature"):
            provider.create(messages, TOOLS)


def test_unknown_model_is_one_line_404(make_provider: MakeProvider) -> None:
    with ScriptedLLMServer({"turns": [{"text": "x"}], "models": ["claude-test"]}) as server:
        with pytest.raises(ProviderError) as info:
            make_provider(server, model="nope").create([{"role": "user", "content": "x"}], [])
        with pytest.raises(ProviderError) as streamed:
            list(
                make_provider(server, model="nope").create_stream(
                    [{"role": "user", "content": "x"}], []
                )
            )
        assert server.remaining_turns == 1
    assert str(info.value) == "Anthropic API error 404: model 'nope' not found"
    assert str(streamed.value) == str(info.value)


@pytest.mark.timeout(10)
def test_connection_refused_fails_fast(make_provider: MakeProvider) -> None:
    port = closed_port()
    provider = make_provider(base_url=f"http://127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        provider.create([{"role": "user", "content": "x"}], [])
    assert time.monotonic() - started < 3
    assert str(info.value) == f"cannot reach the model server at http://127.0.0.1:{port}"


@pytest.mark.timeout(10)
def test_timeout_is_reported(make_provider: MakeProvider) -> None:
    with ScriptedLLMServer({"turns": [{"text": "late", "delay": 1.5}]}) as server:
        provider = make_provider(server, timeout=0.3)
        with pytest.raises(ProviderError, match=r"did not answer within 0\.3s"):
            provider.create([{"role": "user", "content": "x"}], [])


@pytest.mark.timeout(20)
def test_server_error_then_success_is_retried_by_sdk(make_provider: MakeProvider) -> None:
    script = {
        "turns": [
            {"error": {"status": 500, "message": "internal"}},
            {"error": {"status": 429, "message": "slow down", "retry_after": 0.01}},
            {"text": "third time lucky"},
        ]
    }
    with ScriptedLLMServer(script) as server:
        response = make_provider(server, max_retries=2).create(
            [{"role": "user", "content": "x"}], []
        )
    assert response.text == "third time lucky"
    assert [(r.turn, r.status) for r in server.requests] == [(0, 500), (1, 429), (2, 200)]


def test_server_error_without_retries(make_provider: MakeProvider) -> None:
    script = {"turns": [{"error": {"status": 529, "message": "Overloaded"}}]}
    with ScriptedLLMServer(script) as server, pytest.raises(ProviderError) as info:
        make_provider(server).create([{"role": "user", "content": "x"}], [])
    assert str(info.value) == "Anthropic API error 529: Overloaded"


def test_base_url_env_is_honoured(
    make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedLLMServer({"turns": [{"text": "via env"}, {"text": "via config"}]}) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        assert make_provider().create([{"role": "user", "content": "x"}], []).text == "via env"
        # A configured base_url wins over the environment.
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
        provider = make_provider(base_url=server.anthropic_base_url)
        assert provider.create([{"role": "user", "content": "x"}], []).text == "via config"
    assert len(server.requests) == 2


def test_key_from_default_env(make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-secret")
    with ScriptedLLMServer({"turns": [{"text": "ok"}]}) as server:
        provider = make_provider(server, api_key=None)
        assert provider.create([{"role": "user", "content": "x"}], []).text == "ok"
    assert "env-secret" not in repr(server.requests[0].headers)
