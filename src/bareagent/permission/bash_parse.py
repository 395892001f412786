"""Parse a bash command line with tree-sitter into simple commands, words and redirections.

The result is a flat model the policy can judge: every simple command in the line (across
lists, pipelines, subshells, control flow, command and process substitutions, heredoc
tails), each with its words reduced to static text where that is possible, plus every
redirection and every construct the policy must treat as unknowable.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

_LANGUAGE = Language(tree_sitter_bash.language())
_PARSER = Parser(_LANGUAGE)
# One Parser object is not safe to use from two threads at once; a guard may be shared.
_PARSER_LOCK = threading.Lock()

# Longest command line we are willing to analyse; anything longer is judged unknowable.
MAX_COMMAND_CHARS = 20_000

_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_HEREDOC_TOKENS = frozenset({"<<", "<<-", "heredoc_start", "heredoc_body", "heredoc_end"})
_PIPE_TOKENS = frozenset({"|", "|&"})
_ANSI_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_ANSI_ESCAPE = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S
)


@dataclass(frozen=True)
class Word:
    """One shell word: its static text after quote removal, or None when run-time dependent."""

    value: str | None
    raw: str
    glob: bool = False
    procsub: bool = False

    @property
    def static(self) -> bool:
        """True when the word's text is fully known before the command runs."""
        return self.value is not None

    @property
    def text(self) -> str:
        """Best-effort text for pattern searches: the static value, else the source text."""
        return self.value if self.value is not None else self.raw


def dynamic_word(raw: str) -> Word:
    """A placeholder for an argument only known at run time (xargs input, find's `{}`)."""
    return Word(value=None, raw=raw)


@dataclass(frozen=True)
class Redirect:
    """One redirection: operator, optional fd, target word or heredoc body."""

    op: str
    fd: str | None = None
    target: Word | None = None
    body: str | None = None
    body_dynamic: bool = False
    extra: tuple[Word, ...] = ()

    @property
    def is_output(self) -> bool:
        """True when the redirection opens a file for writing."""
        if self.op in (">", ">>", ">|", "&>", "&>>", "<>"):
            return True
        # `>&N` / `>&-` only duplicate descriptors; `>& file` writes a file.
        if self.op == ">&" and self.target is not None:
            val = self.target.value
            return not (val is not None and (val.isdigit() or val == "-"))
        return False

    @property
    def feeds_stdin(self) -> bool:
        """True when this redirection supplies the command's standard input."""
        if self.op in ("<<", "<<-", "<<<"):
            return True
        return self.op in ("<", "<&", "<>") and self.fd in (None, "0")


@dataclass
class SimpleCommand:
    """One simple command: its words, prefix assignments and the redirections it sees."""

    words: list[Word]
    assignments: list[tuple[str, Word]]
    redirects: list[Redirect]
    piped: bool
    start: int
    text: str


@dataclass
class ParsedScript:
    """Everything the policy needs to judge one command line."""

    commands: list[SimpleCommand] = field(default_factory=list)
    assignments: list[tuple[str, Word]] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Ctx:
    piped: bool = False
    redirects: tuple[Redirect, ...] = ()


def _node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _unescape_unquoted(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _unescape_double(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw) and raw[i + 1] in '"\\$`\n':
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _ansi_c(raw: str) -> str:
    body = raw[2:-1] if raw.startswith("$'") and raw.endswith("'") else raw

    def sub(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc[0] in "xuU" and len(esc) > 1:
            return chr(min(int(esc[1:], 16), 0x10FFFF))
        if esc[0] in "01234567":
            return chr(int(esc, 8) & 0xFF)
        if esc[0] == "c" and len(esc) == 2:
            return chr(ord(esc[1]) & 0x1F)
        return _ANSI_SIMPLE.get(esc, "\\" + esc)

    return _ANSI_ESCAPE.sub(sub, body)


def _static(node: Node) -> tuple[str | None, str]:
    """Static value of a word node and the characters that stood unquoted in it."""
    kind = node.type
    if kind == "word":
        raw = _node_text(node)
        return _unescape_unquoted(raw), raw
    if kind == "number":
        raw = _node_text(node)
        return raw, raw
    if kind == "raw_string":
        raw = _node_text(node)
        return raw[1:-1] if len(raw) >= 2 else "", ""
    if kind == "ansi_c_string":
        return _ansi_c(_node_text(node)), ""
    if kind == "string":
        parts: list[str] = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type == "string_content":
                parts.append(_unescape_double(_node_text(child)))
            else:
                return None, ""
        return "".join(parts), ""
    if kind == "translated_string":
        inner = [c for c in node.children if c.type == "string"]
        return _static(inner[0]) if len(inner) == 1 else (None, "")
    if kind == "concatenation":
        values: list[str] = []
        unquoted: list[str] = []
        dynamic = False
        for child in node.children:
            val, unq = _static(child)
            unquoted.append(unq)
            if val is None:
                dynamic = True
            else:
                values.append(val)
        return (None if dynamic else "".join(values)), "".join(unquoted)
    return None, ""


def make_word(node: Node) -> Word:
    """Build a Word from a tree-sitter argument node."""
    value, unquoted = _static(node)
    raw = _node_text(node)
    glob = any(c in unquoted for c in "*?[") or (
        "{" in unquoted and "}" in unquoted and ("," in unquoted or ".." in unquoted)
    )
    if node.type == "brace_expression":
        glob = True
    return Word(value=value, raw=raw, glob=glob, procsub=node.type == "process_substitution")


def _fields(node: Node) -> Iterator[tuple[str | None, Node]]:
    for i, child in enumerate(node.children):
        yield node.field_name_for_child(i), child


class _Walker:
    def __init__(self, source: bytes) -> None:
        self.source = source
        self.out = ParsedScript()

    def walk(self, node: Node, ctx: _Ctx) -> None:
        kind = node.type
        if node.is_error or node.is_missing:
            self.out.problems.append("the command could not be parsed")
            return
        if kind in _SUBSTITUTIONS:
            # `>(cmd)` feeds cmd from the outer command's output, like a pipe.
            piped = kind == "process_substitution" and _node_text(node).startswith(">")
            for child in node.children:
                self.walk(child, _Ctx(piped=piped))
            return
        handler = getattr(self, "_on_" + kind, None)
        if handler is not None:
            handler(node, ctx)
            return
        for child in node.children:
            self.walk(child, ctx)

    def _on_pipeline(self, node: Node, ctx: _Ctx) -> None:
        piped = ctx.piped
        for child in node.children:
            if child.type in _PIPE_TOKENS:
                piped = True
                continue
            self.walk(child, _Ctx(piped=piped, redirects=ctx.redirects))

    def _on_redirected_statement(self, node: Node, ctx: _Ctx) -> None:
        own: list[Redirect] = []
        redirect_nodes: list[Node] = []
        bodies: list[Node] = []
        for name, child in _fields(node):
            if child.type in _REDIRECTS:
                redirect_nodes.append(child)
                own.append(self._redirect(child))
            elif name == "body" or child.is_named:
                bodies.append(child)
        inner = _Ctx(piped=ctx.piped, redirects=ctx.redirects + tuple(own))
        for body in bodies:
            self.walk(body, inner)
        for child in redirect_nodes:
            self._walk_redirect_children(child, ctx)

    def _on_function_definition(self, node: Node, ctx: _Ctx) -> None:
        self.out.problems.append("defines a shell function (it can shadow or recurse)")
        for child in node.children:
            self.walk(child, ctx)

    def _on_variable_assignment(self, node: Node, ctx: _Ctx) -> None:
        self.out.assignments.append(self._assignment(node))
        self._walk_substitutions(node)

    def _on_declaration_command(self, node: Node, ctx: _Ctx) -> None:
        for child in node.children:
            if child.type == "variable_assignment":
                self.out.assignments.append(self._assignment(child))
            elif child.type == "variable_name":
                self.out.assignments.append((_node_text(child), Word(value="", raw="")))
        self._walk_substitutions(node)

    def _on_command(self, node: Node, ctx: _Ctx) -> None:
        words: list[Word] = []
        assignments: list[tuple[str, Word]] = []
        redirects = list(ctx.redirects)
        for name, child in _fields(node):
            if child.type == "variable_assignment":
                assignments.append(self._assignment(child))
            elif child.type in _REDIRECTS:
                redirects.append(self._redirect(child))
                self._walk_redirect_children(child, _Ctx())
                continue
            elif name == "name":
                named = [c for c in child.children if c.is_named] or [child]
                if child.is_missing or any(c.is_missing for c in named):
                    self.out.problems.append("the command could not be parsed")
                    return
                words.append(make_word(named[0]) if len(named) == 1 else make_word(child))
            elif name == "argument":
                words.append(make_word(child))
            elif child.is_named and child.type not in ("comment",):
                self.out.problems.append(f"unsupported shell construct: {child.type}")
            self._walk_substitutions(child)
        self.out.commands.append(
            SimpleCommand(
                words=words,
                assignments=assignments,
                redirects=redirects,
                piped=ctx.piped,
                start=node.start_byte,
                text=_node_text(node),
            )
        )

    def _assignment(self, node: Node) -> tuple[str, Word]:
        name = ""
        value = Word(value="", raw="")
        for field_name, child in _fields(node):
            if field_name == "name":
                name = _node_text(child)
            elif field_name == "value":
                value = make_word(child)
        return name, value

    def _redirect(self, node: Node) -> Redirect:
        fd: str | None = None
        op = ""
        target: Word | None = None
        body: str | None = None
        body_dynamic = False
        extra: list[Word] = []
        for name, child in _fields(node):
            if child.type == "file_descriptor":
                fd = _node_text(child)
            elif name == "destination" or (node.type == "herestring_redirect" and child.is_named):
                # tree-sitter sometimes folds the next word (`0>&1`) into the redirect.
                if target is None:
                    target = make_word(child)
                else:
                    extra.append(make_word(child))
            elif child.type == "heredoc_body":
                body = _node_text(child)
                body_dynamic = any(c.type != "heredoc_content" for c in child.named_children)
            elif not child.is_named and child.type not in ("(", ")"):
                op = op or child.type
        redirect = Redirect(
            op=op, fd=fd, target=target, body=body, body_dynamic=body_dynamic, extra=tuple(extra)
        )
        self.out.redirects.append(redirect)
        return redirect

    def _walk_redirect_children(self, node: Node, ctx: _Ctx) -> None:
        for name, child in _fields(node):
            if child.type in _HEREDOC_TOKENS or child.type == "file_descriptor":
                if child.type == "heredoc_body":
                    self._walk_substitutions(child)
                continue
            if name == "destination" or node.type == "herestring_redirect":
                self._walk_substitutions(child)
            elif child.is_named or child.type in _PIPE_TOKENS:
                # Statements that follow a heredoc's opening line (`<<EOF | sh`, `&& rm`).
                self.walk(child, _Ctx())
            else:
                self.walk(child, ctx)

    def _walk_substitutions(self, node: Node) -> None:
        if node.is_error or node.is_missing:
            self.out.problems.append("the command could not be parsed")
            return
        if node.type in _SUBSTITUTIONS:
            self.walk(node, _Ctx())
            return
        for child in node.children:
            self._walk_substitutions(child)


_BARE_NEWLINE = re.compile(r"(?<!\\)\n")


def _parser_disagrees(root: Node) -> bool:
    """tree-sitter glues `\n\\cmd` into the previous command's words; bash would not."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "word" and _BARE_NEWLINE.search(_node_text(node)):
            return True
        stack.extend(node.children)
    return False


def _may_crash_parser(command: str) -> bool:
    """tree-sitter-bash 0.25 can segfault on `{` followed, anywhere later, by a character
    outside the BMP (a 4-byte UTF-8 sequence): tree-sitter-bash issue #337. A segfault
    would take the whole agent down, so such a command is never handed to the parser."""
    brace = command.find("{")
    return brace >= 0 and any(ord(ch) > 0xFFFF for ch in command[brace + 1 :])


def parse_script(command: str) -> ParsedScript:
    """Parse a command line; problems list anything that must be treated as unknowable."""
    if len(command) > MAX_COMMAND_CHARS:
        out = ParsedScript()
        out.problems.append(f"command longer than {MAX_COMMAND_CHARS} characters")
        return out
    if "\x00" in command:
        out = ParsedScript()
        out.problems.append("command contains a NUL byte")
        return out
    if _may_crash_parser(command):
        out = ParsedScript()
        out.problems.append("command has a character after '{' that the parser cannot take")
        return out
    source = command.encode("utf-8", "surrogatepass")
    with _PARSER_LOCK:
        tree = _PARSER.parse(source)
    walker = _Walker(source)
    if tree.root_node.has_error:
        walker.out.problems.append("the command could not be parsed")
    elif "\n" in command and _parser_disagrees(tree.root_node):
        walker.out.problems.append("the command could not be parsed reliably")
    try:
        walker.walk(tree.root_node, _Ctx())
    except RecursionError:
        walker.out.problems.append("the command is nested too deeply to analyse")
    return walker.out
