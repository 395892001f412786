"""The demo's transcript: the REPL's event printer plus mail lines and a busy spinner."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from bareagent.cli.render import EventPrinter
from bareagent.orchestrator.team_mail import TeamNotification

MAX_MAIL_CHARS = 300


class DemoPrinter(EventPrinter):
    """Shows team mail in full and a spinner while a tool call runs (on a terminal)."""

    def __init__(self, console: Console) -> None:
        super().__init__(console, show_text=True)
        self._status: Status | None = None

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        """Agent-loop event sink."""
        self._stop_spinner()
        super().__call__(kind, data)
        if kind == "tool_call" and self.console.is_terminal:
            call = data["call"]
            self._status = self.console.status(f"[dim]{escape(call.name)} running…[/dim]")
            self._status.start()

    def print_notification(self, note: Any) -> None:
        """Team mail as the line the model reads; jobs and subagents as usual."""
        if isinstance(note, TeamNotification):
            line = (
                note.line if len(note.line) <= MAX_MAIL_CHARS else note.line[:MAX_MAIL_CHARS] + "…"
            )
            self.console.print(f"[magenta]✉ {escape(line)}[/magenta]", highlight=False)
        else:
            super().print_notification(note)

    def finish(self) -> None:
        """End the turn's output: no spinner left, the cursor on a fresh line."""
        self._stop_spinner()
        self._end_line()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
