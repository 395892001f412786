"""Keep the history inside the model's context by eliding old, bulky tool output."""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_HISTORY_CHARS = 400_000
KEEP_RECENT_MESSAGES = 6
_ELIDED = "[earlier tool output elided to save context: {n} characters]"


def history_size(messages: list[dict[str, Any]]) -> int:
    """Approximate size of the history in characters."""
    return sum(len(json.dumps(m, ensure_ascii=False, default=str)) for m in messages)


def compact_messages(
    messages: list[dict[str, Any]], max_chars: int = DEFAULT_MAX_HISTORY_CHARS
) -> bool:
    """Elide the largest old tool results until the history fits; True if anything changed.

    Only tool_result bodies outside the most recent messages are shortened, so the
    conversation keeps its shape (every tool_use still has its tool_result).
    """
    if history_size(messages) <= max_chars:
        return False
    candidates: list[tuple[int, dict[str, Any]]] = []
    for message in messages[: max(0, len(messages) - KEEP_RECENT_MESSAGES)]:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            body = block.get("content") if isinstance(block, dict) else None
            if block.get("type") == "tool_result" and isinstance(body, str) and len(body) > 200:
                candidates.append((len(body), block))
    changed = False
    total = history_size(messages)
    for size, block in sorted(candidates, key=lambda c: c[0], reverse=True):
        if total <= max_chars:
            break
        replacement = _ELIDED.format(n=size)
        block["content"] = replacement
        total -= size - len(replacement)
        changed = True
    return changed
