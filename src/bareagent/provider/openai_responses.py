"""OpenAI Responses API provider (`client.responses.create`) and its input translation."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from bareagent.provider.base import (
    LLMResponse,
    Message,
    Provider,
    ProviderConfig,
    ProviderError,
    StreamEvent,
    ToolCall,
    ToolSchema,
    error_body_message,
    text_of,
)
from bareagent.provider.openai_provider import (
    OpenAIClientMixin,
    build_response,
    new_call_id,
    parse_tool_arguments,
    result_text,
    tool_arguments_json,
)
from bareagent.provider.presets import Preset


def to_responses_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    """Neutral tool schemas -> Responses function tools (non-strict: our schemas allow extras)."""
    return [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            "strict": False,
        }
        for tool in tools
    ]


def to_responses_input(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Neutral messages -> (`instructions`, input items).

    Leading system messages become `instructions`; later ones stay in place as system
    messages. Tool calls and results become function_call / function_call_output items.
    """
    index = 0
    system_parts: list[str] = []
    while index < len(messages) and messages[index].get("role") == "system":
        text = text_of(messages[index].get("content"))
        if text:
            system_parts.append(text)
        index += 1
    items: list[dict[str, Any]] = []
    for message in messages[index:]:
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            items.append({"role": "system", "content": text_of(content)})
        elif role == "user":
            items.extend(_user_items(content))
        elif role == "assistant":
            items.extend(_assistant_items(content))
        else:
            raise ProviderError(f"cannot send a message with role {role!r} to an OpenAI API")
    return "\n\n".join(system_parts), items


def _user_items(content: object) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return [{"role": "user", "content": text_of(content)}]
    items: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_result":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": block.get("tool_use_id", ""),
                    "output": result_text(block),
                }
            )
        elif block.get("type") == "text" and block.get("text"):
            texts.append(str(block["text"]))
    if texts:
        items.append({"role": "user", "content": "\n\n".join(texts)})
    return items


def _assistant_items(content: object) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        text = text_of(content)
        return [{"role": "assistant", "content": text}] if text else []
    items: list[dict[str, Any]] = []
    texts = [
        str(block["text"])
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "text" and block.get("text")
    ]
    if texts:
        items.append({"role": "assistant", "content": "".join(texts)})
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.get("id", ""),
                    "name": block.get("name", ""),
                    "arguments": tool_arguments_json(block.get("input")),
                }
            )
    return items


def parse_responses_output(data: Mapping[str, Any]) -> LLMResponse:
    """A Responses API `Response` (as a dict) -> LLMResponse."""
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for item in data.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
                elif part.get("type") == "refusal":
                    texts.append(part.get("refusal") or "")
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    id=str(item.get("call_id") or item.get("id") or new_call_id()),
                    name=str(item.get("name") or ""),
                    input=parse_tool_arguments(item.get("arguments")),
                )
            )
        elif kind == "reasoning":
            parts = [s.get("text") or "" for s in item.get("summary") or []]
            if not any(parts):
                parts = [c.get("text") or "" for c in item.get("content") or []]
            thinking.extend(part for part in parts if part)
    incomplete = data.get("incomplete_details") or {}
    if calls:
        stop_reason = "tool_use"
    elif data.get("status") == "incomplete":
        reason = incomplete.get("reason")
        stop_reason = "max_tokens" if reason == "max_output_tokens" else str(reason or "incomplete")
    else:
        stop_reason = "end_turn"
    usage = data.get("usage") or {}
    return build_response(
        text="".join(texts),
        thinking="\n".join(thinking),
        calls=calls,
        stop_reason=stop_reason,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
    )


class OpenAIResponsesProvider(OpenAIClientMixin, Provider):
    """The Responses API through the official `openai` SDK; stateless (`store=False`)."""

    def __init__(self, config: ProviderConfig, *, api_key: str, preset: Preset) -> None:
        self._init_client(config, api_key, preset)
        self.name = config.name
        self.model = config.model or ""

    def request_params(
        self, messages: list[Message], tools: list[ToolSchema], max_tokens: int | None, kw: Any
    ) -> dict[str, Any]:
        """The keyword arguments for `client.responses.create`."""
        instructions, items = to_responses_input(messages)
        # The whole history is sent every time, so nothing needs storing server-side.
        params: dict[str, Any] = {
            "model": self.model,
            "input": items,
            "max_output_tokens": max_tokens or self.config.max_tokens,
            "store": False,
        }
        if instructions:
            params["instructions"] = instructions
        if tools:
            params["tools"] = to_responses_tools(tools)
        if self.config.temperature is not None:
            params["temperature"] = self.config.temperature
        if self.config.thinking_budget:
            params["reasoning"] = {"summary": "auto"}
        params.update(kw)
        return params

    def create(
        self,
        messages: list[Message],
        tools: list[ToolSchema],
        *,
        max_tokens: int | None = None,
        **kw: Any,
    ) -> LLMResponse:
        """One non-streaming Responses API call."""
        params = self.request_params(messages, tools, max_tokens, kw)
        try:
            response = self.client.responses.create(**params)
        except self._sdk.OpenAIError as err:
            raise self._error(err) from err
        data = response.to_dict()
        self._raise_failed(data)
        return parse_responses_output(data)

    def create_stream(
        self,
        messages: list[Message],
        tools: list[ToolSchema],
        *,
        max_tokens: int | None = None,
        **kw: Any,
    ) -> Iterator[StreamEvent]:
        """Stream text and reasoning-summary deltas, then tool calls, then the response."""
        params = self.request_params(messages, tools, max_tokens, kw)
        params["stream"] = True
        final: dict[str, Any] | None = None
        try:
            stream = self.client.responses.create(**params)
            with stream:
                for raw in stream:
                    event: Any = raw
                    kind = event.type
                    if kind == "response.output_text.delta":
                        yield StreamEvent("text", text=event.delta)
                    elif kind in (
                        "response.reasoning_summary_text.delta",
                        "response.reasoning_text.delta",
                    ):
                        yield StreamEvent("thinking", text=event.delta)
                    elif kind in ("response.completed", "response.incomplete", "response.failed"):
                        final = event.response.to_dict()
                    elif kind == "error":
                        detail = getattr(event, "message", None) or "unknown error"
                        raise ProviderError(f"{self.label} API error during streaming: {detail}")
        except self._sdk.OpenAIError as err:
            raise self._error(err) from err
        if final is None:
            raise ProviderError(f"{self.label} API stream ended without a final response")
        self._raise_failed(final)
        result = parse_responses_output(final)
        # Emitted from the final response so ids match what the history will record.
        for call in result.tool_calls:
            yield StreamEvent("tool_call", tool_call=call)
        yield StreamEvent("response", response=result)

    def _raise_failed(self, data: Mapping[str, Any]) -> None:
        if data.get("status") == "failed":
            detail = error_body_message({"error": data.get("error")}) or "response failed"
            raise ProviderError(f"{self.label} API error: {detail}")
