"""The per-command danger checkers, by command name, and the code-running commands."""

from __future__ import annotations

from bareagent.permission.bash_code import (
    SHELLS,
    check_awk,
    check_editor,
    check_interpreter,
    check_sed,
    check_shell,
    check_source,
    interpreter,
    risky_code,
)
from bareagent.permission.bash_files import FILE_CHECKERS
from bareagent.permission.bash_git import check_git
from bareagent.permission.bash_parse import Word
from bareagent.permission.bash_system import (
    ALWAYS_DANGEROUS,
    CLOUD_TOOLS,
    DISK_PATTERN,
    SYSTEM_CHECKERS,
    check_cloud,
    check_packages,
)
from bareagent.permission.bash_util import Checker, Judge, Stdin, operands, subcommand


def _deno(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    j.note("execute")
    sub = subcommand(args)
    if sub == "eval":
        idx = next(i for i, a in enumerate(args) if a.value == "eval")
        for w in args[idx + 1 :]:
            if not w.static:
                j.danger("runs inline Deno code built at run time")
            elif not (w.value or "").startswith("-"):
                hit = risky_code(w.value or "")
                if hit:
                    j.danger(f"inline Deno code uses {hit!r}")
                break
    elif sub in ("run", "install") and any("://" in w.text for w in args):
        j.danger("deno runs remote code")
    return None


def _trap(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    ops = operands(args)
    if ops and len(ops) >= 2:
        if ops[0].static:
            j.analyse(ops[0].value or "")
        else:
            j.danger("trap handler only known at run time")
    return None


def _alias(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    for w in args:
        if w.value and "=" in w.value:
            j.analyse(w.value.split("=", 1)[1])
        elif w.value is None:
            j.danger("alias body only known at run time")
    return False if args else None


def _interp(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    module = check_interpreter(j, name, args, stdin)
    checker = CHECKERS.get(module) if module else None
    if checker is not None and module is not None:
        # `python -m pip install ...` is judged like `pip install ...`.
        idx = next((i for i, a in enumerate(args) if (a.value or "").endswith(module)), -1)
        checker(j, module, args[idx + 1 :], stdin)
    return None


def _shell(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    check_shell(j, name, args, stdin)
    return None


def _source(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    return check_source(j, args)


def _awk(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    return check_awk(j, args)


def _sed(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    return check_sed(j, args)


def _editor(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    check_editor(j, name, args)
    return None


def _git(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    check_git(j, args)
    return None


def _make_always(reason: str) -> Checker:
    def check(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
        j.danger(f"{name}: {reason}")
        return None

    return check


CHECKERS: dict[str, Checker] = {
    **FILE_CHECKERS,
    **SYSTEM_CHECKERS,
    "deno": _deno,
    "trap": _trap,
    "alias": _alias,
    "source": _source,
    ".": _source,
    **{n: _awk for n in ("awk", "gawk", "mawk", "nawk")},
    **{n: _sed for n in ("sed", "gsed")},
    **{n: _editor for n in ("vi", "vim", "nvim", "ex", "view", "gvim", "vimdiff")},
    "git": _git,
}


def checker_for(name: str) -> Checker | None:
    """The danger checker for a (lower-cased) command name, if one applies."""
    if name in ALWAYS_DANGEROUS:
        return _make_always(ALWAYS_DANGEROUS[name])
    if DISK_PATTERN.match(name):
        return _make_always("formats a file system")
    if name in SHELLS:
        return _shell
    if name in CLOUD_TOOLS:
        return check_cloud
    if name == "bun":
        return _interp_or_packages
    if interpreter(name) is not None:
        return _interp
    return CHECKERS.get(name)


def _interp_or_packages(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    check_packages(j, name, args, stdin)
    return _interp(j, name, args, stdin)


def is_known(name: str) -> bool:
    """True when some checker or table knows this command (no embedded-command scan)."""
    return checker_for(name) is not None
