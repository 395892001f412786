"""Terminal rendering of agent-loop events and confirmation prompts (rich)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

MAX_RESULT_LINES = 8
MAX_ARG_CHARS = 160


def describe_call(name: str, tool_input: dict[str, Any]) -> str:
    """Short one-line form of a tool call, e.g. `bash(command='ls -la')`."""
    if name in ("bash", "background_run") and "command" in tool_input:
        args = repr(tool_input["command"])
    else:
        args = ", ".join(f"{k}={_short(v)}" for k, v in tool_input.items())
    return f"{name}({_cut(args, MAX_ARG_CHARS)})"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return repr(_cut(text, 60)) if isinstance(value, str) else _cut(text, 60)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EventPrinter:
    """Prints streamed text, tool calls and results as the loop reports them."""

    def __init__(self, console: Console, *, show_text: bool = True) -> None:
        self.console = console
        self.show_text = show_text
        self.streamed_text = False
        self._mid_line = False

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        """Agent-loop event sink."""
        if kind == "text_delta" and self.show_text:
            self.console.print(escape(data["text"]), end="", highlight=False, soft_wrap=True)
            self.streamed_text = True
            self._mid_line = not data["text"].endswith("\n")
        elif kind == "thinking_delta":
            return
        elif kind == "tool_call":
            self._end_line()
            call = data["call"]
            line = escape(describe_call(call.name, call.input))
            self.console.print(f"[cyan]⏺ {line}[/cyan]", highlight=False)
        elif kind == "tool_result":
            self._print_result(data["content"], data["is_error"])
        elif kind == "notifications":
            self._end_line()
            for note in data["notifications"]:
                self.print_notification(note)
        elif kind == "assistant":
            self._end_line()

    def print_notification(self, note: Any) -> None:
        """One finished job/subagent or piece of team mail the loop handed to the model."""
        self.console.print(
            f"[magenta]◆ {escape(note.kind)} {escape(note.source_id)} "
            f"finished: {escape(note.status)}[/magenta]"
        )

    def _end_line(self) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False

    def _print_result(self, content: str, is_error: bool) -> None:
        lines = content.splitlines() or [""]
        shown = lines[:MAX_RESULT_LINES]
        style = "red" if is_error else "dim"
        for index, line in enumerate(shown):
            lead = "⎿" if index == 0 else " "
            text = escape(_cut(line, 200))
            self.console.print(f"[{style}]  {lead} {text}[/{style}]", highlight=False)
        if len(lines) > len(shown):
            self.console.print(f"[dim]  … {len(lines) - len(shown)} more lines[/dim]")


def make_confirm(console: Console) -> Any:
    """Return an ask_user_fn that asks on the terminal; EOF or Ctrl-C means no."""

    def confirm(call: Any) -> bool:
        desc = escape(describe_call(call.name, call.input))
        console.print(f"[yellow]? Allow {desc}[/yellow]")
        try:
            answer = console.input("[yellow]  \\[y/N] [/yellow]")
        except (EOFError, KeyboardInterrupt):
            console.print()
            return False
        return answer.strip().lower() in ("y", "yes")

    return confirm
