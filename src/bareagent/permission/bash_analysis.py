"""Judge a bash command line: dangerous (always confirm), auto-safe (never ask) or neither.

The line is parsed with tree-sitter (`bash_parse`) into simple commands; each command word
is normalised (quotes and escapes removed, paths reduced to basenames, wrappers such as
sudo/env/timeout/xargs/find -exec unwrapped, `sh -c` bodies parsed recursively) and judged
by the per-command tables. Whatever cannot be known before the command runs — a computed
command name, eval, text piped into a shell or interpreter, an unparseable line — is
dangerous, so the guard fails closed.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache

from bareagent.permission.bash_code import SHELLS, interpreter, risky_code
from bareagent.permission.bash_commands import checker_for, is_known
from bareagent.permission.bash_parse import (
    ParsedScript,
    Redirect,
    SimpleCommand,
    Word,
    dynamic_word,
    parse_script,
)
from bareagent.permission.bash_safe import is_auto_safe, is_safe_name
from bareagent.permission.bash_util import (
    TRUSTED_BIN_DIRS,
    Stdin,
    basename,
    destructive_sql,
    is_benign_device,
    is_outside_dir,
    opens_net_device,
    touches_secrets,
    write_target_danger,
)
from bareagent.permission.bash_wrappers import WRAPPERS

MAX_DEPTH = 6
_MAX_UNWRAP = 32
# Search tools take patterns, not statements: `grep -rn "DROP TABLE"` is not SQL.
_PATTERN_TOOLS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git", "fd", "find"})
# Variables that make an otherwise harmless command load or run other code.
_CODE_VARS = re.compile(
    r"^(?:LD_\w+|DYLD_\w+|PATH|BASH_ENV|ENV|PROMPT_COMMAND|IFS|PS4|SHELLOPTS|BASHOPTS|CDPATH"
    r"|GLOBIGNORE|BASH_FUNC_\w+|GIT_\w*(?:SSH|EDITOR|PAGER|EXEC_PATH|EXTERNAL_DIFF|ASKPASS"
    r"|CONFIG\w*|DIR|WORK_TREE|TEMPLATE_DIR|PROXY_COMMAND)\w*|PAGER|MANPAGER|EDITOR|VISUAL"
    r"|BROWSER|LESSOPEN|LESSCLOSE|NODE_OPTIONS|PERL5OPT|PERL5LIB|PERLLIB|RUBYOPT|RUBYLIB"
    r"|PYTHONSTARTUP|PYTHONHOME|PYTHONINSPECT|PYTHONBREAKPOINT|SSH_ASKPASS|SUDO_ASKPASS"
    r"|PYTEST_ADDOPTS|PYTEST_PLUGINS|HISTFILE|TMOUT|TERMINFO|GCONV_PATH|HOSTALIASES|RESOLV_HOST_CONF|NLSPATH)$"
)
# Variables that are fine in front of an auto-safe command (`NO_COLOR=1 pytest`).
_BENIGN_VARS = re.compile(
    r"^(?:CI|NO_COLOR|FORCE_COLOR|TERM|COLUMNS|LINES|LANG|LANGUAGE|LC_\w+|TZ|PYTHONPATH"
    r"|PYTHONDONTWRITEBYTECODE|PYTHONUNBUFFERED|PYTHONWARNINGS|PYTHONHASHSEED|PYTHONUTF8"
    r"|PYTHONIOENCODING|PYTEST_TIMEOUT|RUST_BACKTRACE|RUST_LOG|CARGO_TERM_COLOR|NODE_ENV|DEBUG"
    r"|GOFLAGS|CGO_ENABLED|MYPY_\w+|RUFF_\w+|COVERAGE_\w+|GIT_PAGER_IN_USE)$"
)


@dataclass(frozen=True)
class Segment:
    """One simple command of the line: where it starts, its text and unwrapped form."""

    start: int
    text: str
    normalized: str
    safe: bool


@dataclass(frozen=True)
class BashVerdict:
    """The judgement of one command line."""

    dangerous: bool
    auto_safe: bool
    reasons: tuple[str, ...]
    segments: tuple[Segment, ...] = ()


@dataclass
class _State:
    reasons: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)
    written: dict[str, str | None] = field(default_factory=dict)
    executed: list[tuple[str, str]] = field(default_factory=list)


class _Judge:
    """Collects dangers while walking one command line (and everything nested in it)."""

    def __init__(self, state: _State, depth: int) -> None:
        self.state = state
        self.depth = depth

    # Judge protocol -------------------------------------------------------------------

    def danger(self, reason: str) -> None:
        """Record that the line is dangerous."""
        if reason not in self.state.reasons:
            self.state.reasons.append(reason)

    def note(self, flag: str) -> None:
        """Record a line-level fact (download, decode, execute)."""
        self.state.flags.add(flag)

    def runs_file(self, path: str, lang: str) -> None:
        """Record that a local file runs as a script; checked against files written."""
        self.state.executed.append((posixpath.normpath(path), lang))

    def writes_file(self, path: str, content: str | None) -> None:
        """Record that the line writes a file (content when the line shows it)."""
        key = posixpath.normpath(path)
        if key in self.state.written:
            content = None
        self.state.written[key] = content

    def analyse(self, script: str) -> None:
        """Judge nested shell code with the same rules, one level deeper."""
        if self.depth + 1 > MAX_DEPTH:
            self.danger("shell code nested too deeply to analyse")
            return
        _Judge(self.state, self.depth + 1).script(script)

    def judge_words(self, words: list[Word], stdin: Stdin, implicit_dynamic: bool) -> bool:
        """Judge one command given as words; returns whether it is auto-safe."""
        safe, _ = self._words(words, stdin, implicit_dynamic, None)
        return safe

    # walking --------------------------------------------------------------------------

    def script(self, text: str) -> list[Segment]:
        """Judge a whole piece of shell code; returns its top-level segments."""
        parsed = parse_script(text)
        for problem in parsed.problems:
            self.danger(problem)
        segments: list[Segment] = []
        attached: list[Redirect] = []
        for cmd in parsed.commands:
            attached.extend(cmd.redirects)
            segments.append(self._command(cmd))
        loose_safe = True
        for redirect in parsed.redirects:
            ok = self._redirect(redirect)
            if not ok and redirect not in attached:
                loose_safe = False
        for name, value in parsed.assignments:
            if not self._assignment(name, value):
                loose_safe = False
        if not loose_safe:
            segments.append(Segment(len(text.encode()), "", "", False))
        return segments

    def _command(self, cmd: SimpleCommand) -> Segment:
        safe = all(self._redirect_safe(r) for r in cmd.redirects)
        for name, value in cmd.assignments:
            if not self._assignment(name, value):
                safe = False
        stdin = _stdin_of(cmd)
        words_safe, final = self._words(cmd.words, stdin, False, cmd)
        for r in cmd.redirects:
            if r.is_output and r.target is not None and r.target.value is not None:
                self.writes_file(r.target.value, _written_content(final, stdin))
        normalized = " ".join(w.text for w in final)
        return Segment(cmd.start, cmd.text, normalized, safe and words_safe)

    def _words(
        self,
        words: list[Word],
        stdin: Stdin,
        implicit_dynamic: bool,
        cmd: SimpleCommand | None,
    ) -> tuple[bool, list[Word]]:
        transparent = True
        replace: str | None = None
        for _ in range(_MAX_UNWRAP):
            if not words:
                return transparent, words
            head = words[0]
            if head.value is None:
                self.danger(f"command name is only known at run time ({head.raw})")
                return False, words
            if head.glob:
                self.danger(f"command name uses glob or brace expansion ({head.raw})")
                return False, words
            value = head.value
            if not value.strip():
                return False, words
            name = basename(value)
            lname = name.lower()
            if "/" in value:
                parent = value.rsplit("/", 1)[0] or "/"
                if parent not in TRUSTED_BIN_DIRS:
                    transparent = False
                if lname in ("rm", "shred", "dd"):
                    self.danger(f"{lname} called by path ({value})")
            unwrap = WRAPPERS.get(lname)
            if unwrap is None:
                break
            result = unwrap(words[1:])
            for reason in result.reasons:
                self.danger(reason)
            for var, val in result.assignments:
                if not self._assignment(var, val):
                    transparent = False
            for body in result.bodies:
                if body.static:
                    self.analyse(body.value or "")
                else:
                    self.danger(f"{lname} runs code that is only known at run time")
            if not result.transparent:
                transparent = False
            if result.inner is None:
                return transparent and result.safe_alone, words
            if result.implicit_dynamic:
                implicit_dynamic = True
                replace = result.replace
                stdin = Stdin()
            words = result.inner
        else:
            self.danger("too many nested command wrappers")
            return False, words
        args = list(words[1:])
        if replace:
            args = [dynamic_word(a.raw) if replace in a.raw else a for a in args]
        if implicit_dynamic:
            args.append(dynamic_word("<xargs input>"))
        self._generic(lname, args)
        checker = checker_for(lname)
        verdict: bool | None = None
        if checker is not None:
            verdict = checker(self, lname, args, stdin)
        elif not is_known(lname) and not is_safe_name(name):
            self._embedded(args)
        if verdict is None:
            verdict = is_auto_safe(name, args)
        if name in SHELLS or interpreter(lname) is not None:
            self.note("execute")
        if "/" in value and not value.startswith("/"):
            self.note("execute")
            self.runs_file(value, "program")
        if lname in ("cd", "pushd"):
            targets = [a for a in args if not (a.value or "").startswith("-") or a.value == "-"]
            if is_outside_dir(targets[0].value if targets else None):
                self.note("cd-outside")
        return transparent and verdict, words

    def _generic(self, name: str, args: list[Word]) -> None:
        for idx, w in enumerate(args):
            target = _output_option(name, args, idx)
            if target is not None:
                why = write_target_danger(target)
                if why:
                    self.danger(f"{name} {why}")
                if name in ("tee", "curl", "wget"):
                    self.writes_file(target, None)
            text = w.text
            if opens_net_device(text):
                self.danger("opens a raw network connection via /dev/tcp or /dev/udp")
            if touches_secrets(text):
                self.danger(f"touches credential files ({text[:60]})")
            if name not in _PATTERN_TOOLS:
                sql = destructive_sql(text)
                if sql:
                    self.danger(f"destructive database statement ({sql})")

    def _embedded(self, args: list[Word]) -> None:
        """An unknown command may be a wrapper we do not know: judge any command in its args."""
        for idx, w in enumerate(args):
            v = (w.value or "").lower()
            if not v or v.startswith("-"):
                continue
            name = basename(v)
            if checker_for(name) is None and name not in WRAPPERS:
                continue
            probe = _State()
            _Judge(probe, self.depth + 1)._words(args[idx:], Stdin(), False, None)
            for reason in probe.reasons:
                self.danger(f"may run `{name}`: {reason}")
            return

    def _assignment(self, name: str, value: Word) -> bool:
        if _CODE_VARS.match(name):
            self.danger(f"sets {name}, which changes what later commands load or run")
            return False
        text = value.text
        if touches_secrets(text):
            self.danger(f"touches credential files ({text[:60]})")
        return bool(_BENIGN_VARS.match(name)) or not name

    def _redirect(self, r: Redirect) -> bool:
        if r.body is not None:
            sql = destructive_sql(r.body)
            if sql:
                self.danger(f"destructive database statement ({sql})")
        target = r.target
        if target is None:
            return self._redirect_safe(r)
        if r.op == "<<<":
            sql = destructive_sql(target.text)
            if sql:
                self.danger(f"destructive database statement ({sql})")
            return True
        for word in (target, *r.extra):
            text = word.text
            if opens_net_device(text):
                self.danger("opens a raw network connection via /dev/tcp or /dev/udp")
            if touches_secrets(text):
                self.danger(f"touches credential files ({text[:60]})")
        if r.is_output:
            if target.value is None:
                self.danger(f"writes to a file only known at run time ({target.raw})")
            else:
                why = write_target_danger(target.value)
                if why:
                    self.danger(why)
        return self._redirect_safe(r)

    @staticmethod
    def _redirect_safe(r: Redirect) -> bool:
        if not r.is_output:
            return True
        return (
            r.target is not None and r.target.value is not None and is_benign_device(r.target.value)
        )


_SHORT_OUTPUT = frozenset(
    {
        "sort",
        "gcc",
        "g++",
        "cc",
        "clang",
        "clang++",
        "go",
        "pandoc",
        "ruff",
        "rustc",
        "ld",
        "as",
        "objcopy",
        "curl",
        "wget",
        "gsort",
    }
)
_LONG_OUTPUT = (
    "--output",
    "--output-file",
    "--outfile",
    "--log-file",
    "--output-document",
    "--logfile",
    "--out-file",
)


def _output_option(name: str, args: list[Word], idx: int) -> str | None:
    """The file an output option at args[idx] writes to, if it is one."""
    v = args[idx].value or ""
    head, eq, val = v.partition("=")
    if head in _LONG_OUTPUT:
        if eq:
            return val
        return args[idx + 1].value if idx + 1 < len(args) else None
    if name in _SHORT_OUTPUT and v in ("-o", "-O") and idx + 1 < len(args):
        return args[idx + 1].value
    if name == "tee" and not v.startswith("-"):
        return v or None
    return None


def _written_content(words: list[Word], stdin: Stdin) -> str | None:
    """What a command writes to its redirection, when the line itself shows it."""
    if not words or not all(w.static for w in words):
        return None
    name = basename(words[0].value or "")
    args = [w.value or "" for w in words[1:]]
    if name in ("echo", "printf") and not stdin.fed:
        return " ".join(a for a in args if not (name == "echo" and a in ("-n", "-e", "-E")))
    if name == "cat" and not args and stdin.texts and not stdin.opaque:
        return "\n".join(stdin.texts)
    return None


def _stdin_of(cmd: SimpleCommand) -> Stdin:
    kinds: set[str] = set()
    texts: list[str] = []
    if cmd.piped:
        kinds.add("pipe")
    for r in cmd.redirects:
        if not r.feeds_stdin:
            continue
        if r.op in ("<<", "<<-"):
            kinds.add("dynamic" if r.body_dynamic else "heredoc")
            texts.append(r.body or "")
        elif r.op == "<<<":
            if r.target is not None and r.target.static:
                kinds.add("herestring")
                texts.append(r.target.value or "")
            else:
                kinds.add("dynamic")
        elif r.target is not None and r.target.procsub:
            kinds.add("procsub")
        elif (
            r.target is None
            or not r.target.static
            or r.op == "<&"
            or ((r.target.value or "").startswith(("/dev/stdin", "/dev/fd/", "/proc/self/fd")))
        ):
            kinds.add("dynamic")
        else:
            kinds.add("file")
    return Stdin(kinds=frozenset(kinds), texts=tuple(texts))


def _line_level(state: _State, segments: list[Segment]) -> None:
    """Dangers that only show across commands of one line."""
    judge = _Judge(state, 1)
    if state.flags & {"download", "decode"} and "execute" in state.flags:
        kind = "downloads" if "download" in state.flags else "decodes"
        judge.danger(f"{kind} content and executes code in the same command line")
    if "cd-outside" in state.flags and not all(s.safe for s in segments):
        judge.danger("changes directory outside the workspace and then modifies something")
    for path, lang in state.executed:
        if path not in state.written:
            continue
        content = state.written[path]
        if content is None:
            judge.danger(f"writes {path} and runs it in the same line")
        elif lang in ("shell", "program"):
            judge.analyse(content)
        else:
            hit = risky_code(content)
            if hit:
                judge.danger(f"writes {path} and runs it; the {lang} code uses {hit!r}")


def _variants(command: str) -> list[str]:
    """The line as written and, when it has line continuations, as bash joins them."""
    out = [command]
    if "\\\n" in command:
        out.append(re.sub(r"\\\n", "", command))
    return out


@lru_cache(maxsize=4096)
def classify_bash(command: str) -> BashVerdict:
    """Classify a command line: dangerous (always confirm), auto-safe (never ask), or neither."""
    state = _State()
    segments: list[Segment] = []
    for idx, variant in enumerate(_variants(command)):
        judged = _Judge(state, 0).script(variant)
        if idx == 0:
            segments = judged
        elif not all(s.safe for s in judged):
            segments = [*segments, Segment(len(command.encode()), "", "", False)]
    _line_level(state, segments)
    dangerous = bool(state.reasons)
    auto_safe = not dangerous and all(s.safe for s in segments)
    return BashVerdict(dangerous, auto_safe, tuple(state.reasons), tuple(segments))


def is_dangerous(command: str) -> bool:
    """True when the command must always be confirmed."""
    return classify_bash(command).dangerous


def is_auto_safe_command(command: str) -> bool:
    """True when the command may run without asking in DEFAULT mode."""
    return classify_bash(command).auto_safe


__all__ = [
    "BashVerdict",
    "ParsedScript",
    "Segment",
    "classify_bash",
    "is_auto_safe_command",
    "is_dangerous",
]
