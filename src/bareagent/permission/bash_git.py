"""git: destructive subcommands, config that runs commands, and the read-only subset."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bareagent.permission.bash_parse import Word
from bareagent.permission.bash_util import (
    Judge,
    has_long,
    long_matches,
    short_flags,
    write_target_danger,
)

# Config keys whose value git runs as a command (or that redirect where code comes from).
_EXEC_KEY = re.compile(
    r"^(?:alias\..+|core\.(?:pager|editor|sshcommand|fsmonitor|hookspath|askpass|gitproxy"
    r"|worktree)|diff\..+\.(?:textconv|command)|diff\.external|filter\..+|merge\..+\.driver"
    r"|sequence\.editor|credential\..*|gpg\..*program|pager\..+|uploadpack\..+|receive\..+"
    r"|remote\..+\.(?:uploadpack|receivepack|proxy)|include\.path|includeif\..+|protocol\..+"
    r"|http\..*proxy|url\..+|ssh\.variant|submodule\..+|interactive\.difffilter|web\.browser"
    r"|browser\..+|man\..+|difftool\..+|mergetool\..+|instaweb\..+|sendemail\..+|core\.editor)$",
    re.IGNORECASE,
)
_GLOBAL_WITH_VALUE = (
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--config-env",
    "--exec-path",
    "--list-cmds",
    "--attr-source",
)


GitCheck = Callable[[list[Word], set[str]], str | None]


@dataclass
class GitCall:
    """A git invocation split into its global options, subcommand and arguments."""

    sub: Word | None
    args: list[Word]
    configs: list[str] = field(default_factory=list)
    relocated: bool = False
    exec_path: bool = False
    config_env: bool = False
    version: bool = False


def split_git(args: list[Word]) -> GitCall:
    """Separate git's global options from the subcommand."""
    call = GitCall(sub=None, args=[])
    i = 0
    while i < len(args):
        a = args[i]
        v = a.value
        if v is None or not v.startswith("-"):
            break
        i += 1
        head, eq, val = v.partition("=")
        if head in ("--version", "-v"):
            call.version = True
            continue
        if head not in _GLOBAL_WITH_VALUE:
            continue
        if not eq and head not in ("--exec-path",):
            val = args[i].text if i < len(args) else ""
            i += 1
        if head == "-c":
            call.configs.append(val)
        elif head in ("-C", "--git-dir", "--work-tree", "--namespace"):
            call.relocated = True
        elif head == "--exec-path":
            call.exec_path = True
        elif head == "--config-env":
            call.config_env = True
    call.sub = args[i] if i < len(args) else None
    call.args = args[i + 1 :]
    return call


def _config_key_runs_code(setting: str) -> bool:
    key = setting.split("=", 1)[0].strip()
    return bool(_EXEC_KEY.match(key))


def _positional(args: list[Word]) -> list[Word]:
    out: list[Word] = []
    rest = False
    for a in args:
        v = a.value
        if rest or v is None or not v.startswith("-") or v == "-":
            out.append(a)
        elif v == "--":
            rest = True
    return out


def _after_double_dash(args: list[Word]) -> list[Word]:
    for idx, a in enumerate(args):
        if a.value == "--":
            return args[idx + 1 :]
    return []


def check_git(j: Judge, args: list[Word]) -> None:
    """Record why a git call is dangerous (force push, hard reset, clean, ...)."""
    call = split_git(args)
    for setting in call.configs:
        if _config_key_runs_code(setting):
            j.danger(f"git -c {setting.split('=', 1)[0]} can run arbitrary commands")
    if call.exec_path:
        j.danger("git --exec-path changes where git finds its programs")
    if call.config_env:
        j.danger("git --config-env injects configuration from the environment")
    if call.sub is None:
        return
    if call.sub.value is None:
        j.danger("git subcommand is only known at run time")
        return
    sub = call.sub.value
    rest = call.args
    for w in rest:
        v = w.text
        if v.startswith(("--upload-pack", "--receive-pack", "--exec=")) or v.startswith("ext::"):
            j.danger(f"git {sub} {v.split('=', 1)[0]} runs a command")
        if v.startswith("--output="):
            why = write_target_danger(v.split("=", 1)[1])
            if why:
                j.danger(f"git {why}")
    flags = short_flags(rest)
    check = _GIT_CHECKS.get(sub)
    if check is not None:
        reason = check(rest, flags)
        if reason:
            j.danger(reason)


def _push(rest: list[Word], flags: set[str]) -> str | None:
    if "f" in flags or any(
        o.value
        and o.value.startswith("--")
        and (long_matches(o.value, "--force", 4) or o.value.startswith("--force"))
        for o in rest
    ):
        return "git push --force rewrites remote history"
    if "d" in flags or has_long(rest, "--delete", 4) or has_long(rest, "--mirror", 4):
        return "git push deletes or mirrors remote refs"
    if has_long(rest, "--prune", 4):
        return "git push --prune deletes remote branches"
    for w in _positional(rest)[1:]:
        if not w.static:
            return "git push refspec is only known at run time"
        if (w.value or "").startswith(("+", ":")):
            return f"git push refspec {w.value} forces or deletes a remote ref"
    return None


def _reset(rest: list[Word], flags: set[str]) -> str | None:
    if has_long(rest, "--hard", 4) or has_long(rest, "--merge", 4) or has_long(rest, "--keep", 4):
        return "git reset --hard discards uncommitted work"
    return None


def _clean(rest: list[Word], flags: set[str]) -> str | None:
    if "n" in flags or has_long(rest, "--dry-run", 4):
        return None
    return "git clean deletes untracked files"


def _checkout(rest: list[Word], flags: set[str]) -> str | None:
    if "f" in flags or has_long(rest, "--force", 4) or has_long(rest, "--discard-changes", 4):
        return "git checkout --force discards local changes"
    if _after_double_dash(rest):
        return "git checkout -- <paths> discards local changes"
    for w in _positional(rest):
        if not w.static or w.value in (".", "*", ":/", "./") or w.glob:
            return "git checkout of a pathspec discards local changes"
    return None


def _restore(rest: list[Word], flags: set[str]) -> str | None:
    staged = "S" in flags or has_long(rest, "--staged", 4)
    worktree = "W" in flags or has_long(rest, "--worktree", 4)
    if staged and not worktree:
        return None
    return "git restore discards working-tree changes"


def _switch(rest: list[Word], flags: set[str]) -> str | None:
    if (
        "f" in flags
        or "C" in flags
        or has_long(rest, "--force", 4)
        or has_long(rest, "--discard-changes", 4)
        or has_long(rest, "--force-create", 4)
    ):
        return "git switch --force/--discard-changes discards local changes"
    return None


def _branch(rest: list[Word], flags: set[str]) -> str | None:
    if (
        "D" in flags
        or "M" in flags
        or "C" in flags
        or (
            ("d" in flags or has_long(rest, "--delete", 4))
            and ("f" in flags or has_long(rest, "--force", 4))
        )
    ):
        return "git branch -D/-M force-deletes or overwrites a branch"
    if "f" in flags or has_long(rest, "--force", 4):
        return "git branch --force overwrites a branch"
    return None


def _stash(rest: list[Word], flags: set[str]) -> str | None:
    pos = _positional(rest)
    if pos and pos[0].value in ("drop", "clear"):
        return f"git stash {pos[0].value} deletes stashed work"
    return None


def _rm(rest: list[Word], flags: set[str]) -> str | None:
    if ("r" in flags or has_long(rest, "--recursive", 4)) and (
        "f" in flags or has_long(rest, "--force", 4)
    ):
        return "git rm -rf deletes files recursively"
    return None


def _always(reason: str) -> GitCheck:
    def check(rest: list[Word], flags: set[str]) -> str | None:
        return reason

    return check


def _reflog(rest: list[Word], flags: set[str]) -> str | None:
    pos = _positional(rest)
    if pos and pos[0].value in ("expire", "delete", "drop"):
        return "git reflog expire/delete destroys the recovery log"
    return None


def _gc(rest: list[Word], flags: set[str]) -> str | None:
    for w in rest:
        if (w.value or "").startswith("--prune=") and (w.value or "").split("=", 1)[1] in (
            "now",
            "all",
        ):
            return "git gc --prune=now drops unreachable commits"
    return None


def _update_ref(rest: list[Word], flags: set[str]) -> str | None:
    if "d" in flags or has_long(rest, "--stdin", 4):
        return "git update-ref deletes or rewrites refs"
    return None


def _config(rest: list[Word], flags: set[str]) -> str | None:
    pos = [w for w in _positional(rest) if w.value not in ("set", "get", "list", "unset")]
    if len(pos) >= 2 and _config_key_runs_code(pos[0].text):
        return f"git config {pos[0].text} makes git run a command"
    return None


def _worktree(rest: list[Word], flags: set[str]) -> str | None:
    pos = _positional(rest)
    if pos and pos[0].value == "remove" and ("f" in flags or has_long(rest, "--force", 4)):
        return "git worktree remove --force deletes a working tree"
    return None


_GIT_CHECKS: dict[str, GitCheck] = {
    "push": _push,
    "reset": _reset,
    "clean": _clean,
    "checkout": _checkout,
    "restore": _restore,
    "switch": _switch,
    "branch": _branch,
    "stash": _stash,
    "rm": _rm,
    "filter-branch": _always("git filter-branch rewrites history"),
    "filter-repo": _always("git filter-repo rewrites history"),
    "reflog": _reflog,
    "gc": _gc,
    "update-ref": _update_ref,
    "config": _config,
    "worktree": _worktree,
}

# --- read-only subset ---------------------------------------------------------------

_READ_ONLY = frozenset(
    {
        "status",
        "log",
        "diff",
        "show",
        "rev-parse",
        "blame",
        "annotate",
        "ls-files",
        "describe",
        "shortlog",
        "ls-tree",
        "cat-file",
        "rev-list",
        "merge-base",
        "name-rev",
        "whatchanged",
        "grep",
        "version",
        "help",
        "count-objects",
        "for-each-ref",
        "show-ref",
        "check-ignore",
        "check-attr",
        "diff-tree",
        "diff-files",
        "diff-index",
        "range-diff",
        "cherry",
        "ls-remote",
    }
)
_BRANCH_LIST_OPTS = {
    "-a",
    "-r",
    "-v",
    "-vv",
    "-l",
    "--list",
    "--all",
    "--remotes",
    "--verbose",
    "--show-current",
    "--no-color",
    "--color",
    "--column",
    "--no-column",
    "-i",
    "--ignore-case",
    "--omit-empty",
}
_BRANCH_VALUE_OPTS = {
    "--merged",
    "--no-merged",
    "--contains",
    "--no-contains",
    "--points-at",
    "--sort",
    "--format",
}
_TAG_LIST_OPTS = {
    "-l",
    "--list",
    "--column",
    "--no-column",
    "-i",
    "--ignore-case",
    "--color",
    "--omit-empty",
}
_WRITE_OPTS = ("--output", "--ext-diff", "--open-files-in-pager")


def _listing(rest: list[Word], flag_ok: set[str], value_opts: set[str]) -> bool:
    listing = False
    i = 0
    positional = 0
    while i < len(rest):
        v = rest[i].value
        i += 1
        if v is None:
            return False
        if v.startswith("-"):
            head = v.split("=", 1)[0]
            if head in ("-l", "--list"):
                listing = True
            if head in flag_ok or (head.startswith("-n") and head[2:].isdigit()):
                continue
            if head in value_opts:
                if "=" not in v and i < len(rest) and not (rest[i].value or "-").startswith("-"):
                    i += 1
                continue
            return False
        positional += 1
    return positional == 0 or listing


def git_is_read_only(args: list[Word]) -> bool:
    """True for git calls that only read the repository (status, log, diff, listing...)."""
    call = split_git(args)
    if call.configs or call.exec_path or call.config_env or call.relocated:
        return False
    if call.sub is None:
        return call.version
    sub = call.sub.value
    rest = call.args
    if sub is None or any(not w.static for w in rest):
        return False
    if any(any(long_matches(w.value or "", o, 5) for o in _WRITE_OPTS) for w in rest):
        return False
    if sub in _READ_ONLY:
        return not (sub == "grep" and ("O" in short_flags(rest)))
    if sub == "branch":
        return _listing(rest, _BRANCH_LIST_OPTS, _BRANCH_VALUE_OPTS)
    if sub == "tag":
        return _listing(rest, _TAG_LIST_OPTS, _BRANCH_VALUE_OPTS | {"-n"})
    pos = _positional(rest)
    first = pos[0].value if pos else None
    if sub == "remote":
        return first in (None, "show", "get-url") and all(
            (w.value or "") in ("-v", "--verbose", "-n") or not (w.value or "").startswith("-")
            for w in rest
        )
    if sub == "stash":
        return first in ("list", "show")
    if sub == "worktree":
        return first == "list"
    if sub == "reflog":
        return first in (None, "show")
    if sub == "config":
        reads = {
            "--get",
            "--get-all",
            "--get-regexp",
            "--list",
            "-l",
            "--show-origin",
            "--show-scope",
            "--name-only",
            "--global",
            "--local",
            "--system",
            "--null",
            "-z",
        }
        opts = [w.value or "" for w in rest if (w.value or "").startswith("-")]
        if first in ("get", "list"):
            return all(o in reads for o in opts)
        if any(o in ("--get", "--get-all", "--get-regexp", "--list", "-l") for o in opts):
            return all(o in reads for o in opts)
        return len(pos) == 1 and all(o in reads for o in opts)
    return False
