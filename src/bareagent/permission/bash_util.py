"""Shared helpers for the bash policy: option parsing, path classes, text patterns."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bareagent.permission.bash_parse import Word


@dataclass(frozen=True)
class Stdin:
    """Where a command's standard input comes from, as far as the line shows."""

    kinds: frozenset[str] = frozenset()
    texts: tuple[str, ...] = ()

    @property
    def fed(self) -> bool:
        """True when something other than the terminal feeds standard input."""
        return bool(self.kinds)

    @property
    def opaque(self) -> bool:
        """True when the input is text we cannot see (a pipe, a substitution, a variable)."""
        return bool(self.kinds & {"pipe", "procsub", "dynamic"})


NO_STDIN = Stdin()


class Judge(Protocol):
    """What command checkers may call back into while judging one command line."""

    def danger(self, reason: str) -> None:
        """Record that the line is dangerous, with a one-line reason."""
        ...

    def analyse(self, script: str) -> None:
        """Judge a nested piece of shell code (an `sh -c` body, an eval string)."""
        ...

    def judge_words(self, words: list[Word], stdin: Stdin, implicit_dynamic: bool) -> bool:
        """Judge a command given as words (find -exec, xargs); returns its auto-safety."""
        ...

    def note(self, flag: str) -> None:
        """Record a line-level fact (`download`, `decode`, `execute`)."""
        ...

    def runs_file(self, path: str, lang: str) -> None:
        """Record that a local file is executed as a script (`sh x.sh`, `python t.py`)."""
        ...

    def writes_file(self, path: str, content: str | None) -> None:
        """Record that a file is written in this line (content when known)."""
        ...


# A checker records dangers; it may return an explicit auto-safety verdict (None: no view).
Checker = Callable[[Judge, str, list[Word], Stdin], bool | None]


# --- options -------------------------------------------------------------------------


def subcommand(args: Sequence[Word]) -> str | None:
    """The first non-option word (`systemctl stop x` → `stop`); None if run-time dependent."""
    for a in args:
        v = a.value
        if v is None:
            return None
        if not v.startswith("-"):
            return v
    return None


def option_words(args: Sequence[Word]) -> list[str]:
    """Option-looking words before a `--` (static values only)."""
    out: list[str] = []
    for a in args:
        v = a.value
        if v == "--":
            break
        if v is not None and v.startswith("-") and v != "-":
            out.append(v)
    return out


def short_flags(args: Sequence[Word]) -> set[str]:
    """Every letter that appears in a short-option cluster (`-rf` → r, f) before `--`."""
    out: set[str] = set()
    for opt in option_words(args):
        if not opt.startswith("--"):
            out.update(opt[1:])
    return out


def long_matches(opt: str, name: str, min_len: int = 3) -> bool:
    """True when `opt` is `name` or an abbreviation GNU getopt would accept for it."""
    if not opt.startswith("--"):
        return False
    head = opt.split("=", 1)[0]
    return len(head) >= min_len and name.startswith(head)


def has_long(args: Sequence[Word], name: str, min_len: int = 3) -> bool:
    """True when any option before `--` is (an abbreviation of) the long option `name`."""
    return any(long_matches(o, name, min_len) for o in option_words(args))


def has_option(args: Sequence[Word], short: str = "", long: Sequence[str] = ()) -> bool:
    """True when any of the short letters or long names is present."""
    if short and short_flags(args) & set(short):
        return True
    return any(has_long(args, name) for name in long)


def operands(
    args: Sequence[Word], short_values: str = "", long_values: Sequence[str] = ()
) -> list[Word]:
    """Non-option words, skipping the values of options that take one (GNU permutation)."""
    out: list[Word] = []
    i = 0
    rest = False
    while i < len(args):
        a = args[i]
        v = a.value
        i += 1
        if rest or v is None or v == "-" or not v.startswith("-"):
            out.append(a)
            continue
        if v == "--":
            rest = True
            continue
        if v.startswith("--"):
            head = v.split("=", 1)[0]
            if "=" not in v and any(long_matches(head, n) for n in long_values):
                i += 1
            continue
        cluster = v[1:]
        for pos, ch in enumerate(cluster):
            if ch in short_values:
                if pos == len(cluster) - 1:
                    i += 1
                break
    return out


def skip_options(
    args: Sequence[Word],
    short_values: str = "",
    long_values: Sequence[str] = (),
    *,
    numeric_flags: bool = False,
) -> int:
    """Index of the first operand when options stop at the first operand (wrapper style)."""
    i = 0
    while i < len(args):
        v = args[i].value
        if v is None or not v.startswith("-") or v == "-":
            return i
        i += 1
        if v == "--":
            return i
        if v.startswith("--"):
            head = v.split("=", 1)[0]
            if "=" not in v and any(long_matches(head, n) for n in long_values):
                i += 1
            continue
        if numeric_flags and v[1:].isdigit():
            continue
        cluster = v[1:]
        for pos, ch in enumerate(cluster):
            if ch in short_values:
                if pos == len(cluster) - 1:
                    i += 1
                break
    return i


# --- paths ---------------------------------------------------------------------------

_BENIGN_DEVICES = frozenset(
    {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty", "/dev/zero"}
)
_TEMP_DIRS = ("/tmp", "/var/tmp", "/private/tmp")
TRUSTED_BIN_DIRS = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/opt/homebrew/bin"}
)
_SECRET_RE = re.compile(
    r"(?:^|[/\s'\"=:@])\.ssh(?:/|\b)|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|/etc/(?:g?shadow|sudoers)"
    r"|\.aws/credentials|\.netrc\b|\.gnupg\b|\.kube/config|\.docker/config\.json"
    r"|\.git-credentials|\.pgpass\b|\.config/gh/hosts"
)
_NET_DEVICE_RE = re.compile(r"/dev/(?:tcp|udp)/")


def is_benign_device(path: str) -> bool:
    """Devices that are harmless to write: /dev/null, the std streams, /dev/fd/N."""
    return path in _BENIGN_DEVICES or re.fullmatch(r"/dev/fd/\d+", path) is not None


def is_home(path: str) -> bool:
    """A path that starts at a home directory (`~`, `~user`, `$HOME`)."""
    return path.startswith("~") or path.startswith(("$HOME", "${HOME}"))


def is_temp(path: str) -> bool:
    """A path inside a system temporary directory."""
    norm = posixpath.normpath(path)
    return any(norm == d or norm.startswith(d + "/") for d in _TEMP_DIRS)


def write_target_danger(path: str) -> str | None:
    """Why writing to `path` is dangerous, or None when it is an ordinary target."""
    if not path:
        return None
    if is_home(path):
        return f"writes into the home directory ({path})"
    if path.startswith("/"):
        if is_benign_device(path) or is_temp(path):
            return None
        if path.startswith("/dev/"):
            return f"writes to a device ({path})"
        return f"writes outside the workspace ({path})"
    norm = posixpath.normpath(path)
    if norm == ".git/config" or norm.startswith(".git/hooks"):
        return f"rewrites git configuration or hooks ({path})"
    if norm == ".." or norm.startswith("../"):
        return f"writes above the current directory ({path})"
    return None


def is_outside_dir(path: str | None) -> bool:
    """True when `cd path` would leave the workspace tree (absolute, home, `..`, unknown)."""
    if path is None or path in ("", "-") or is_home(path):
        return True
    if path.startswith("/"):
        return not is_temp(path)
    norm = posixpath.normpath(path)
    return norm == ".." or norm.startswith("../")


def touches_secrets(text: str) -> bool:
    """True when text names a credential file (SSH keys, cloud credentials, shadow)."""
    return _SECRET_RE.search(text) is not None


def opens_net_device(text: str) -> bool:
    """True when text names bash's /dev/tcp or /dev/udp pseudo-devices."""
    return _NET_DEVICE_RE.search(text) is not None


def basename(value: str) -> str:
    """The command name a path resolves to (`/usr/bin/rm` → `rm`)."""
    stripped = value.rstrip("/")
    return posixpath.basename(stripped) if stripped else value


# --- text patterns -------------------------------------------------------------------

_SQL_RE = re.compile(
    r"\bDROP\s+(?:TABLE|DATABASE|SCHEMA|VIEW|INDEX|USER|ROLE|OWNED|COLLECTION)\b"
    r"|\bTRUNCATE\s+(?:TABLE\s+)?[\w\"`\[]"
    r"|\bDELETE\s+FROM\b"
    r"|\bALTER\s+TABLE\b[^;]*\bDROP\b"
    r"|\bUPDATE\s+\S+\s+SET\b(?![^;]*\bWHERE\b)"
    r"|\bFLUSH(?:ALL|DB)\b"
    r"|\bdropDatabase\s*\(|\.drop\s*\(\s*\)|\bdeleteMany\s*\(",
    re.IGNORECASE,
)


def destructive_sql(text: str) -> str | None:
    """The destructive SQL (or Redis/Mongo) statement found in text, if any."""
    m = _SQL_RE.search(text)
    return " ".join(m.group(0).split()) if m else None
