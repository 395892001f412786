"""What the scripted server reads from a request: a provider-neutral view for turn
selection, and the checks the real APIs would make before answering."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bareagent.testing.wire_replies import thinking_signature


@dataclass
class RequestView:
    """What turn selection needs to know about a request, whatever its API."""

    model: str
    system: str
    last_user: str
    tools: list[str]
    stream: bool
    body: Any = field(repr=False, default=None)


def text_of(content: object) -> str:
    """Text of a content value in any of the three wire formats."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                kind = block.get("type")
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif kind == "tool_result":
                    parts.append(text_of(block.get("content")))
    return "\n".join(p for p in parts if p)


def anthropic_view(body: Mapping[str, Any]) -> RequestView:
    """Turn-selection view of an Anthropic Messages request."""
    messages = body.get("messages") or []
    last_assistant = max(
        (
            i
            for i, m in enumerate(messages)
            if isinstance(m, Mapping) and m.get("role") == "assistant"
        ),
        default=-1,
    )
    user_text = [
        text_of(m.get("content"))
        for m in messages[last_assistant + 1 :]
        if isinstance(m, Mapping) and m.get("role") == "user"
    ]
    tools = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, Mapping)]
    return RequestView(
        model=str(body.get("model", "")),
        system=text_of(body.get("system")),
        last_user="\n".join(user_text),
        tools=tools,
        stream=bool(body.get("stream")),
        body=body,
    )


def chat_view(body: Mapping[str, Any]) -> RequestView:
    """Turn-selection view of a Chat Completions request."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    system = [
        text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    ]
    last_assistant = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1
    )
    user_text = [
        text_of(m.get("content"))
        for m in messages[last_assistant + 1 :]
        if m.get("role") in ("user", "tool")
    ]
    tools = [
        str((t.get("function") or {}).get("name"))
        for t in body.get("tools") or []
        if isinstance(t, Mapping)
    ]
    return RequestView(
        model=str(body.get("model", "")),
        system="\n".join(system),
        last_user="\n".join(user_text),
        tools=tools,
        stream=bool(body.get("stream")),
        body=body,
    )


def _responses_items(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return [item for item in raw or [] if isinstance(item, Mapping)]


def responses_view(body: Mapping[str, Any]) -> RequestView:
    """Turn-selection view of a Responses API request."""
    items = _responses_items(body)
    system = [text_of(body.get("instructions"))] + [
        text_of(i.get("content")) for i in items if i.get("role") in ("system", "developer")
    ]
    last_assistant = max(
        (
            n
            for n, i in enumerate(items)
            if i.get("role") == "assistant" or i.get("type") == "function_call"
        ),
        default=-1,
    )
    user_text = []
    for item in items[last_assistant + 1 :]:
        if item.get("role") == "user":
            user_text.append(text_of(item.get("content")))
        elif item.get("type") == "function_call_output":
            user_text.append(text_of(item.get("output")))
    tools = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, Mapping)]
    return RequestView(
        model=str(body.get("model", "")),
        system="\n".join(s for s in system if s),
        last_user="\n".join(user_text),
        tools=tools,
        stream=bool(body.get("stream")),
        body=body,
    )


# --------------------------------------------------------------------------- validation


def validate_anthropic(body: Mapping[str, Any]) -> str | None:
    """The 400 message the Messages API would give, or None."""
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    pending: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            return f"messages.{i}.content: Input should be a valid list"
        answered: set[str] = set()
        seen_other = False
        for j, block in enumerate(blocks):
            if not isinstance(block, Mapping):
                return f"messages.{i}.content.{j}: Input should be an object"
            kind = block.get("type")
            if kind == "text" and not block.get("text"):
                return f"messages.{i}.content.{j}: text content blocks must be non-empty"
            if kind == "thinking" and block.get("signature") != thinking_signature(
                str(block.get("thinking", ""))
            ):
                return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
            if kind == "tool_result":
                if message["role"] != "user":
                    return f"messages.{i}.content.{j}: tool_result blocks belong in user messages"
                if seen_other:
                    return (
                        f"messages.{i}.content.{j}: tool_result blocks must come first in the "
                        "content of a user message"
                    )
                tool_id = str(block.get("tool_use_id", ""))
                if tool_id not in pending:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {tool_id}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                answered.add(tool_id)
            else:
                seen_other = True
        if pending - answered:
            ids = ", ".join(sorted(pending - answered))
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {ids}"
            )
        pending = set()
        if message["role"] == "assistant":
            pending = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
    return None


def validate_chat(body: Mapping[str, Any]) -> str | None:
    """The 400 message Chat Completions would give, or None."""
    for key in ("model", "messages"):
        if key not in body:
            return f"Missing required parameter: '{key}'."
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "Invalid 'messages': empty array."
    pending: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value for 'messages[{i}].role'."
        assert isinstance(message, Mapping)
        if role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            if call_id not in pending:
                return (
                    f"Invalid parameter: messages[{i}] with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'."
                )
            pending.discard(call_id)
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(sorted(pending))}"
            )
        if role == "assistant":
            for n, call in enumerate(message.get("tool_calls") or []):
                arguments = (call.get("function") or {}).get("arguments")
                if not isinstance(arguments, str):
                    return f"Invalid type for 'messages[{i}].tool_calls[{n}].function.arguments'."
                pending.add(str(call.get("id", "")))
    if pending:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. Missing: {', '.join(sorted(pending))}"
        )
    return None


def validate_responses(body: Mapping[str, Any]) -> str | None:
    """The 400 message the Responses API would give, or None."""
    if "model" not in body:
        return "Missing required parameter: 'model'."
    calls: set[str] = set()
    outputs: set[str] = set()
    for item in _responses_items(body):
        if item.get("type") == "function_call":
            calls.add(str(item.get("call_id", "")))
        elif item.get("type") == "function_call_output":
            call_id = str(item.get("call_id", ""))
            if call_id not in calls:
                return f"No tool call found for function call output with call_id {call_id}."
            outputs.add(call_id)
    missing = calls - outputs
    if missing:
        return f"No tool output found for function call {sorted(missing)[0]}."
    return None
