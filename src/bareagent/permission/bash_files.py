"""Danger checks for commands that delete, overwrite, move or re-permission files."""

from __future__ import annotations

import re

from bareagent.permission.bash_parse import Word, dynamic_word
from bareagent.permission.bash_util import (
    Checker,
    Judge,
    Stdin,
    has_long,
    is_home,
    is_temp,
    operands,
    short_flags,
    write_target_danger,
)


def _rm(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    flags = short_flags(args)
    recursive = bool(flags & {"r", "R"}) or has_long(args, "--recursive")
    force = "f" in flags or has_long(args, "--force")
    if has_long(args, "--no-preserve-root", 4):
        j.danger("rm --no-preserve-root")
    if recursive and force:
        j.danger("rm -rf deletes recursively without asking")
    elif recursive:
        j.danger("rm -r deletes directories recursively")
    for w in operands(args):
        value = w.value
        if value is None:
            j.danger("rm of a target only known at run time")
            continue
        if value.startswith("/") or is_home(value):
            j.danger(f"rm of an absolute or home path ({value})")
        elif w.glob and value in ("*", ".*", "./*", "*.*", "* .*"):
            j.danger(f"rm {value} deletes everything in the directory")
        elif value in (".", "..", "./", "../") or value.startswith("../"):
            j.danger(f"rm outside or of the current directory ({value})")
    return None


def _chmod(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    recursive = "R" in short_flags(args) or has_long(args, "--recursive")
    ops = operands(args, "", ("--reference",))
    if not has_long(args, "--reference") and ops:
        mode, targets = ops[0], ops[1:]
        _chmod_mode(j, mode)
    else:
        targets = ops
    _ownership_targets(j, name, targets, recursive)
    return None


def _chmod_mode(j: Judge, mode: Word) -> None:
    value = mode.value
    if value is None:
        j.danger("chmod mode only known at run time")
        return
    if re.fullmatch(r"[0-7]{1,4}", value):
        digits = value.zfill(4)
        if int(digits[-1]) & 2:
            j.danger(f"chmod {value} makes files world-writable")
        if int(digits[0]) & 6:
            j.danger(f"chmod {value} sets setuid/setgid")
        return
    for clause in value.split(","):
        m = re.fullmatch(r"([ugoa]*)([-+=])([rwxXstugo]*)", clause)
        if not m:
            continue
        who, op, perms = m.groups()
        if op in "+=" and "w" in perms and (who == "" or "o" in who or "a" in who):
            j.danger(f"chmod {value} makes files world-writable")
        if op in "+=" and "s" in perms:
            j.danger(f"chmod {value} sets setuid/setgid")


def _ownership_targets(j: Judge, name: str, targets: list[Word], recursive: bool) -> None:
    for w in targets:
        v = w.value
        if v is None:
            if recursive:
                j.danger(f"{name} -R on a path only known at run time")
            continue
        if v.startswith("/") or is_home(v):
            j.danger(f"{name} outside the workspace ({v})")
        elif recursive and (v in ("*", "..", "../") or v.startswith("../")):
            j.danger(f"{name} -R on {v}")


def _chown(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    recursive = "R" in short_flags(args) or has_long(args, "--recursive")
    if recursive:
        j.danger(f"{name} -R changes ownership recursively")
    ops = operands(args, "", ("--reference", "--from"))
    targets = ops if has_long(args, "--reference") else ops[1:]
    _ownership_targets(j, name, targets, recursive)
    return None


def _tee(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    for w in operands(args):
        _write_target(j, w)
    return False if operands(args) else None


def _write_target(j: Judge, w: Word) -> None:
    if w.value is None:
        return
    why = write_target_danger(w.value)
    if why:
        j.danger(why)


def _target_dir(args: list[Word]) -> Word | None:
    for idx, a in enumerate(args):
        v = a.value or ""
        if v in ("-t", "--target-directory") and idx + 1 < len(args):
            return args[idx + 1]
        if v.startswith("--target-directory="):
            return Word(value=v.split("=", 1)[1], raw=a.raw)
    return None


def _copy_like(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    ops = operands(args, "tSm" if name != "ln" else "tS", ("--target-directory", "--suffix"))
    dest = _target_dir(args) or (ops[-1] if len(ops) >= 2 else None)
    if dest is not None:
        _write_target(j, dest)
        if name in ("cp", "install") and any(
            w.value in ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random") for w in ops[:-1]
        ):
            j.danger(f"{name} from a device overwrites {dest.text}")
    if name == "mv":
        for w in ops:
            v = w.value or ""
            if v.startswith("/dev/"):
                j.danger(f"mv involving a device ({v})")
            elif v.startswith("/") or is_home(v):
                why = write_target_danger(v)
                if why:
                    j.danger(f"mv moves system or home files ({v})")
    if name == "rsync":
        for idx, a in enumerate(args):
            v = a.value or ""
            shell: Word | None = None
            if v in ("-e", "--rsh") and idx + 1 < len(args):
                shell = args[idx + 1]
            elif v.startswith("--rsh="):
                shell = Word(value=v.split("=", 1)[1], raw=a.raw)
            if shell is not None:
                if shell.static:
                    j.analyse(shell.value or "")
                else:
                    j.danger("rsync remote shell only known at run time")
    if name == "rsync" and (
        has_long(args, "--delete", 5)
        or has_long(args, "--remove-source-files", 5)
        or any((a.value or "").startswith("--del") for a in args)
    ):
        j.danger("rsync --delete removes files at the destination")
    return None


def _touch(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    for w in operands(args, "dtr", ("--date", "--reference", "--mode", "--context")):
        _write_target(j, w)
    return None


def _find(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    safe = True
    roots = []
    for w in args:
        if (w.value or "").startswith(("-", "(", "!")):
            break
        roots.append(w)
    outside = any(
        w.value is None or w.value.startswith("/") or is_home(w.value) for w in roots
    ) and not all(w.value and is_temp(w.value) for w in roots)
    i = 0
    while i < len(args):
        w = args[i]
        v = w.value
        i += 1
        if v is None:
            safe = False
            continue
        if v == "-delete":
            j.danger("find -delete removes every match")
        elif v in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[Word] = []
            closed = False
            while i < len(args):
                a = args[i]
                i += 1
                if a.value == ";" or (a.value == "+" and inner and "{}" in (inner[-1].raw)):
                    closed = True
                    break
                inner.append(dynamic_word(a.raw) if "{}" in a.raw else a)
            if not closed or not inner:
                j.danger(f"find {v} without a terminated command")
                return False
            if not j.judge_words(inner, Stdin(), False):
                safe = False
                if outside:
                    j.danger(f"find {v} runs a command on files outside the workspace")
        elif v in ("-fprint", "-fprint0", "-fprintf", "-fls"):
            safe = False
            if i < len(args) and args[i].value:
                _write_target(j, args[i])
    return safe


_ARCHIVE_EXEC = (
    "--to-command",
    "--checkpoint-action",
    "--use-compress-program",
    "--info-script",
    "--new-volume-script",
    "--rsh-command",
    "--unzip-command",
)


def _archive(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    for idx, a in enumerate(args):
        v = a.value
        if v is None:
            continue
        head = v.split("=", 1)[0]
        if (
            head in _ARCHIVE_EXEC
            or (name == "zip" and v == "-TT")
            or (name == "tar" and v in ("-I", "-F"))
        ):
            j.danger(f"{name} {head} runs an external command")
        if v in ("-C", "--directory", "-d") and idx + 1 < len(args) and args[idx + 1].value:
            _write_target(j, args[idx + 1])
        elif v.startswith("--directory="):
            _write_target(j, Word(value=v.split("=", 1)[1], raw=a.raw))
    if name == "tar" and any(
        w.value and (w.value == "-P" or w.value.startswith("--absolute-names")) for w in args
    ):
        j.danger("tar --absolute-names may overwrite files anywhere")
    return None


def _pytest(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    # pytest empties --basetemp before the run.
    for idx, a in enumerate(args):
        v = a.value or ""
        target: str | None = None
        if v == "--basetemp" and idx + 1 < len(args):
            target = args[idx + 1].value
        elif v.startswith("--basetemp="):
            target = v.split("=", 1)[1]
        if target is not None and write_target_danger(target):
            j.danger(f"pytest --basetemp={target} deletes that directory's contents")
    return None


FILE_CHECKERS: dict[str, Checker] = {
    "pytest": _pytest,
    "py.test": _pytest,
    "rm": _rm,
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "tee": _tee,
    "cp": _copy_like,
    "mv": _copy_like,
    "ln": _copy_like,
    "install": _copy_like,
    "rsync": _copy_like,
    "touch": _touch,
    "mkdir": _touch,
    "find": _find,
    "gfind": _find,
    "tar": _archive,
    "gtar": _archive,
    "bsdtar": _archive,
    "zip": _archive,
    "unzip": _archive,
}
