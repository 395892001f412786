"""OpenAI Chat Completions provider (also every OpenAI-compatible preset).

Holds the translation helpers shared with the Responses API provider. The `openai` SDK
is imported when a provider is built, never at module import.
"""

from __future__ import annotations

import json
import uuid
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
from bareagent.provider.presets import Preset

FINISH_REASONS = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def new_call_id() -> str:
    """A tool-call id for servers that leave it out."""
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_tool_arguments(arguments: object) -> dict[str, Any]:
    """Tool-call arguments -> dict: `{}` for empty, `{"raw_arguments": s}` for non-JSON,
    `{"value": v}` for JSON that is not an object."""
    if isinstance(arguments, dict):
        return arguments
    if arguments is None:
        return {}
    text = str(arguments)
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"raw_arguments": text}
    if isinstance(value, dict):
        return value
    return {"value": value}


def tool_arguments_json(tool_input: object) -> str:
    """The inverse of parse_tool_arguments, so unparsable arguments go back verbatim."""
    if isinstance(tool_input, dict):
        if set(tool_input) == {"raw_arguments"} and isinstance(tool_input["raw_arguments"], str):
            return tool_input["raw_arguments"]
        return json.dumps(tool_input, ensure_ascii=False)
    return json.dumps(tool_input if tool_input is not None else {}, ensure_ascii=False)


def result_text(block: Mapping[str, Any]) -> str:
    """The text of a neutral tool_result block (block lists joined, other values as JSON)."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return text_of(content)
    return json.dumps(content, ensure_ascii=False, default=str)


def map_finish_reason(finish_reason: object, has_tool_calls: bool) -> str:
    """OpenAI finish_reason -> neutral stop_reason (tool calls always mean tool_use)."""
    if has_tool_calls:
        return "tool_use"
    if finish_reason is None:
        return "end_turn"
    return FINISH_REASONS.get(str(finish_reason), str(finish_reason))


def to_openai_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    """Neutral tool schemas -> Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


def to_openai_chat_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages -> Chat Completions messages.

    System messages keep their place; each tool_result becomes one `role: tool` message
    right after the assistant turn, before any user text of the same neutral message.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            wire.append({"role": "system", "content": text_of(content)})
        elif role == "user":
            if not isinstance(content, list):
                wire.append({"role": "user", "content": text_of(content)})
                continue
            texts: list[str] = []
            for block in content:
                if not isinstance(block, Mapping):
                    continue
                if block.get("type") == "tool_result":
                    wire.append(
                        {
                            "role": "tool",
                            "tool_call_id": block.get("tool_use_id", ""),
                            "content": result_text(block),
                        }
                    )
                elif block.get("type") == "text" and block.get("text"):
                    texts.append(str(block["text"]))
            if texts:
                wire.append({"role": "user", "content": "\n\n".join(texts)})
        elif role == "assistant":
            wire.append(_assistant_message(content))
        else:
            raise ProviderError(f"cannot send a message with role {role!r} to an OpenAI API")
    return wire


def _assistant_message(content: object) -> dict[str, Any]:
    if not isinstance(content, list):
        return {"role": "assistant", "content": text_of(content)}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and block.get("text"):
            texts.append(str(block["text"]))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": block.get("id", ""),
                    "type": "function",
                    "function": {
                        "name": block.get("name", ""),
                        "arguments": tool_arguments_json(block.get("input")),
                    },
                }
            )
    wire: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        wire["tool_calls"] = calls
    elif wire["content"] is None:
        wire["content"] = ""
    return wire


def build_response(
    *,
    text: str,
    thinking: str,
    calls: list[ToolCall],
    stop_reason: str,
    input_tokens: int,
    output_tokens: int,
) -> LLMResponse:
    """An LLMResponse whose content blocks are thinking, text, tool_use in that order."""
    blocks: list[dict[str, Any]] = []
    if thinking:
        blocks.append({"type": "thinking", "thinking": thinking, "signature": ""})
    if text:
        blocks.append({"type": "text", "text": text})
    blocks.extend(call.to_block() for call in calls)
    return LLMResponse(
        text=text,
        stop_reason=stop_reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tool_calls=calls,
        thinking=thinking,
        content_blocks=blocks,
    )


def _reasoning_of(data: Mapping[str, Any]) -> str:
    # DeepSeek/vLLM send `reasoning_content`, OpenRouter `reasoning`.
    value = data.get("reasoning_content") or data.get("reasoning")
    return value if isinstance(value, str) else ""


def parse_chat_completion(data: Mapping[str, Any], label: str = "OpenAI") -> LLMResponse:
    """A ChatCompletion (as a dict) -> LLMResponse."""
    choices = data.get("choices") or []
    if not choices:
        raise ProviderError(f"{label} API returned no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    calls = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function") or {}
        calls.append(
            ToolCall(
                id=str(raw.get("id") or new_call_id()),
                name=str(function.get("name") or ""),
                input=parse_tool_arguments(function.get("arguments")),
            )
        )
    usage = data.get("usage") or {}
    return build_response(
        text=message.get("content") or "",
        thinking=_reasoning_of(message),
        calls=calls,
        stop_reason=map_finish_reason(choice.get("finish_reason"), bool(calls)),
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
    )


class OpenAIClientMixin:
    """Client construction and error mapping shared by the chat and responses providers."""

    config: ProviderConfig
    preset: Preset
    _sdk: Any
    client: Any

    def _init_client(self, config: ProviderConfig, api_key: str, preset: Preset) -> None:
        import openai

        self._sdk = openai
        self.config = config
        self.preset = preset
        # base_url None lets the SDK apply OPENAI_BASE_URL itself.
        self.client = openai.OpenAI(
            api_key=api_key,
            base_url=config.base_url or preset.base_url,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    @property
    def label(self) -> str:
        """Provider name for error messages."""
        return self.preset.label

    @property
    def base_url(self) -> str:
        """The URL requests go to (after the SDK applied OPENAI_BASE_URL)."""
        return str(self.client.base_url)

    def _error(self, err: BaseException) -> ProviderError:
        return map_sdk_error(err, self._sdk, self.label, self.base_url, self.config.timeout)

    def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        self.client.close()


class OpenAIChatProvider(OpenAIClientMixin, Provider):
    """Chat Completions through the official `openai` SDK (SDK retries with backoff)."""

    def __init__(self, config: ProviderConfig, *, api_key: str, preset: Preset) -> None:
        self._init_client(config, api_key, preset)
        self.name = config.name
        self.model = config.model or ""

    def request_params(
        self, messages: list[Message], tools: list[ToolSchema], max_tokens: int | None, kw: Any
    ) -> dict[str, Any]:
        """The keyword arguments for `client.chat.completions.create`."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_chat_messages(messages),
            self.preset.max_tokens_field: max_tokens or self.config.max_tokens,
        }
        if tools:
            params["tools"] = to_openai_tools(tools)
        if self.config.temperature is not None:
            params["temperature"] = self.config.temperature
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
        """One non-streaming chat completion."""
        params = self.request_params(messages, tools, max_tokens, kw)
        try:
            completion = self.client.chat.completions.create(**params)
        except self._sdk.OpenAIError as err:
            raise self._error(err) from err
        return parse_chat_completion(completion.to_dict(), self.label)

    def create_stream(
        self,
        messages: list[Message],
        tools: list[ToolSchema],
        *,
        max_tokens: int | None = None,
        **kw: Any,
    ) -> Iterator[StreamEvent]:
        """Stream deltas; tool calls are complete only at the end, so they come last."""
        params = self.request_params(messages, tools, max_tokens, kw)
        params.update(stream=True, stream_options={"include_usage": True})
        texts: list[str] = []
        thinking: list[str] = []
        slots: dict[int, dict[str, str]] = {}
        finish_reason: object = None
        usage: Mapping[str, Any] = {}
        try:
            stream = self.client.chat.completions.create(**params)
            with stream:
                for chunk in stream:
                    data = chunk.to_dict()
                    usage = data.get("usage") or usage
                    for choice in data.get("choices") or []:
                        if choice.get("index", 0) != 0:
                            continue
                        delta = choice.get("delta") or {}
                        reasoning = _reasoning_of(delta)
                        if reasoning:
                            thinking.append(reasoning)
                            yield StreamEvent("thinking", text=reasoning)
                        if delta.get("content"):
                            texts.append(delta["content"])
                            yield StreamEvent("text", text=delta["content"])
                        for position, raw in enumerate(delta.get("tool_calls") or []):
                            _accumulate_tool_delta(slots, raw, position)
                        if choice.get("finish_reason"):
                            finish_reason = choice["finish_reason"]
        except self._sdk.OpenAIError as err:
            raise self._error(err) from err
        calls = [
            ToolCall(
                id=slot["id"] or new_call_id(),
                name=slot["name"],
                input=parse_tool_arguments(slot["arguments"]),
            )
            for _, slot in sorted(slots.items())
        ]
        for call in calls:
            yield StreamEvent("tool_call", tool_call=call)
        response = build_response(
            text="".join(texts),
            thinking="".join(thinking),
            calls=calls,
            stop_reason=map_finish_reason(finish_reason, bool(calls)),
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        )
        yield StreamEvent("response", response=response)


def _accumulate_tool_delta(slots: dict[int, dict[str, str]], raw: Any, position: int) -> None:
    index = raw.get("index")
    slot = slots.setdefault(
        index if isinstance(index, int) else position, {"id": "", "name": "", "arguments": ""}
    )
    if raw.get("id"):
        slot["id"] = str(raw["id"])
    function = raw.get("function") or {}
    # The name arrives whole in the first delta; some servers repeat it, so never append.
    if function.get("name") and not slot["name"]:
        slot["name"] = str(function["name"])
    if function.get("arguments"):
        slot["arguments"] += str(function["arguments"])
