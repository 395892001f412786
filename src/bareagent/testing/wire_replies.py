"""Replies in the three wire formats, whole or as SSE event sequences, built from one
neutral `Reply` so every API says the same thing for a scripted turn."""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    """A scripted turn resolved for one request: what to say, in a neutral form."""

    text: str
    thinking: str
    calls: list[dict[str, Any]]
    stop_reason: str
    input_tokens: int
    output_tokens: int
    model: str


def thinking_signature(thinking: str) -> str:
    """The signature this server gives (and later demands back for) a thinking block."""
    digest = hashlib.sha256(f"bareagent-scripted:{thinking}".encode()).hexdigest()
    return f"sig_{digest[:32]}"


def count_words(text: str) -> int:
    """Rough token count: words and punctuation runs."""
    return len(re.findall(r"\w+|[^\w\s]+", text))


def chunks(text: str) -> list[str]:
    """Split text into word-sized deltas, as a real stream would arrive."""
    return re.findall(r"\S+\s*|\s+", text) or ([text] if text else [])


def json_pieces(text: str, parts: int = 3) -> list[str]:
    """Split a JSON string into a few partial pieces, as argument deltas arrive."""
    if len(text) < parts:
        return [text] if text else []
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


def new_id(prefix: str) -> str:
    """A random id with the given prefix (msg_, toolu_, call_, ...)."""
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def anthropic_message(reply: Reply) -> dict[str, Any]:
    """The whole Anthropic Message for a reply."""
    content: list[dict[str, Any]] = []
    if reply.thinking:
        content.append(
            {
                "type": "thinking",
                "thinking": reply.thinking,
                "signature": thinking_signature(reply.thinking),
            }
        )
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.calls:
        content.append(
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["input"]}
        )
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


def _anthropic_block(
    index: int, first: dict[str, Any], deltas: Iterable[dict[str, Any]]
) -> Iterator[tuple[str | None, Any]]:
    yield (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": first,
        },
    )
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def anthropic_events(reply: Reply) -> Iterator[tuple[str | None, Any]]:
    """The Anthropic SSE sequence: message_start ... message_stop."""
    start = anthropic_message(reply)
    start.update(content=[], stop_reason=None)
    start["usage"] = {"input_tokens": reply.input_tokens, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    index = 0
    if reply.thinking:
        deltas = [{"type": "thinking_delta", "thinking": c} for c in chunks(reply.thinking)]
        deltas.append({"type": "signature_delta", "signature": thinking_signature(reply.thinking)})
        yield from _anthropic_block(
            index, {"type": "thinking", "thinking": "", "signature": ""}, deltas
        )
        index += 1
    if reply.text:
        deltas = [{"type": "text_delta", "text": c} for c in chunks(reply.text)]
        yield from _anthropic_block(index, {"type": "text", "text": ""}, deltas)
        index += 1
    for call in reply.calls:
        first = {"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}
        pieces = json_pieces(json.dumps(call["input"]))
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        yield from _anthropic_block(index, first, deltas)
        index += 1
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


_CHAT_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _chat_usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def chat_completion(reply: Reply) -> dict[str, Any]:
    """The whole ChatCompletion for a reply."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in reply.calls
        ]
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _CHAT_FINISH[reply.stop_reason],
                "logprobs": None,
            }
        ],
        "usage": _chat_usage(reply),
    }


def chat_events(reply: Reply, include_usage: bool) -> Iterator[tuple[str | None, Any]]:
    """ChatCompletion chunks: role, deltas, tool-call deltas, finish, optional usage."""
    ident, created = new_id("chatcmpl-"), int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    yield None, chunk({"role": "assistant", "content": ""})
    for piece in chunks(reply.thinking):
        yield None, chunk({"reasoning_content": piece})
    for piece in chunks(reply.text):
        yield None, chunk({"content": piece})
    for index, call in enumerate(reply.calls):
        yield (
            None,
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": ""},
                        }
                    ]
                }
            ),
        )
        for piece in json_pieces(call["arguments"]):
            yield None, chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield None, chunk({}, _CHAT_FINISH[reply.stop_reason])
    if include_usage:
        final = chunk({})
        final["choices"] = []
        final["usage"] = _chat_usage(reply)
        yield None, final


def responses_output(reply: Reply) -> list[dict[str, Any]]:
    """Responses API output items: reasoning, message, function calls."""
    output: list[dict[str, Any]] = []
    if reply.thinking:
        output.append(
            {
                "id": new_id("rs_"),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reply.thinking}],
            }
        )
    if reply.text:
        output.append(
            {
                "id": new_id("msg_"),
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in reply.calls:
        output.append(
            {
                "id": new_id("fc_"),
                "type": "function_call",
                "call_id": call["id"],
                "name": call["name"],
                "arguments": call["arguments"],
                "status": "completed",
            }
        )
    return output


def responses_object(reply: Reply, output: list[dict[str, Any]], status: str) -> dict[str, Any]:
    """The Responses API `Response` object around the given output."""
    incomplete = status == "incomplete"
    return {
        "id": new_id("resp_"),
        "object": "response",
        "created_at": time.time(),
        "model": reply.model,
        "status": status,
        "output": output,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": count_words(reply.thinking)},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def responses_status(reply: Reply) -> str:
    """`incomplete` when the turn stops at max_tokens, else `completed`."""
    return "incomplete" if reply.stop_reason == "max_tokens" else "completed"


def responses_events(reply: Reply) -> Iterator[tuple[str | None, Any]]:
    """The Responses API SSE sequence, numbered, ending in response.completed."""
    output = responses_output(reply)
    final = responses_object(reply, output, responses_status(reply))
    started = dict(final, status="in_progress", output=[], usage=None, incomplete_details=None)
    part: dict[str, Any]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for n, item in enumerate(output):
        base = {"output_index": n, "item_id": item["id"]}
        if item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": n,
                    "item": dict(item, summary=[]),
                }
            )
            part = {"type": "summary_text", "text": ""}
            events.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    **base,
                    "summary_index": 0,
                    "part": part,
                }
            )
            for piece in chunks(text):
                events.append(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        **base,
                        "summary_index": 0,
                        "delta": piece,
                    }
                )
            events.append(
                {
                    "type": "response.reasoning_summary_text.done",
                    **base,
                    "summary_index": 0,
                    "text": text,
                }
            )
            events.append(
                {
                    "type": "response.reasoning_summary_part.done",
                    **base,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": text},
                }
            )
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": n,
                    "item": dict(item, content=[], status="in_progress"),
                }
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            events.append(
                {"type": "response.content_part.added", **base, "content_index": 0, "part": part}
            )
            for piece in chunks(text):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        **base,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                )
            events.append(
                {
                    "type": "response.output_text.done",
                    **base,
                    "content_index": 0,
                    "text": text,
                    "logprobs": [],
                }
            )
            events.append(
                {
                    "type": "response.content_part.done",
                    **base,
                    "content_index": 0,
                    "part": item["content"][0],
                }
            )
        else:
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": n,
                    "item": dict(item, arguments="", status="in_progress"),
                }
            )
            for piece in json_pieces(item["arguments"]):
                events.append(
                    {"type": "response.function_call_arguments.delta", **base, "delta": piece}
                )
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    **base,
                    "arguments": item["arguments"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": n, "item": item})
    done_type = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    events.append({"type": done_type, "response": final})
    for seq, event in enumerate(events):
        event["sequence_number"] = seq
        yield event["type"], event
