"""Provider-neutral types: responses, tool calls, stream events, config, errors.

Nothing here imports an SDK; the agent loop and the workers only ever see these types.
"""

from __future__ import annotations

import copy
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

Message = dict[str, Any]
ToolSchema = dict[str, Any]

StreamEventType = Literal["text", "thinking", "tool_call", "response"]
STREAM_EVENT_TYPES: tuple[str, ...] = ("text", "thinking", "tool_call", "response")

_MAX_ERROR_CHARS = 300


class ProviderError(Exception):
    """A model call or provider setup failed; `str(err)` is one user-facing line."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def one_line(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    """Collapse whitespace (newlines included) and cut to `limit` characters."""
    flat = re.sub(r"\s+", " ", str(text)).strip()
    if len(flat) > limit:
        flat = flat[: limit - 3].rstrip() + "..."
    return flat


def error_body_message(body: object) -> str | None:
    """Pull the human message out of an API error body (Anthropic or OpenAI shape)."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
    elif isinstance(body, str) and body.strip():
        return body
    return None


def format_status_error(label: str, status: int, body: object, fallback: str) -> str:
    """`<Label> API error <status>: <message>` from an HTTP error response."""
    message = error_body_message(body) or fallback or "no details"
    if 200 <= status < 300:
        # An error event inside an already-open stream arrives with the stream's 200 status.
        return one_line(f"{label} API error during streaming: {message}")
    return one_line(f"{label} API error {status}: {message}")


def map_sdk_error(
    err: BaseException, sdk: Any, label: str, base_url: str, timeout: float
) -> ProviderError:
    """Translate an `anthropic`/`openai` SDK exception (same class names) to ProviderError."""
    base = base_url.rstrip("/")
    if isinstance(err, sdk.APITimeoutError):
        return ProviderError(f"the model server at {base} did not answer within {timeout:g}s")
    if isinstance(err, sdk.APIConnectionError):
        return ProviderError(f"cannot reach the model server at {base}")
    if isinstance(err, sdk.APIStatusError):
        return ProviderError(
            format_status_error(label, int(err.status_code), err.body, str(err.message))
        )
    if isinstance(err, sdk.APIError):
        detail = error_body_message(getattr(err, "body", None)) or str(err.message)
        return ProviderError(f"{label} API error: {detail}")
    return ProviderError(f"{label} client error: {err}")


def text_of(content: object) -> str:
    """Plain text of a message content: a string, or the text blocks of a block list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        ]
        return "\n".join(part for part in parts if part)
    return "" if content is None else str(content)


@dataclass
class ToolCall:
    """One tool invocation requested by the model."""

    id: str
    name: str
    input: dict[str, Any]

    def to_block(self) -> dict[str, Any]:
        """The neutral `tool_use` content block."""
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": self.input}


@dataclass
class LLMResponse:
    """One assistant reply; `content_blocks` is the neutral block list (built if empty)."""

    text: str = ""
    stop_reason: str = "end_turn"
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: str = ""
    content_blocks: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Hand-built responses (fakes in tests) only give text/tool_calls; derive the blocks
        # so to_message() always describes what the model said.
        if not self.content_blocks:
            blocks: list[dict[str, Any]] = []
            if self.thinking:
                blocks.append({"type": "thinking", "thinking": self.thinking, "signature": ""})
            if self.text:
                blocks.append({"type": "text", "text": self.text})
            blocks.extend(call.to_block() for call in self.tool_calls)
            self.content_blocks = blocks

    @property
    def has_tool_calls(self) -> bool:
        """True when the model asked for at least one tool."""
        return bool(self.tool_calls)

    def to_message(self) -> Message:
        """The neutral assistant message to append to the history."""
        return {"role": "assistant", "content": copy.deepcopy(self.content_blocks)}


@dataclass
class StreamEvent:
    """A streaming delta; the last event of every stream has type `response`."""

    type: StreamEventType
    text: str = ""
    tool_call: ToolCall | None = None
    response: LLMResponse | None = None


class Provider(ABC):
    """A chat model behind one interface; messages and tools use the neutral format."""

    name: str = "provider"
    model: str = ""

    @abstractmethod
    def create(
        self,
        messages: list[Message],
        tools: list[ToolSchema],
        *,
        max_tokens: int | None = None,
        **kw: Any,
    ) -> LLMResponse:
        """Send the conversation and return the whole reply."""

    def create_stream(
        self,
        messages: list[Message],
        tools: list[ToolSchema],
        *,
        max_tokens: int | None = None,
        **kw: Any,
    ) -> Iterator[StreamEvent]:
        """Stream the reply as events ending in a `response` event."""
        raise NotImplementedError(f"{type(self).__name__} does not stream")

    def close(self) -> None:
        """Release network resources (a no-op unless the provider holds a client)."""
        return None


PROVIDER_APIS: tuple[str, ...] = ("chat", "responses")


@dataclass
class ProviderConfig:
    """Provider settings as they come from `[provider]` in the config file."""

    name: str = "anthropic"
    model: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    base_url: str | None = None
    api: str = "chat"
    max_tokens: int = 4096
    thinking_budget: int | None = None
    temperature: float | None = None
    timeout: float = 600.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field; ValueError names the bad key."""
        _check_str("name", self.name, optional=False)
        if not self.name.strip():
            raise ValueError("provider config 'name' must not be empty")
        for key in ("model", "api_key", "api_key_env", "base_url"):
            _check_str(key, getattr(self, key), optional=True)
        if self.api not in PROVIDER_APIS:
            raise ValueError(
                f"provider config 'api' must be 'chat' or 'responses', not {self.api!r}"
            )
        if self.api == "responses" and self.name.strip().lower() == "anthropic":
            raise ValueError("provider config 'api' = 'responses' only applies to OpenAI providers")
        _check_int("max_tokens", self.max_tokens, minimum=1, optional=False)
        _check_int("thinking_budget", self.thinking_budget, minimum=1, optional=True)
        if self.thinking_budget is not None and self.thinking_budget >= self.max_tokens:
            raise ValueError(
                f"provider config 'thinking_budget' ({self.thinking_budget}) must be "
                f"smaller than 'max_tokens' ({self.max_tokens})"
            )
        _check_number("temperature", self.temperature, optional=True)
        _check_number("timeout", self.timeout, optional=False)
        if self.timeout <= 0:
            raise ValueError("provider config 'timeout' must be positive")
        _check_int("max_retries", self.max_retries, minimum=0, optional=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProviderConfig:
        """Build from a mapping; unknown keys and wrong types raise ValueError naming the key.

        A value of None means "not set" and keeps the default.
        """
        if not isinstance(data, Mapping):
            raise ValueError("provider config must be a table/mapping")
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ValueError(
                    f"unknown provider config key {key!r} (known: {', '.join(sorted(known))})"
                )
        values = {key: value for key, value in data.items() if value is not None}
        if isinstance(values.get("timeout"), int) and not isinstance(values["timeout"], bool):
            values["timeout"] = float(values["timeout"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (round-trips through `from_dict`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _check_str(key: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise ValueError(f"provider config {key!r} must be a string, not {type(value).__name__}")


def _check_int(key: str, value: object, *, minimum: int, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"provider config {key!r} must be an integer, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"provider config {key!r} must be >= {minimum}, not {value}")


def _check_number(key: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"provider config {key!r} must be a number, not {type(value).__name__}")
