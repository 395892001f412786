"""The agent loop: model call, permission check, tool execution, repeat (SPEC §4)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bareagent.core.compaction import DEFAULT_MAX_HISTORY_CHARS, compact_messages
from bareagent.core.notifications import Notification, inject_notifications

if TYPE_CHECKING:
    from bareagent.permission import PermissionGuard
    from bareagent.provider.base import LLMResponse, Provider, ToolCall

DEFAULT_MAX_ITERATIONS = 200
USER_DENIED = "User denied."
CANCELLED = "Cancelled by user."

Message = dict[str, Any]
EventSink = Callable[[str, dict[str, Any]], None]
NotificationSource = Callable[[], list[Notification]]


class LLMCallError(RuntimeError):
    """The model could not be called, or the loop ran out of iterations."""


@dataclass
class LoopOptions:
    """Knobs of one agent_loop run that callers rarely change."""

    max_iterations: int = DEFAULT_MAX_ITERATIONS
    stream: bool = False
    max_history_chars: int = DEFAULT_MAX_HISTORY_CHARS
    provider_kwargs: dict[str, Any] = field(default_factory=dict)


def agent_loop(
    messages: list[Message],
    provider: Provider,
    tools: list[dict[str, Any]],
    handlers: Mapping[str, Callable[..., Any]],
    *,
    permission_guard: PermissionGuard | None = None,
    notifications: NotificationSource | None = None,
    on_event: EventSink | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    stream: bool = False,
    options: LoopOptions | None = None,
) -> str:
    """Drive the model until it answers without tool calls; return its final text.

    `messages` is extended in place. Each iteration injects finished background
    notifications, compacts the history if needed, calls the model, and runs the
    requested tools, appending one user message of tool_result blocks.
    """
    opts = options or LoopOptions(max_iterations=max_iterations, stream=stream)
    emit = on_event or (lambda _kind, _data: None)
    for _ in range(opts.max_iterations):
        if notifications is not None:
            notes = notifications()
            if inject_notifications(messages, notes):
                emit("notifications", {"notifications": notes})
        compact_messages(messages, opts.max_history_chars)
        response = _call_model(provider, messages, tools, opts, emit)
        messages.append(response.to_message())
        emit("assistant", {"response": response})
        if not response.has_tool_calls:
            return response.text
        try:
            results = _run_tool_calls(response.tool_calls, handlers, permission_guard, emit)
        except _Cancelled as cancelled:
            messages.append({"role": "user", "content": cancelled.results})
            raise KeyboardInterrupt from None
        messages.append({"role": "user", "content": results})
    raise LLMCallError(f"Agent loop stopped after {opts.max_iterations} iterations.")


def _call_model(
    provider: Provider,
    messages: list[Message],
    tools: list[dict[str, Any]],
    opts: LoopOptions,
    emit: EventSink,
) -> LLMResponse:
    try:
        if opts.stream:
            streamed = _call_streaming(provider, messages, tools, opts, emit)
            if streamed is not None:
                return streamed
        return provider.create(messages, tools, **opts.provider_kwargs)
    except (KeyboardInterrupt, LLMCallError):
        raise
    except Exception as exc:
        raise LLMCallError(f"LLM call failed: {exc}") from exc


def _call_streaming(
    provider: Provider,
    messages: list[Message],
    tools: list[dict[str, Any]],
    opts: LoopOptions,
    emit: EventSink,
) -> LLMResponse | None:
    """Stream one response; None when the provider does not implement streaming."""
    final: LLMResponse | None = None
    try:
        for event in provider.create_stream(messages, tools, **opts.provider_kwargs):
            if event.type in ("text", "thinking"):
                emit(f"{event.type}_delta", {"text": event.text})
            elif event.type == "response":
                final = event.response
    except NotImplementedError:
        if final is None:
            return None
        raise
    if final is None:
        raise LLMCallError("LLM call failed: the stream ended without a response")
    return final


def _tool_result(call_id: str, content: str, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}


def render_result(value: Any) -> str:
    """Turn a handler's return value into tool_result text (JSON for structures)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _run_tool_calls(
    calls: list[ToolCall],
    handlers: Mapping[str, Callable[..., Any]],
    guard: PermissionGuard | None,
    emit: EventSink,
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        emit("tool_call", {"call": call})
        try:
            block = _run_one(call, handlers, guard)
        except KeyboardInterrupt:
            # Keep the history valid (every tool_use answered) before unwinding the turn.
            results.extend(_tool_result(c.id, CANCELLED, True) for c in calls[index:])
            raise _Cancelled(results) from None
        emit(
            "tool_result",
            {"call": call, "content": block["content"], "is_error": block["is_error"]},
        )
        results.append(block)
    return results


class _Cancelled(KeyboardInterrupt):
    """A Ctrl-C during tool execution, carrying the results to record."""

    def __init__(self, results: list[dict[str, Any]]) -> None:
        super().__init__()
        self.results = results


def _run_one(
    call: ToolCall, handlers: Mapping[str, Callable[..., Any]], guard: PermissionGuard | None
) -> dict[str, Any]:
    handler = handlers.get(call.name)
    # A tool that does not exist is answered before any permission prompt: asking the
    # user to approve a call that cannot run would only be noise.
    if handler is None:
        return _tool_result(call.id, f"Unknown tool: {call.name}", True)
    if (
        guard is not None
        and guard.requires_confirm(call.name, call.input)
        and not guard.ask_user(call)
    ):
        return _tool_result(call.id, USER_DENIED, True)
    try:
        value = handler(**call.input)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        return _tool_result(call.id, f"Error: {type(exc).__name__}: {exc}", True)
    return _tool_result(call.id, render_result(value))
