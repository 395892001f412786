"""Command wrappers (sudo, env, nice, timeout, xargs, ...): find the command they run."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bareagent.permission.bash_parse import Word
from bareagent.permission.bash_util import long_matches, skip_options

_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass
class Unwrapped:
    """What a wrapper runs: the inner command's words (None: no command), plus findings."""

    inner: list[Word] | None
    reasons: list[str] = field(default_factory=list)
    bodies: list[Word] = field(default_factory=list)
    assignments: list[tuple[str, Word]] = field(default_factory=list)
    # A wrapper that changes nothing about what the inner command can do keeps it auto-safe.
    transparent: bool = True
    # The wrapper without an inner command is itself read-only (`command -v x`).
    safe_alone: bool = False
    # The inner command receives extra arguments only known at run time (xargs).
    implicit_dynamic: bool = False
    replace: str | None = None


def _rest(args: list[Word], index: int) -> list[Word] | None:
    return args[index:] if index < len(args) else None


def _privileged(tool: str) -> str:
    return f"runs a command with elevated privileges ({tool})"


def _sudo(args: list[Word]) -> Unwrapped:
    i = skip_options(
        args,
        "CDghprRtTUu",
        (
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--close-from",
            "--chdir",
            "--chroot",
            "--command-timeout",
            "--other-user",
        ),
    )
    opts = {a.value for a in args[:i] if a.value}
    shell = any(o in ("-s", "-i", "--shell", "--login") for o in opts) or any(
        o and not o.startswith("--") and ("s" in o or "i" in o) for o in opts
    )
    edit = any(o in ("-e", "--edit") for o in opts)
    out = Unwrapped(inner=None, reasons=[_privileged("sudo")], transparent=False)
    if edit:
        out.reasons.append("edits files as root (sudo -e)")
        return out
    while i < len(args) and args[i].value and _ASSIGNMENT_RE.match(args[i].value or ""):
        name, _, val = (args[i].value or "").partition("=")
        out.assignments.append((name, Word(value=val, raw=args[i].raw)))
        i += 1
    out.inner = _rest(args, i)
    if out.inner is None and shell:
        out.reasons.append("opens a root shell")
    return out


def _doas(args: list[Word]) -> Unwrapped:
    i = skip_options(args, "uC")
    return Unwrapped(inner=_rest(args, i), reasons=[_privileged("doas")], transparent=False)


def _pkexec(args: list[Word]) -> Unwrapped:
    i = skip_options(args, "", ("--user",))
    return Unwrapped(inner=_rest(args, i), reasons=[_privileged("pkexec")], transparent=False)


def _su(args: list[Word]) -> Unwrapped:
    out = Unwrapped(inner=None, reasons=[_privileged("su")], transparent=False)
    for idx, a in enumerate(args):
        v = a.value or ""
        if v in ("-c", "--command") and idx + 1 < len(args):
            out.bodies.append(args[idx + 1])
        elif v.startswith("--command="):
            out.bodies.append(Word(value=v.split("=", 1)[1], raw=a.raw))
    return out


def _runuser(args: list[Word]) -> Unwrapped:
    out = _su(args)
    out.reasons = [_privileged("runuser")]
    if any(a.value == "--" for a in args):
        idx = next(i for i, a in enumerate(args) if a.value == "--")
        out.inner = _rest(args, idx + 1)
    return out


def _chroot(args: list[Word]) -> Unwrapped:
    i = skip_options(args, "", ("--userspec", "--groups"))
    inner = _rest(args, i + 1)
    return Unwrapped(inner=inner, reasons=[_privileged("chroot")], transparent=False)


def _env(args: list[Word]) -> Unwrapped:
    out = Unwrapped(inner=None, transparent=False)
    i = 0
    while i < len(args):
        a = args[i]
        v = a.value
        if v is None:
            break
        if v in ("-S", "--split-string") or v.startswith(("--split-string=", "-S")):
            body = v[2:] if v.startswith("-S") and len(v) > 2 else None
            if v.startswith("--split-string="):
                body = v.split("=", 1)[1]
            if body is None and i + 1 < len(args):
                i += 1
                body = args[i].value
            tail = " ".join(w.raw for w in args[i + 1 :])
            out.bodies.append(Word(value=None if body is None else f"{body} {tail}", raw=v))
            out.reasons.append("runs a command through env -S")
            return out
        if v == "--":
            i += 1
            break
        if v.startswith("-") and v != "-":
            i += 1
            if v in ("-u", "-C") or any(
                long_matches(v, n) for n in ("--unset", "--chdir") if "=" not in v
            ):
                i += 1
            continue
        if _ASSIGNMENT_RE.match(v):
            name, _, val = v.partition("=")
            out.assignments.append((name, Word(value=val, raw=a.raw)))
            i += 1
            continue
        break
    out.inner = _rest(args, i)
    if out.inner is not None:
        out.reasons.append("runs a command through an env prefix")
    return out


def _simple(
    short_values: str = "",
    long_values: tuple[str, ...] = (),
    *,
    numeric: bool = False,
    transparent: bool = True,
) -> Callable[[list[Word]], Unwrapped]:
    def unwrap(args: list[Word]) -> Unwrapped:
        i = skip_options(args, short_values, long_values, numeric_flags=numeric)
        return Unwrapped(inner=_rest(args, i), transparent=transparent)

    return unwrap


def _timeout(args: list[Word]) -> Unwrapped:
    i = skip_options(args, "sk", ("--signal", "--kill-after"))
    return Unwrapped(inner=_rest(args, i + 1))


def _command(args: list[Word]) -> Unwrapped:
    i = skip_options(args)
    opts = "".join((a.value or "")[1:] for a in args[:i] if (a.value or "").startswith("-"))
    if "v" in opts or "V" in opts:
        return Unwrapped(inner=None, safe_alone=True)
    return Unwrapped(inner=_rest(args, i))


def _exec(args: list[Word]) -> Unwrapped:
    i = skip_options(args, "a")
    return Unwrapped(inner=_rest(args, i), transparent=False)


def _time(args: list[Word]) -> Unwrapped:
    i = skip_options(args, "of", ("--output", "--format"))
    opts = [a.value or "" for a in args[:i]]
    writes = any(
        o == "-o" or o.startswith("--output") or (o.startswith("-o") and o != "-o") for o in opts
    )
    return Unwrapped(inner=_rest(args, i), transparent=not writes)


_XARGS_SHORT_VALUES = "adEIiLlnPs"
_XARGS_OPTIONAL = "eIil"  # letters whose value must be attached when given


def _xargs(args: list[Word]) -> Unwrapped:
    i = 0
    replace: str | None = None
    while i < len(args):
        v = args[i].value
        if v is None or not v.startswith("-") or v == "-":
            break
        i += 1
        if v == "--":
            break
        if v.startswith("--"):
            head, _, val = v.partition("=")
            if long_matches(head, "--replace"):
                replace = val or "{}"
            elif "=" not in v and any(
                long_matches(head, n)
                for n in (
                    "--arg-file",
                    "--delimiter",
                    "--max-lines",
                    "--max-args",
                    "--max-procs",
                    "--max-chars",
                    "--process-slot-var",
                )
            ):
                i += 1
            continue
        cluster = v[1:]
        for pos, ch in enumerate(cluster):
            if ch in _XARGS_SHORT_VALUES:
                attached = cluster[pos + 1 :]
                if ch in ("I", "i"):
                    if attached:
                        replace = attached
                    elif ch == "I" and i < len(args):
                        replace = args[i].value or "{}"
                        i += 1
                    else:
                        replace = "{}"
                elif not attached and ch not in _XARGS_OPTIONAL:
                    i += 1
                break
    inner = _rest(args, i)
    if inner is None:
        return Unwrapped(inner=None, safe_alone=True)
    return Unwrapped(inner=inner, implicit_dynamic=True, replace=replace)


def _taskset(args: list[Word]) -> Unwrapped:
    i = skip_options(args)
    if any((a.value or "").startswith("-") and "p" in (a.value or "") for a in args[:i]):
        return Unwrapped(inner=None, transparent=False)
    return Unwrapped(inner=_rest(args, i + 1))


def _flock(args: list[Word]) -> Unwrapped:
    out = Unwrapped(inner=None)
    for idx, a in enumerate(args):
        if a.value in ("-c", "--command") and idx + 1 < len(args):
            out.bodies.append(args[idx + 1])
            out.transparent = False
            return out
    i = skip_options(args, "wE", ("--timeout", "--conflict-exit-code"))
    out.inner = _rest(args, i + 1)
    return out


def _watch(args: list[Word]) -> Unwrapped:
    i = skip_options(args, "nq", ("--interval", "--equexit"))
    exec_mode = any(a.value in ("-x", "--exec") for a in args[:i])
    rest = args[i:]
    if exec_mode or not rest:
        return Unwrapped(inner=rest or None, transparent=False)
    body = " ".join(w.text for w in rest) if all(w.static for w in rest) else None
    return Unwrapped(
        inner=None,
        bodies=[Word(value=body, raw=" ".join(w.raw for w in rest))],
        transparent=False,
    )


def _eval(args: list[Word]) -> Unwrapped:
    body = " ".join(w.text for w in args) if all(w.static for w in args) else None
    return Unwrapped(
        inner=None,
        reasons=["eval runs text as shell code"],
        bodies=[Word(value=body, raw=" ".join(w.raw for w in args))] if args else [],
        transparent=False,
    )


def _script(args: list[Word]) -> Unwrapped:
    out = Unwrapped(inner=None, transparent=False)
    for idx, a in enumerate(args):
        if a.value in ("-c", "--command") and idx + 1 < len(args):
            out.bodies.append(args[idx + 1])
            out.reasons.append("runs a command through script -c")
    return out


def _ssh(args: list[Word]) -> Unwrapped:
    out = Unwrapped(inner=None, transparent=False)
    for idx, a in enumerate(args):
        v = (a.value or a.raw).lower()
        nxt = (args[idx + 1].text.lower() if idx + 1 < len(args) else "") if v == "-o" else ""
        option = v[2:] if v.startswith("-o") and len(v) > 2 else nxt
        if option.startswith(("proxycommand", "localcommand", "permitlocalcommand")):
            out.reasons.append("ssh option runs a local command")
    i = skip_options(args, "BbcDEeFIiJLlmOopQRSWw")
    remote = args[i + 1 :]
    if remote:
        static = all(w.static for w in remote)
        out.bodies.append(
            Word(
                value=" ".join(w.text for w in remote) if static else None,
                raw=" ".join(w.raw for w in remote),
            )
        )
    return out


def _busybox(args: list[Word]) -> Unwrapped:
    return Unwrapped(inner=args or None, safe_alone=False)


WRAPPERS: dict[str, Callable[[list[Word]], Unwrapped]] = {
    "sudo": _sudo,
    "doas": _doas,
    "pkexec": _pkexec,
    "su": _su,
    "runuser": _runuser,
    "run0": _pkexec,
    "chroot": _chroot,
    "env": _env,
    "nice": _simple("n", ("--adjustment",), numeric=True),
    "ionice": _simple("cnpt", ("--class", "--classdata", "--pid", "--pgid", "--uid")),
    "nohup": _simple(transparent=False),
    "timeout": _timeout,
    "gtimeout": _timeout,
    "command": _command,
    "builtin": _simple(),
    "exec": _exec,
    "time": _time,
    "stdbuf": _simple("ioe", ("--input", "--output", "--error")),
    "xargs": _xargs,
    "gxargs": _xargs,
    "setsid": _simple(),
    "taskset": _taskset,
    "chrt": _taskset,
    "flock": _flock,
    "unbuffer": _simple(),
    "caffeinate": _simple("tw"),
    "watch": _watch,
    "eval": _eval,
    "script": _script,
    "ssh": _ssh,
    "busybox": _busybox,
    "toybox": _busybox,
    "coproc": _simple(transparent=False),
    "strace": _simple("abeEIOoPpSsUuX", transparent=False),
    "ltrace": _simple("aAbDeEFlnopSsTu", transparent=False),
    "unshare": _simple(
        "GSRw", ("--setgroups", "--root", "--wd", "--map-user", "--map-group"), transparent=False
    ),
    "nsenter": _simple("tSGrw", ("--target",), transparent=False),
    "firejail": _simple(transparent=False),
    "proxychains": _simple("f", transparent=False),
    "proxychains4": _simple("f", transparent=False),
    "torsocks": _simple("uapP", transparent=False),
    "valgrind": _simple(transparent=False),
    "faketime": _taskset,
}
