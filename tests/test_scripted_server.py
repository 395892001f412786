"""The scripted LLM server on its own: script validation, turn selection, wire formats,
request checks, recording, concurrency, lifecycle and the `python -m` entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

import bareagent
from bareagent.testing import EXHAUSTED_TEXT, ScriptedLLMServer, ScriptError, load_script
from bareagent.testing.wire_replies import count_words, thinking_signature

SRC = str(Path(bareagent.__file__).resolve().parents[1])
ANTHROPIC = "/v1/messages"
CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


def post(
    server: ScriptedLLMServer, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        server.url + path,
        data=data,
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def post_json(server: ScriptedLLMServer, path: str, body: Any) -> tuple[int, Any]:
    status, text = post(server, path, body)
    return status, json.loads(text)


def anthropic_body(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


def chat_body(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def sse_events(text: str) -> list[tuple[str | None, str]]:
    events = []
    for chunk in text.strip().split("\n\n"):
        name = None
        data = ""
        for line in chunk.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = line[len("data: ") :]
        events.append((name, data))
    return events


# --------------------------------------------------------------------------- script


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ([], "JSON object"),
        ({"turns": {}}, "'turns' must be a list"),
        ({"turns": [], "extra": 1}, "unknown key 'extra'"),
        ({"turns": [{"txt": "x"}]}, "turn 0: unknown key 'txt'"),
        ({"turns": [{"text": 1}]}, "turn 0: 'text' must be a string"),
        ({"turns": [{}, {"when": {"user": "x"}}]}, "turn 1: unknown 'when' key 'user'"),
        ({"turns": [{"tool_calls": [{"input": {}}]}]}, r"tool_calls\[0\]: 'name'"),
        ({"turns": [{"tool_calls": [{"name": "a", "input": []}]}]}, "'input' must be an object"),
        ({"turns": [{"error": {"status": 200}}]}, "error.status"),
        ({"turns": [{"delay": -1}]}, "'delay'"),
        ({"turns": [{"stop_reason": "done"}]}, "'stop_reason'"),
        ({"turns": [], "models": "m"}, "'models'"),
    ],
)
def test_script_validation(script: Any, message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        load_script(script)


def test_script_from_file(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [{"text": "from file"}]}), encoding="utf-8")
    with ScriptedLLMServer(path) as server:
        status, data = post_json(server, ANTHROPIC, anthropic_body())
    assert status == 200 and data["content"][0]["text"] == "from file"
    bad = tmp_path / "bad.json"
    bad.write_text("{nope", encoding="utf-8")
    with pytest.raises(ScriptError, match="not valid JSON"):
        ScriptedLLMServer(bad)
    with pytest.raises(ScriptError, match="cannot read script"):
        ScriptedLLMServer(tmp_path / "missing.json")


# --------------------------------------------------------------------------- selection


def test_when_conditions_pick_first_unused_fitting_turn() -> None:
    script = {
        "turns": [
            {"text": "review", "when": {"system_contains": "reviewer"}},
            {"text": "tooling", "when": {"tools_include": "bash"}},
            {"text": "answer", "when": {"last_user_contains": "question"}},
            {"text": "anything"},
        ]
    }
    with ScriptedLLMServer(script) as server:
        tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
        replies = [
            post_json(server, CHAT, chat_body("a question"))[1],
            post_json(server, CHAT, chat_body("x", tools=tools))[1],
            post_json(server, ANTHROPIC, anthropic_body("hey", system="You are a reviewer."))[1],
            post_json(server, CHAT, chat_body("another question"))[1],
            post_json(server, CHAT, chat_body("question again"))[1],
        ]
        assert server.remaining_turns == 0
    texts = [
        r["choices"][0]["message"]["content"] if "choices" in r else r["content"][0]["text"]
        for r in replies
    ]
    assert texts == ["answer", "tooling", "review", "anything", EXHAUSTED_TEXT]
    assert [r.turn for r in server.requests] == [2, 1, 0, 3, None]


def test_last_user_means_everything_after_the_last_assistant_message() -> None:
    script = {"turns": [{"text": "saw result", "when": {"last_user_contains": "RESULT"}}]}
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "RESULT in an old message"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "none"}],
            },
        ],
    }
    with ScriptedLLMServer(script) as server:
        assert post_json(server, ANTHROPIC, body)[1]["content"][0]["text"] == EXHAUSTED_TEXT
        body["messages"][2]["content"][0]["content"] = "the RESULT"
        assert post_json(server, ANTHROPIC, body)[1]["content"][0]["text"] == "saw result"


def test_error_turn_is_consumed_once_and_shaped_per_api() -> None:
    script = {
        "turns": [
            {"error": {"status": 429, "message": "slow", "retry_after": 0.25}},
            {"error": {"status": 500, "message": "oops"}},
        ]
    }
    with ScriptedLLMServer(script) as server:
        request = urllib.request.Request(
            server.url + ANTHROPIC, data=json.dumps(anthropic_body()).encode(), method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=5)
        assert info.value.code == 429 and info.value.headers["retry-after-ms"] == "250"
        assert json.loads(info.value.read()) == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "slow"},
        }
        status, data = post_json(server, CHAT, chat_body())
        assert status == 500
        assert data["error"]["message"] == "oops" and data["error"]["type"] == "server_error"
        assert post_json(server, CHAT, chat_body())[0] == 200


@pytest.mark.parametrize("path", [ANTHROPIC, CHAT, RESPONSES])
def test_unknown_model_is_404_in_provider_shape(path: str) -> None:
    with ScriptedLLMServer({"turns": [{"text": "x"}], "models": ["known"]}) as server:
        body = anthropic_body() if path == ANTHROPIC else chat_body()
        if path == RESPONSES:
            body = {"model": "m", "input": "hi"}
        status, data = post_json(server, path, body)
        assert server.remaining_turns == 1 and server.requests[0].status == 404
    assert status == 404
    if path == ANTHROPIC:
        assert data == {
            "type": "error",
            "error": {"type": "not_found_error", "message": "model 'm' not found"},
        }
    else:
        assert data["error"]["code"] == "model_not_found"
        assert data["error"]["message"] == "model 'm' not found"


# --------------------------------------------------------------------------- request checks


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([{"role": "system", "content": "x"}], "messages.0.role"),
        ([{"role": "user", "content": [{"type": "text", "text": ""}]}], "non-empty"),
        (
            [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}],
                },
                {"role": "user", "content": "forgot the result"},
            ],
            "without `tool_result`",
        ),
        (
            [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "note"},
                        {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                    ],
                },
            ],
            "must come first",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "zz", "content": ""}],
                }
            ],
            "unexpected `tool_use_id`",
        ),
        (
            [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": "a", "signature": "b"}],
                },
            ],
            "Invalid `signature`",
        ),
    ],
)
def test_anthropic_rejects_what_the_api_rejects(
    messages: list[dict[str, Any]], message: str
) -> None:
    with ScriptedLLMServer({"turns": [{"text": "x"}]}) as server:
        status, data = post_json(
            server, ANTHROPIC, {"model": "m", "max_tokens": 5, "messages": messages}
        )
        assert server.remaining_turns == 1
    assert status == 400 and data["error"]["type"] == "invalid_request_error"
    assert message in data["error"]["message"]


def test_anthropic_accepts_own_thinking_signature() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "a", "signature": thinking_signature("a")}
            ],
        },
        {"role": "user", "content": "more"},
    ]
    with ScriptedLLMServer({"turns": [{"text": "x"}]}) as server:
        assert (
            post_json(server, ANTHROPIC, {"model": "m", "max_tokens": 5, "messages": messages})[0]
            == 200
        )


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            CHAT,
            chat_body() | {"messages": [{"role": "tool", "tool_call_id": "c", "content": "x"}]},
            "role 'tool'",
        ),
        (
            CHAT,
            chat_body()
            | {
                "messages": [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "a", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "user", "content": "no tool message"},
                ]
            },
            "Missing: c1",
        ),
        (
            RESPONSES,
            {
                "model": "m",
                "input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}],
            },
            "No tool call found",
        ),
        (
            RESPONSES,
            {
                "model": "m",
                "input": [
                    {"type": "function_call", "call_id": "c9", "name": "a", "arguments": "{}"}
                ],
            },
            "No tool output found",
        ),
        (CHAT, b"{not json", "JSON object"),
    ],
)
def test_openai_rejects_what_the_api_rejects(path: str, body: Any, message: str) -> None:
    with ScriptedLLMServer({"turns": [{"text": "x"}]}) as server:
        status, data = post_json(server, path, body)
        assert server.remaining_turns == 1
    assert status == 400 and message in data["error"]["message"]


# --------------------------------------------------------------------------- wire formats


def test_anthropic_sse_sequence() -> None:
    script = {
        "turns": [
            {
                "thinking": "hm",
                "text": "Two words",
                "tool_calls": [{"name": "glob", "input": {"pattern": "*.py"}}],
            }
        ]
    }
    with ScriptedLLMServer(script) as server:
        status, text = post(server, ANTHROPIC, anthropic_body(stream=True))
    assert status == 200
    events = sse_events(text)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == [
        "message_delta",
        "message_stop",
    ]
    assert names.count("content_block_start") == 3 == names.count("content_block_stop")
    datas = [json.loads(d) for _, d in events]
    assert all(d["type"] == name for (name, _), d in zip(events, datas, strict=True))
    deltas = [d["delta"] for d in datas if d["type"] == "content_block_delta"]
    assert {d["type"] for d in deltas} == {
        "thinking_delta",
        "signature_delta",
        "text_delta",
        "input_json_delta",
    }
    partial = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert json.loads(partial) == {"pattern": "*.py"}
    assert datas[-2]["delta"]["stop_reason"] == "tool_use"
    tool_start = next(d for d in datas if d["type"] == "content_block_start" and d["index"] == 2)
    assert tool_start["content_block"]["id"].startswith("toolu_")


def test_chat_sse_sequence_ends_with_usage_and_done() -> None:
    script = {"turns": [{"text": "a b", "tool_calls": [{"name": "glob", "input": {"p": 1}}]}]}
    with ScriptedLLMServer(script) as server:
        status, text = post(
            server, CHAT, chat_body(stream=True, stream_options={"include_usage": True})
        )
    events = sse_events(text)
    assert status == 200 and events[-1] == (None, "[DONE]")
    chunks = [json.loads(d) for _, d in events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    calls = [
        c
        for ch in chunks
        for choice in ch["choices"]
        for c in choice["delta"].get("tool_calls", [])
    ]
    assert calls[0]["id"].startswith("call_") and calls[0]["function"]["name"] == "glob"
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"p": 1}


def test_responses_sse_sequence_numbers() -> None:
    with ScriptedLLMServer({"turns": [{"text": "hello world"}]}) as server:
        status, text = post(server, RESPONSES, {"model": "m", "input": "hi", "stream": True})
    datas = [json.loads(d) for _, d in sse_events(text)]
    assert status == 200
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert datas[0]["type"] == "response.created" and datas[-1]["type"] == "response.completed"
    assert (
        "".join(d["delta"] for d in datas if d["type"] == "response.output_text.delta")
        == "hello world"
    )


def test_usage_counts_words() -> None:
    text = "alpha beta gamma delta"
    with ScriptedLLMServer({"turns": [{"text": text}]}) as server:
        _, data = post_json(server, ANTHROPIC, anthropic_body("one two three"))
    assert data["usage"]["output_tokens"] == count_words(text) == 4
    assert data["usage"]["input_tokens"] == count_words(json.dumps(anthropic_body("one two three")))


# --------------------------------------------------------------------------- recording


def test_requests_recorded_without_secrets() -> None:
    with ScriptedLLMServer({"turns": [{"text": "x"}]}) as server:
        headers = {"Authorization": "Bearer top-secret", "x-api-key": "top-secret", "X-Trace": "t1"}
        post(server, ANTHROPIC, anthropic_body(), headers)
    (record,) = server.requests
    assert record.path == ANTHROPIC and record.body == anthropic_body()
    assert record.headers["x-trace"] == "t1"
    assert "top-secret" not in json.dumps(record.headers)
    assert "authorization" not in record.headers and "x-api-key" not in record.headers


@pytest.mark.timeout(20)
def test_concurrent_requests_each_get_one_turn() -> None:
    count = 24
    script = {"turns": [{"text": f"turn {i}", "delay": 0.01} for i in range(count)]}
    results: list[str] = []
    lock = threading.Lock()
    with ScriptedLLMServer(script) as server:

        def worker() -> None:
            _, data = post_json(server, CHAT, chat_body())
            with lock:
                results.append(data["choices"][0]["message"]["content"])

        threads = [threading.Thread(target=worker) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert sorted(results) == sorted(f"turn {i}" for i in range(count))
    assert sorted(r.turn for r in server.requests if r.turn is not None) == list(range(count))


def test_models_listing_and_unknown_route() -> None:
    with ScriptedLLMServer({"turns": [], "models": ["a", "b"]}) as server:
        with urllib.request.urlopen(server.openai_base_url + "/models", timeout=5) as response:
            listing = json.loads(response.read())
        status, _ = post(server, "/v2/other", {})
    assert [m["id"] for m in listing["data"]] == ["a", "b"]
    assert status == 404


# --------------------------------------------------------------------------- lifecycle


def test_addresses_and_stop_releases_port() -> None:
    server = ScriptedLLMServer({"turns": []})
    with pytest.raises(RuntimeError):
        _ = server.url
    server.start()
    port = server.port
    assert server.url == f"http://127.0.0.1:{port}"
    assert server.anthropic_base_url == server.url
    assert server.openai_base_url == server.url + "/v1"
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
    assert not any(t.name == f"scripted-llm-{port}" and t.is_alive() for t in threading.enumerate())


@pytest.mark.timeout(30)
def test_module_entry_point_serves_and_exits(tmp_path: Path) -> None:
    script = tmp_path / "demo.json"
    script.write_text(json.dumps({"turns": [{"text": "from the CLI"}]}), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bareagent.testing", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": ""},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        request = urllib.request.Request(
            url + CHAT, data=json.dumps(chat_body()).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            data = json.loads(response.read())
        assert data["choices"][0]["message"]["content"] == "from the CLI"
    finally:
        proc.terminate()
        code = proc.wait(timeout=10)
    assert code == 0
    assert not psutil.pid_exists(proc.pid)


def test_module_entry_point_rejects_bad_script(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"turns": [{"texts": "x"}]}), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "bareagent.testing", str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": SRC, "PATH": ""},
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "error: script turn 0: unknown key 'texts'"
