"""Background notifications: finished jobs and subagents reported into the history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NOTIFICATION_TAG = "background-notifications"
MAX_NOTIFICATION_CHARS = 500


@dataclass(frozen=True)
class Notification:
    """One finished piece of background work, as the model will see it."""

    source_id: str
    kind: str
    status: str
    result: str | None = None
    error: str | None = None

    def render(self) -> str:
        """One entry of the notification block, with result/error cut to 500 chars."""
        body = self.error if self.error is not None else (self.result or "")
        label = "error" if self.error is not None else "result"
        return (
            f"[{self.kind} {self.source_id}] status={self.status}\n"
            f"{label}: {_cut(body, MAX_NOTIFICATION_CHARS)}"
        )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…[truncated]"


def format_notifications(notes: list[Notification]) -> str:
    """Render notifications as one `<background-notifications>` block."""
    inner = "\n\n".join(n.render() for n in notes)
    return f"<{NOTIFICATION_TAG}>\n{inner}\n</{NOTIFICATION_TAG}>"


def _is_tool_result_message(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def inject_notifications(messages: list[dict[str, Any]], notes: list[Notification]) -> bool:
    """Insert one system message before a trailing plain user message, else append it."""
    if not notes:
        return False
    note = {"role": "system", "content": format_notifications(notes)}
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user" and not _is_tool_result_message(last):
        messages.insert(len(messages) - 1, note)
    else:
        messages.append(note)
    return True
