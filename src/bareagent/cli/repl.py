"""The interactive REPL: prompts, streaming output, slash commands, Ctrl-C per turn."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

from bareagent.cli import team_repl
from bareagent.cli.common import config_from_args, resolve_workspace
from bareagent.cli.render import EventPrinter, make_confirm
from bareagent.cli.runtime import open_session
from bareagent.core.loop import LLMCallError
from bareagent.core.session import Session
from bareagent.permission import PermissionMode

HELP = """\
Slash commands:
  /default /auto /plan /bypass   switch permission mode
  /mode                          show the current mode
  /team list|spawn|send|review|shutdown|register|remove   teammates (/team help)
  /clear                         forget the conversation
  /help                          this help
  /exit                          leave (Ctrl-D works too)
Ctrl-C cancels the current turn without ending the session."""


class Repl:
    """Reads prompts and slash commands and runs turns on one session."""

    def __init__(self, session: Session, console: Console) -> None:
        self.session = session
        self.console = console
        self.running = True
        self.commands: dict[str, Callable[[list[str]], None]] = {
            "/help": lambda _a: self.console.print(HELP, highlight=False),
            "/exit": self._exit,
            "/quit": self._exit,
            "/clear": self._clear,
            "/mode": self._show_mode,
        }
        for mode in PermissionMode:
            self.commands[f"/{mode.value}"] = self._mode_setter(mode)
        team_repl.install(self)

    def _exit(self, _args: list[str]) -> None:
        self.running = False

    def _clear(self, _args: list[str]) -> None:
        self.session.reset()
        self.console.print("[dim]Conversation cleared.[/dim]")

    def _show_mode(self, _args: list[str]) -> None:
        self.console.print(f"Permission mode: [bold]{self.session.guard.mode.value}[/bold]")

    def _mode_setter(self, mode: PermissionMode) -> Callable[[list[str]], None]:
        def set_mode(_args: list[str]) -> None:
            self.session.set_mode(mode)
            self._show_mode([])

        return set_mode

    def handle_command(self, line: str) -> None:
        """Run one slash command; unknown ones print a hint."""
        name, *args = line.split()
        command = self.commands.get(name.lower())
        if command is None:
            self.console.print(f"[red]Unknown command {name}[/red] — /help lists them.")
            return
        command(args)

    def run_prompt(self, prompt: str) -> None:
        """Run one turn; Ctrl-C cancels it, errors are shown in one line."""
        printer = EventPrinter(self.console)
        try:
            text = self.session.run_turn(prompt, on_event=printer)
        except KeyboardInterrupt:
            self.console.print("\n[yellow]Turn cancelled.[/yellow]")
            return
        except LLMCallError as exc:
            self.console.print(f"[red]{exc}[/red]")
            return
        if not printer.streamed_text:
            self.console.print(text, highlight=False)
        else:
            self.console.print()

    def loop(self) -> int:
        """Read-eval-print until /exit or EOF."""
        self.console.print(
            f"[bold]BareAgent[/bold] in {self.session.workspace} — "
            f"mode {self.session.guard.mode.value}. /help for commands."
        )
        while self.running:
            team_repl.show_inbox(self)
            try:
                line = self.console.input("[bold green]› [/bold green]").strip()
            except EOFError:
                self.console.print()
                break
            except KeyboardInterrupt:
                self.console.print("\n[dim](/exit or Ctrl-D to quit)[/dim]")
                continue
            if not line:
                continue
            if line.startswith("/"):
                self.handle_command(line)
            else:
                self.run_prompt(line)
        return 0


def run_repl(args: argparse.Namespace) -> int:
    """Entry point for plain `bareagent`."""
    workspace = resolve_workspace(args.workspace)
    config = config_from_args(args, workspace)
    console = Console()
    with open_session(workspace, config, ask_user_fn=make_confirm(console)) as session:
        return Repl(session, console).loop()
