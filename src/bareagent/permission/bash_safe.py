"""The auto-safe set: read-only commands and test/lint runners that run without asking."""

from __future__ import annotations

import re
from collections.abc import Callable

from bareagent.permission.bash_git import git_is_read_only
from bareagent.permission.bash_parse import Word
from bareagent.permission.bash_util import has_long, has_option, operands, short_flags

# Read-only commands whose options can neither write nor execute; run-time arguments are fine.
SAFE_ANY = frozenset(
    {
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "echo",
        "printf",
        "pwd",
        "which",
        "whereis",
        "type",
        "stat",
        "du",
        "df",
        "grep",
        "egrep",
        "fgrep",
        "cut",
        "diff",
        "cmp",
        "comm",
        "tr",
        "nl",
        "fold",
        "rev",
        "paste",
        "join",
        "seq",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "true",
        "false",
        ":",
        "test",
        "[",
        "sleep",
        "cd",
        "pushd",
        "popd",
        "whoami",
        "id",
        "uname",
        "nproc",
        "uptime",
        "free",
        "ps",
        "md5sum",
        "sha1sum",
        "sha224sum",
        "sha256sum",
        "sha384sum",
        "sha512sum",
        "b2sum",
        "cksum",
        "od",
        "hexdump",
        "strings",
        "jq",
        "expand",
        "unexpand",
        "tac",
        "column",
        "arch",
        "tty",
        "locale",
        "cal",
        "lscpu",
        "groups",
        "getconf",
        "read",
        "wait",
        "dirs",
        "exit",
        "return",
        "shift",
        "diff3",
        "numfmt",
        "tsort",
        "shasum",
    }
)

_VERSION_TOOLS = re.compile(
    r"^(?:python[0-9.]*|pypy[0-9.]*|node|npm|npx|pnpm|yarn|bun|deno|git|cargo|rustc|rustup|go"
    r"|gofmt|pip[0-9.]*|uv|poetry|ruff|mypy|pytest|black|isort|flake8|pylint|gcc|g\+\+|clang"
    r"|clang\+\+|make|cmake|java|javac|ruby|perl|php|tsc|eslint|prettier|docker|kubectl"
    r"|terraform|helm|jq|rg|fd|gh|bash|zsh|sh|tox|nox|pre-commit|conda|mvn|gradle|dotnet"
    r"|swift|lua|gem|bundle|rake|sqlite3|psql|mysql|curl|wget)$"
)
_SAFE_PY_MODULES = frozenset(
    {
        "pytest",
        "mypy",
        "unittest",
        "pyflakes",
        "pylint",
        "flake8",
        "pycodestyle",
        "pydocstyle",
        "pyright",
        "json.tool",
        "tabnanny",
        "doctest",
        "compileall",
        "py_compile",
        "platform",
        "sysconfig",
        "site",
    }
)
_TEST_SCRIPTS = frozenset(
    {
        "test",
        "tests",
        "lint",
        "typecheck",
        "type-check",
        "check",
        "types",
        "test:unit",
        "lint:check",
        "format:check",
        "fmt:check",
    }
)
_MAKE_TARGETS = frozenset({"test", "tests", "check", "lint", "typecheck", "type-check"})

SafeCheck = Callable[[list[Word]], bool]


def _version_query(args: list[Word]) -> bool:
    return len(args) == 1 and args[0].value in ("--version", "-V", "version", "-v", "-VV")


def _date(args: list[Word]) -> bool:
    return not has_option(args, "s", ("--set",)) and all(
        (w.value or "").startswith(("+", "-")) for w in args
    )


def _hostname(args: list[Word]) -> bool:
    return all(
        (w.value or "") in ("-f", "-s", "-i", "-I", "-d", "-A", "--fqdn", "--short") for w in args
    )


def _no_opts(short: str, long: tuple[str, ...] = ()) -> SafeCheck:
    def check(args: list[Word]) -> bool:
        return not has_option(args, short, long)

    return check


def _uniq(args: list[Word]) -> bool:
    return len(operands(args, "fsw", ("--skip-fields", "--skip-chars", "--check-chars"))) <= 1


def _xxd(args: list[Word]) -> bool:
    return (
        "r" not in short_flags(args)
        and not has_long(args, "--revert")
        and len(operands(args, "cglos", ())) <= 1
    )


def _file(args: list[Word]) -> bool:
    return "C" not in short_flags(args) and not has_long(args, "--compile")


def _pytest(args: list[Word]) -> bool:
    return not any(
        (w.value or "").startswith(("--basetemp", "--pastebin", "--rootdir=/")) for w in args
    )


def _mypy(args: list[Word]) -> bool:
    return not has_long(args, "--install-types", 6)


def _ruff(args: list[Word]) -> bool:
    subs = [w.value for w in args if not (w.value or "-").startswith("-")]
    if _version_query(args):
        return True
    if not subs:
        return False
    if subs[0] == "check":
        return not any(has_long(args, o, 5) for o in ("--fix", "--unsafe-fixes", "--add-noqa"))
    if subs[0] == "format":
        return any(w.value in ("--check", "--diff") for w in args)
    return subs[0] in ("rule", "linter", "version", "config")


def _check_flag(*names: str) -> SafeCheck:
    def check(args: list[Word]) -> bool:
        return _version_query(args) or any(w.value in names for w in args)

    return check


def _any_args(args: list[Word]) -> bool:
    return True


def _eslint(args: list[Word]) -> bool:
    return not any((w.value or "").startswith("--fix") and w.value != "--fix-dry-run" for w in args)


def _npm(args: list[Word]) -> bool:
    subs = [w.value or "" for w in args if not (w.value or "-").startswith("-")]
    if _version_query(args):
        return True
    if not subs:
        return False
    if subs[0] in (
        "test",
        "t",
        "tst",
        "ls",
        "list",
        "ll",
        "la",
        "outdated",
        "view",
        "info",
        "help",
        "why",
        "explain",
    ):
        return True
    if subs[0] in ("run", "run-script") and len(subs) >= 2:
        return subs[1] in _TEST_SCRIPTS
    return subs[0] in _TEST_SCRIPTS and subs[0] != "check"


def _cargo(args: list[Word]) -> bool:
    subs = [w.value or "" for w in args if not (w.value or "-").startswith("-")]
    if _version_query(args):
        return True
    if not subs:
        return False
    if subs[0] == "clippy":
        return not any((w.value or "").startswith("--fix") for w in args)
    if subs[0] == "fmt":
        return any(w.value == "--check" for w in args)
    return subs[0] in (
        "test",
        "check",
        "build",
        "tree",
        "metadata",
        "doc",
        "bench",
        "nextest",
        "version",
    )


def _go(args: list[Word]) -> bool:
    subs = [w.value or "" for w in args if not (w.value or "-").startswith("-")]
    if not subs:
        return False
    if subs[0] == "env":
        return not any(w.value in ("-w", "-u") for w in args)
    return subs[0] in ("test", "vet", "build", "list", "version", "doc")


def _gofmt(args: list[Word]) -> bool:
    return "w" not in short_flags(args)


def _make(args: list[Word]) -> bool:
    targets: list[str] = []
    i = 0
    while i < len(args):
        v = args[i].value or ""
        i += 1
        if v in ("-C", "-j", "--directory", "--jobs") and i < len(args):
            i += 1
            continue
        if v.startswith("-"):
            if v.startswith(("-f", "--file", "--eval", "-E", "-e", "--environment-overrides")):
                return False
            continue
        if "=" in v:
            return False
        targets.append(v)
    return bool(targets) and all(t in _MAKE_TARGETS for t in targets)


def _tsc(args: list[Word]) -> bool:
    return _version_query(args) or any(w.value in ("--noEmit", "--noemit") for w in args)


def _node(args: list[Word]) -> bool:
    return _version_query(args) or (bool(args) and args[0].value == "--test")


def _deno(args: list[Word]) -> bool:
    subs = [w.value or "" for w in args if not (w.value or "-").startswith("-")]
    if _version_query(args):
        return True
    if not subs:
        return False
    if subs[0] == "fmt":
        return any(w.value == "--check" for w in args)
    return subs[0] in ("test", "lint", "check", "info")


def _pip(args: list[Word]) -> bool:
    subs = [w.value or "" for w in args if not (w.value or "-").startswith("-")]
    return _version_query(args) or (
        bool(subs) and subs[0] in ("list", "show", "freeze", "check", "help")
    )


def _python(args: list[Word]) -> bool:
    if _version_query(args):
        return True
    for idx, w in enumerate(args):
        v = w.value or ""
        if v == "-m" and idx + 1 < len(args):
            module = args[idx + 1].value or ""
            rest = args[idx + 2 :]
            if module in ("pip", "pip3"):
                return _pip(rest)
            if module == "ruff":
                return _ruff(rest)
            if module == "black":
                return _check_flag("--check", "--diff")(rest)
            if module == "isort":
                return _check_flag("--check", "--check-only", "-c", "--diff")(rest)
            if module == "pytest":
                return _pytest(rest)
            if module == "mypy":
                return _mypy(rest)
            return module in _SAFE_PY_MODULES
        if v.startswith("-m") and len(v) > 2:
            return v[2:] in _SAFE_PY_MODULES
        if v in ("-B", "-q", "-u", "-I", "-X", "-W", "-E", "-s", "-S", "-O", "-OO", "-b"):
            continue
        return False
    return False


def _sort(args: list[Word]) -> bool:
    return "o" not in short_flags(args) and not any(
        has_long(args, o, 5) for o in ("--output", "--compress-program")
    )


def _tree(args: list[Word]) -> bool:
    return "o" not in short_flags(args)


def _rg(args: list[Word]) -> bool:
    return not any((w.value or "").startswith("--pre") for w in args)


def _ag(args: list[Word]) -> bool:
    return not any((w.value or "").startswith("--pager") for w in args)


def _set(args: list[Word]) -> bool:
    return bool(args) and all(
        (w.value or "x")[0] in "-+"
        or w.value
        in ("pipefail", "errexit", "nounset", "xtrace", "noclobber", "errtrace", "functrace")
        for w in args
    )


SAFE_CHECKS: dict[str, SafeCheck] = {
    "date": _date,
    "hostname": _hostname,
    "uniq": _uniq,
    "xxd": _xxd,
    "file": _file,
    "sort": _sort,
    "tree": _tree,
    "rg": _rg,
    "ag": _ag,
    "fd": _no_opts("xX", ("--exec", "--exec-batch")),
    "fdfind": _no_opts("xX", ("--exec", "--exec-batch")),
    "set": _set,
    "git": git_is_read_only,
    "pytest": _pytest,
    "py.test": _pytest,
    "mypy": _mypy,
    "dmypy": _mypy,
    "ruff": _ruff,
    "flake8": _any_args,
    "pylint": _any_args,
    "pyflakes": _any_args,
    "pycodestyle": _any_args,
    "pydocstyle": _any_args,
    "pyright": _any_args,
    "basedpyright": _any_args,
    "vulture": _any_args,
    "shellcheck": _any_args,
    "hadolint": _any_args,
    "yamllint": _any_args,
    "jest": _any_args,
    "vitest": _any_args,
    "mocha": _any_args,
    "ctest": _any_args,
    "black": _check_flag("--check", "--diff"),
    "isort": _check_flag("--check", "--check-only", "-c", "--diff"),
    "prettier": _check_flag("--check", "-c", "--list-different", "-l"),
    "eslint": _eslint,
    "npm": _npm,
    "pnpm": _npm,
    "yarn": _npm,
    "cargo": _cargo,
    "go": _go,
    "gofmt": _gofmt,
    "make": _make,
    "gmake": _make,
    "tsc": _tsc,
    "node": _node,
    "deno": _deno,
    "pip": _pip,
    "pip3": _pip,
}


def is_auto_safe(name: str, args: list[Word]) -> bool:
    """True when this command (exact name, after unwrapping) only reads or runs tests/lints."""
    if name in SAFE_ANY:
        return True
    if any(not w.static for w in args):
        return False
    check = SAFE_CHECKS.get(name)
    if check is not None:
        return check(args)
    if re.match(r"^python[0-9.]*$", name):
        return _python(args)
    return bool(_VERSION_TOOLS.match(name)) and _version_query(args)


def is_safe_name(name: str) -> bool:
    """True when the safe tables know this command (it is not an unknown wrapper)."""
    return name in SAFE_ANY or name in SAFE_CHECKS or bool(re.match(r"^python[0-9.]*$", name))
