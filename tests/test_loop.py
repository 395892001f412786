"""Agent loop behaviour with an in-process fake provider (SPEC §4)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bareagent.core.loop import LLMCallError, LoopOptions, agent_loop
from bareagent.core.notifications import Notification
from bareagent.provider.base import LLMResponse, Provider, StreamEvent, ToolCall


class FakeProvider(Provider):
    """Replays prepared responses and records what it was sent."""

    def __init__(self, responses: list[LLMResponse | Exception], stream: bool = False) -> None:
        self.responses = list(responses)
        self.calls: list[list[dict[str, Any]]] = []
        self.stream = stream

    def create(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kw: Any
    ) -> LLMResponse:
        self.calls.append([dict(m) for m in messages])
        item = self.responses.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def create_stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kw: Any
    ) -> Iterator[StreamEvent]:
        if not self.stream:
            raise NotImplementedError
        response = self.create(messages, tools)
        for word in response.text.split(" "):
            yield StreamEvent(type="text", text=word)
        yield StreamEvent(type="response", response=response)


def call(name: str, **kw: Any) -> ToolCall:
    return ToolCall(id=f"id-{name}", name=name, input=kw)


def with_calls(*calls: ToolCall) -> LLMResponse:
    return LLMResponse(text="", stop_reason="tool_use", tool_calls=list(calls))


def results_of(message: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(b["content"], b["is_error"]) for b in message["content"]]


class Guard:
    def __init__(self, confirm: set[str], allow: bool) -> None:
        self.confirm, self.allow, self.asked = confirm, allow, []

    def requires_confirm(self, name: str, tool_input: dict[str, Any]) -> bool:
        return name in self.confirm

    def ask_user(self, c: ToolCall) -> bool:
        self.asked.append(c.name)
        return self.allow


def test_plain_answer_returns_text() -> None:
    provider = FakeProvider([LLMResponse(text="hello")])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    assert agent_loop(messages, provider, [], {}) == "hello"
    assert messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}


def test_tool_results_fed_back_in_one_user_message() -> None:
    provider = FakeProvider(
        [with_calls(call("echo", x="a"), call("lst")), LLMResponse(text="done")]
    )
    handlers = {"echo": lambda x: f"echo {x}", "lst": lambda: ["a", "b"]}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    assert agent_loop(messages, provider, [], handlers) == "done"
    tool_msg = messages[2]
    assert tool_msg["role"] == "user"
    assert [b["tool_use_id"] for b in tool_msg["content"]] == ["id-echo", "id-lst"]
    assert results_of(tool_msg)[0] == ("echo a", False)
    assert '"a"' in results_of(tool_msg)[1][0]
    assert provider.calls[1][-1] == tool_msg


def test_unknown_tool_and_handler_errors_become_error_results() -> None:
    def boom() -> str:
        raise ValueError("old_text not found in file")

    provider = FakeProvider(
        [with_calls(call("nope"), call("boom"), call("echo", y=1)), LLMResponse(text="ok")]
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    agent_loop(messages, provider, [], {"boom": boom, "echo": lambda x: x})
    got = results_of(messages[2])
    assert got[0] == ("Unknown tool: nope", True)
    assert got[1] == ("Error: ValueError: old_text not found in file", True)
    assert got[2][0].startswith("Error: TypeError:") and got[2][1]


def test_denied_call_is_user_denied_and_not_run() -> None:
    ran: list[str] = []
    provider = FakeProvider([with_calls(call("w"), call("r")), LLMResponse(text="ok")])
    guard = Guard(confirm={"w"}, allow=False)
    handlers = {"w": lambda: ran.append("w"), "r": lambda: ran.append("r") or "read"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    agent_loop(messages, provider, [], handlers, permission_guard=guard)  # type: ignore[arg-type]
    assert ran == ["r"]
    assert guard.asked == ["w"]
    assert results_of(messages[2])[0] == ("User denied.", True)


def test_iteration_limit_raises() -> None:
    provider = FakeProvider([with_calls(call("t")) for _ in range(5)])
    with pytest.raises(LLMCallError, match="3 iterations"):
        agent_loop(
            [{"role": "user", "content": "x"}], provider, [], {"t": lambda: "r"}, max_iterations=3
        )
    assert len(provider.calls) == 3


def test_provider_failure_is_llm_call_error() -> None:
    provider = FakeProvider([RuntimeError("connection refused")])
    with pytest.raises(LLMCallError, match=r"^LLM call failed: connection refused$"):
        agent_loop([{"role": "user", "content": "x"}], provider, [], {})


def test_notifications_injected_before_the_model_call() -> None:
    pending = [[Notification("job1", "job", "done", result="built")], []]
    provider = FakeProvider([with_calls(call("t")), LLMResponse(text="ok")])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    agent_loop(messages, provider, [], {"t": lambda: "r"}, notifications=lambda: pending.pop(0))
    first = provider.calls[0]
    assert first[0]["role"] == "system" and "<background-notifications>" in first[0]["content"]
    assert first[1] == {"role": "user", "content": "go"}
    assert sum(1 for m in messages if m["role"] == "system") == 1


def test_streaming_emits_deltas() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    provider = FakeProvider([LLMResponse(text="a b c")], stream=True)
    text = agent_loop(
        [{"role": "user", "content": "x"}],
        provider,
        [],
        {},
        on_event=lambda k, d: events.append((k, d)),
        stream=True,
    )
    assert text == "a b c"
    assert [d["text"] for k, d in events if k == "text_delta"] == ["a", "b", "c"]


def test_streaming_falls_back_when_not_implemented() -> None:
    provider = FakeProvider([LLMResponse(text="plain")], stream=False)
    opts = LoopOptions(stream=True)
    assert agent_loop([{"role": "user", "content": "x"}], provider, [], {}, options=opts) == "plain"


def test_ctrl_c_during_a_tool_keeps_history_valid() -> None:
    def interrupt() -> str:
        raise KeyboardInterrupt

    provider = FakeProvider([with_calls(call("a"), call("b"))])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    with pytest.raises(KeyboardInterrupt):
        agent_loop(messages, provider, [], {"a": interrupt, "b": lambda: "never"})
    assert [b["tool_use_id"] for b in messages[-1]["content"]] == ["id-a", "id-b"]
    assert all(b["content"] == "Cancelled by user." for b in messages[-1]["content"])
