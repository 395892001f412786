"""Anthropic Messages API provider and the neutral <-> Anthropic wire translation.

The `anthropic` SDK is imported when a provider is built, never at module import, so
workers that never talk to a model stay light.
"""

from __future__ import annotations

import json
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
    map_sdk_error,
    text_of,
)

LABEL = "Anthropic"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"


def to_anthropic_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    """Neutral tool schemas -> Anthropic `{name, description, input_schema}`."""
    return [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]


def to_anthropic_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Split neutral messages into the `system` string and the Anthropic message list.

    Leading system messages become the system prompt. A later system message (a
    background notification) becomes a user text block at the same place; adjacent
    same-role messages are merged because the API wants alternating roles, and in a
    merged user message the tool_result blocks stay first, as the API requires.
    """
    index = 0
    system_parts: list[str] = []
    while index < len(messages) and messages[index].get("role") == "system":
        text = text_of(messages[index].get("content"))
        if text:
            system_parts.append(text)
        index += 1

    wire: list[dict[str, Any]] = []
    for message in messages[index:]:
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            text = text_of(content)
            blocks = [{"type": "text", "text": text}] if text else []
            role = "user"
        elif role == "user":
            blocks = _user_blocks(content)
        elif role == "assistant":
            blocks = _assistant_blocks(content)
        else:
            raise ProviderError(f"cannot send a message with role {role!r} to Anthropic")
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            merged = wire[-1]["content"] + blocks
            if role == "user":
                merged = _tool_results_first(merged)
            wire[-1]["content"] = merged
        else:
            wire.append({"role": role, "content": blocks})
    return "\n\n".join(system_parts), wire


def _tool_results_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = [b for b in blocks if b.get("type") == "tool_result"]
    others = [b for b in blocks if b.get("type") != "tool_result"]
    return results + others


def _user_blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "tool_result":
            wire_block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": block.get("tool_use_id", ""),
                "content": _result_content(block.get("content", "")),
            }
            if block.get("is_error"):
                wire_block["is_error"] = True
            blocks.append(wire_block)
        elif kind == "text":
            if block.get("text"):
                blocks.append({"type": "text", "text": block["text"]})
        else:
            blocks.append(dict(block))
    return blocks


def _result_content(content: object) -> Any:
    if isinstance(content, str | list):
        return content
    return json.dumps(content, ensure_ascii=False, default=str)


def _assistant_blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "thinking":
            # Without its signature the API rejects a thinking block; such blocks come
            # from other providers and carry nothing Anthropic can verify.
            if block.get("signature"):
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": block.get("thinking", ""),
                        "signature": block["signature"],
                    }
                )
        elif kind == "redacted_thinking":
            blocks.append({"type": "redacted_thinking", "data": block.get("data", "")})
        elif kind == "text":
            if block.get("text"):
                blocks.append({"type": "text", "text": block["text"]})
        elif kind == "tool_use":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block.get("id", ""),
                    "name": block.get("name", ""),
                    "input": block.get("input") or {},
                }
            )
        else:
            blocks.append(dict(block))
    return blocks


def parse_anthropic_message(data: Mapping[str, Any]) -> LLMResponse:
    """An Anthropic Message (as a dict) -> LLMResponse with neutral content blocks."""
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    blocks: list[dict[str, Any]] = []
    for block in data.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
            blocks.append({"type": "text", "text": block.get("text") or ""})
        elif kind == "thinking":
            thinking.append(block.get("thinking") or "")
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": block.get("thinking") or "",
                    "signature": block.get("signature") or "",
                }
            )
        elif kind == "redacted_thinking":
            blocks.append({"type": "redacted_thinking", "data": block.get("data") or ""})
        elif kind == "tool_use":
            raw = block.get("input")
            call = ToolCall(
                id=str(block.get("id") or ""),
                name=str(block.get("name") or ""),
                input=raw if isinstance(raw, dict) else {"value": raw},
            )
            calls.append(call)
            blocks.append(call.to_block())
    usage = data.get("usage") or {}
    input_tokens = sum(
        int(usage.get(key) or 0)
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return LLMResponse(
        text="".join(texts),
        stop_reason=str(data.get("stop_reason") or ("tool_use" if calls else "end_turn")),
        input_tokens=input_tokens,
        output_tokens=int(usage.get("output_tokens") or 0),
        tool_calls=calls,
        thinking="\n".join(part for part in thinking if part),
        content_blocks=blocks,
    )


class AnthropicProvider(Provider):
    """Claude through the official `anthropic` SDK (retries and backoff are the SDK's)."""

    name = "anthropic"

    def __init__(self, config: ProviderConfig, *, api_key: str) -> None:
        import anthropic

        self._sdk = anthropic
        self.config = config
        self.model = config.model or ""
        # base_url None lets the SDK apply ANTHROPIC_BASE_URL itself.
        self.client = anthropic.Anthropic(
            api_key=api_key,
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    @property
    def base_url(self) -> str:
        """The URL requests go to (after the SDK applied ANTHROPIC_BASE_URL)."""
        return str(self.client.base_url)

    def request_params(
        self, messages: list[Message], tools: list[ToolSchema], max_tokens: int | None, kw: Any
    ) -> dict[str, Any]:
        """The keyword arguments for `client.messages.create/stream`."""
        system, wire = to_anthropic_messages(messages)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens or self.config.max_tokens,
            "messages": wire,
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = to_anthropic_tools(tools)
        if self.config.thinking_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.config.thinking_budget}
        if self.config.temperature is not None:
            # This SDK version has no `temperature` argument; the API field still exists.
            params["extra_body"] = {"temperature": self.config.temperature}
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
        """One non-streaming Messages API call."""
        params = self.request_params(messages, tools, max_tokens, kw)
        try:
            message = self.client.messages.create(**params)
        except self._sdk.AnthropicError as err:
            raise self._error(err) from err
        return parse_anthropic_message(message.to_dict())

    def create_stream(
        self,
        messages: list[Message],
        tools: list[ToolSchema],
        *,
        max_tokens: int | None = None,
        **kw: Any,
    ) -> Iterator[StreamEvent]:
        """Stream text/thinking deltas and finished tool calls, then the whole response."""
        params = self.request_params(messages, tools, max_tokens, kw)
        try:
            with self.client.messages.stream(**params) as stream:
                for raw in stream:
                    event: Any = raw
                    if event.type == "text":
                        yield StreamEvent("text", text=event.text)
                    elif event.type == "thinking":
                        yield StreamEvent("thinking", text=event.thinking)
                    elif event.type == "content_block_stop":
                        block = event.content_block
                        if block.type == "tool_use":
                            raw_input = block.input
                            yield StreamEvent(
                                "tool_call",
                                tool_call=ToolCall(
                                    id=block.id,
                                    name=block.name,
                                    input=raw_input
                                    if isinstance(raw_input, dict)
                                    else {"value": raw_input},
                                ),
                            )
                final = stream.get_final_message()
        except self._sdk.AnthropicError as err:
            raise self._error(err) from err
        yield StreamEvent("response", response=parse_anthropic_message(final.to_dict()))

    def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        self.client.close()

    def _error(self, err: BaseException) -> ProviderError:
        return map_sdk_error(err, self._sdk, LABEL, self.base_url, self.config.timeout)
