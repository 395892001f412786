"""OpenAI providers (Chat Completions and Responses API): translation, and the real `openai`
SDK against the scripted server (plain, streaming, tools, errors, retries, base URL env)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bareagent.provider import LLMResponse, Provider, ProviderError, create_provider
from bareagent.provider.openai_provider import (
    map_finish_reason,
    parse_tool_arguments,
    to_openai_chat_messages,
    tool_arguments_json,
)
from bareagent.provider.openai_responses import parse_responses_output, to_responses_input
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
USER = [{"role": "user", "content": "hi"}]

MakeProvider = Callable[..., Provider]


@pytest.fixture
def make_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeProvider]:
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    made: list[Provider] = []

    def make(server: ScriptedLLMServer | None = None, **overrides: Any) -> Provider:
        config: dict[str, Any] = {
            "name": "openai",
            "model": "gpt-test",
            "api_key": "sk-dummy-secret",
            "timeout": 5,
            "max_retries": 0,
        }
        if server is not None:
            config["base_url"] = server.openai_base_url
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


def run(provider: Provider, messages: list[dict[str, Any]], stream: bool) -> LLMResponse:
    if not stream:
        return provider.create(messages, TOOLS)
    events = list(provider.create_stream(messages, TOOLS))
    assert events[-1].type == "response"
    assert [e.type for e in events].count("response") == 1
    final = events[-1].response
    assert final is not None
    assert [e.tool_call for e in events if e.type == "tool_call"] == final.tool_calls
    assert "".join(e.text for e in events if e.type == "text") == final.text
    return final


# --------------------------------------------------------------------------- translation


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ("   ", {}),
        (None, {}),
        ("not json {", {"raw_arguments": "not json {"}),
        ("[1, 2]", {"value": [1, 2]}),
        ("42", {"value": 42}),
        ('"s"', {"value": "s"}),
    ],
)
def test_parse_tool_arguments(raw: str | None, parsed: dict[str, Any]) -> None:
    assert parse_tool_arguments(raw) == parsed


def test_raw_arguments_go_back_verbatim() -> None:
    assert tool_arguments_json({"raw_arguments": "not json {"}) == "not json {"
    assert json.loads(tool_arguments_json({"raw_arguments": "x", "b": 1})) == {
        "raw_arguments": "x",
        "b": 1,
    }


def test_finish_reason_mapping() -> None:
    assert map_finish_reason("stop", False) == "end_turn"
    assert map_finish_reason("length", False) == "max_tokens"
    assert map_finish_reason("tool_calls", True) == "tool_use"
    assert map_finish_reason("stop", True) == "tool_use"
    assert map_finish_reason(None, False) == "end_turn"


def test_chat_messages_translation() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "c1", "name": "glob", "input": {"pattern": "*"}},
                {"type": "tool_use", "id": "c2", "name": "read_file", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "a.py"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "boom", "is_error": True},
                {"type": "text", "text": "also this"},
            ],
        },
        {"role": "system", "content": NOTE},
    ]
    wire = to_openai_chat_messages(messages)
    assert [m["role"] for m in wire] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "system",
    ]
    assert wire[2] == {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "glob", "arguments": '{"pattern": "*"}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        ],
    }
    assert wire[3] == {"role": "tool", "tool_call_id": "c1", "content": "a.py"}
    assert wire[4]["tool_call_id"] == "c2" and wire[5]["content"] == "also this"
    assert wire[6] == {"role": "system", "content": NOTE}


def test_responses_input_translation() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "c1", "name": "glob", "input": {"pattern": "*"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a"}]},
        {"role": "system", "content": NOTE},
    ]
    instructions, items = to_responses_input(messages)
    assert instructions == "sys"
    assert items == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "c1", "name": "glob", "arguments": '{"pattern": "*"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "a"},
        {"role": "system", "content": NOTE},
    ]


def test_parse_responses_incomplete() -> None:
    response = parse_responses_output(
        {
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "cut"}]}],
            "usage": {"input_tokens": 2, "output_tokens": 9},
        }
    )
    assert (response.text, response.stop_reason, response.output_tokens) == ("cut", "max_tokens", 9)


# --------------------------------------------------------------------------- chat through SDK


def test_chat_text_reply_and_request_shape(make_provider: MakeProvider) -> None:
    with ScriptedLLMServer({"turns": [{"text": "Hello there."}]}) as server:
        provider = make_provider(server, max_tokens=77, temperature=0.5)
        response = provider.create([{"role": "system", "content": "Be nice."}, *USER], TOOLS)
    assert (response.text, response.stop_reason) == ("Hello there.", "end_turn")
    assert response.input_tokens > 0 and response.output_tokens == 3
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    body = request.body
    assert body["max_completion_tokens"] == 77 and body["temperature"] == 0.5
    assert body["messages"] == [{"role": "system", "content": "Be nice."}, *USER]
    assert body["tools"][1] == {
        "type": "function",
        "function": {"name": "glob", "description": "Find files", "parameters": {"type": "object"}},
    }
    assert "sk-dummy-secret" not in repr(request.headers)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_tool_calls_and_result_round_trip(
    make_provider: MakeProvider, api: str, stream: bool
) -> None:
    big = {"file_path": "src/" + "nested/" * 15 + "a.py"}
    script = {
        "turns": [
            {
                "text": "Reading both.",
                "thinking": "need two files",
                "tool_calls": [
                    {"name": "read_file", "input": big, "id": "call_fixed"},
                    {"name": "glob", "input": {"pattern": "*.py"}},
                ],
            },
            {"text": "All read.", "when": {"last_user_contains": "CONTENT"}},
        ]
    }
    with ScriptedLLMServer(script) as server:
        provider = make_provider(server, api=api)
        messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, *USER]
        first = run(provider, messages, stream)
        assert first.stop_reason == "tool_use" and first.text == "Reading both."
        assert first.thinking == "need two files"
        assert [(c.name, c.input) for c in first.tool_calls] == [
            ("read_file", big),
            ("glob", {"pattern": "*.py"}),
        ]
        assert first.tool_calls[0].id == "call_fixed"
        assert first.tool_calls[1].id.startswith("call_")
        assert first.input_tokens > 0 and first.output_tokens > 0
        messages += [first.to_message(), tool_round(first, "CONTENT")]
        second = run(provider, messages, stream)
    assert second.text == "All read." and server.requests[1].turn == 1
    body = server.requests[1].body
    ids = [c.id for c in first.tool_calls]
    if api == "chat":
        assert body["messages"][2]["tool_calls"][0]["function"] == {
            "name": "read_file",
            "arguments": json.dumps(big),
        }
        assert body["messages"][3:] == [
            {"role": "tool", "tool_call_id": ids[0], "content": "CONTENT"},
            {"role": "tool", "tool_call_id": ids[1], "content": "CONTENT"},
        ]
        if stream:
            assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    else:
        assert body["instructions"] == "sys" and body["store"] is False
        assert body["tools"][0]["type"] == "function" and body["tools"][0]["name"] == "read_file"
        assert [i.get("type") for i in body["input"]] == [
            None,
            None,
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
        ]
        assert body["input"][4] == {
            "type": "function_call_output",
            "call_id": ids[0],
            "output": "CONTENT",
        }


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_argument_fallbacks(make_provider: MakeProvider, api: str, stream: bool) -> None:
    script = {
        "turns": [
            {
                "tool_calls": [
                    {"name": "glob", "arguments": "pattern=*.py"},
                    {"name": "glob", "arguments": "[1, 2]"},
                    {"name": "glob", "arguments": ""},
                ]
            },
            {"text": "ok"},
        ]
    }
    with ScriptedLLMServer(script) as server:
        provider = make_provider(server, api=api)
        first = run(provider, list(USER), stream)
        assert [c.input for c in first.tool_calls] == [
            {"raw_arguments": "pattern=*.py"},
            {"value": [1, 2]},
            {},
        ]
        second = run(provider, [*USER, first.to_message(), tool_round(first)], stream)
    assert second.text == "ok"
    body = server.requests[1].body
    if api == "chat":
        sent = [c["function"]["arguments"] for c in body["messages"][1]["tool_calls"]]
    else:
        sent = [i["arguments"] for i in body["input"] if i.get("type") == "function_call"]
    assert sent[0] == "pattern=*.py"


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_streaming_text_and_length(make_provider: MakeProvider, api: str) -> None:
    text = "one two three four five six"
    script = {"turns": [{"text": text, "stop_reason": "max_tokens"}]}
    with ScriptedLLMServer(script) as server:
        events = list(make_provider(server, api=api).create_stream(USER, []))
    deltas = [e.text for e in events if e.type == "text"]
    assert len(deltas) == 6 and "".join(deltas) == text
    final = events[-1].response
    assert final is not None and final.stop_reason == "max_tokens"
    assert final.output_tokens == 6 and final.input_tokens > 0


def test_system_notifications_stay_in_place(make_provider: MakeProvider) -> None:
    script = {"turns": [{"text": "ok", "when": {"system_contains": "job 1 done"}}]}
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
        {"role": "system", "content": NOTE},
        {"role": "user", "content": "c"},
    ]
    with ScriptedLLMServer(script) as server:
        assert make_provider(server).create(messages, []).text == "ok"
    roles = [(m["role"], m["content"]) for m in server.requests[0].body["messages"]]
    assert roles == [
        ("system", "sys"),
        ("user", "a"),
        ("assistant", "b"),
        ("system", NOTE),
        ("user", "c"),
    ]


def test_preset_uses_max_tokens_and_needs_no_key(make_provider: MakeProvider) -> None:
    with ScriptedLLMServer({"turns": [{"text": "local"}]}) as server:
        provider = make_provider(server, name="vllm", api_key=None, max_tokens=55)
        assert provider.create(USER, []).text == "local"
    body = server.requests[0].body
    assert body["max_tokens"] == 55 and "max_completion_tokens" not in body


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_unknown_model_is_one_line_404(make_provider: MakeProvider, api: str) -> None:
    with ScriptedLLMServer({"turns": [{"text": "x"}], "models": ["gpt-test"]}) as server:
        with pytest.raises(ProviderError) as info:
            make_provider(server, model="nope", api=api).create(USER, [])
        with pytest.raises(ProviderError) as streamed:
            list(make_provider(server, model="nope", api=api).create_stream(USER, []))
        assert server.remaining_turns == 1
    assert str(info.value) == "OpenAI API error 404: model 'nope' not found"
    assert str(streamed.value) == str(info.value)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_connection_refused_fails_fast(make_provider: MakeProvider, api: str) -> None:
    port = closed_port()
    provider = make_provider(base_url=f"http://127.0.0.1:{port}/v1", api=api)
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        provider.create(USER, [])
    assert time.monotonic() - started < 3
    assert str(info.value) == f"cannot reach the model server at http://127.0.0.1:{port}/v1"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_server_error_then_success_is_retried_by_sdk(make_provider: MakeProvider, api: str) -> None:
    script = {
        "turns": [
            {"error": {"status": 503, "message": "busy"}},
            {"error": {"status": 429, "message": "slow down", "retry_after": 0.01}},
            {"text": "made it"},
        ]
    }
    with ScriptedLLMServer(script) as server:
        response = make_provider(server, api=api, max_retries=2).create(USER, [])
    assert response.text == "made it"
    assert [r.status for r in server.requests] == [503, 429, 200]


def test_rate_limit_without_retries_is_reported(make_provider: MakeProvider) -> None:
    script = {"turns": [{"error": {"status": 429, "message": "Rate limit reached\nfor gpt"}}]}
    with ScriptedLLMServer(script) as server, pytest.raises(ProviderError) as info:
        make_provider(server).create(USER, [])
    assert str(info.value) == "OpenAI API error 429: Rate limit reached for gpt"


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_base_url_env_is_honoured(
    make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    with ScriptedLLMServer({"turns": [{"text": "via env"}, {"text": "via config"}]}) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        assert make_provider(api=api).create(USER, []).text == "via env"
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
        provider = make_provider(base_url=server.openai_base_url, api=api)
        assert provider.create(USER, []).text == "via config"
    assert len(server.requests) == 2
