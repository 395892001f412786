"""Set resource limits, then exec the real command (POSIX only; standard library only).

Run by path as `python -I -S limits_exec.py [options] -- argv...`, never imported by the
package at run time: the runner starts it as the child process instead of setting limits
in a `preexec_fn`, which is unsafe in a threaded parent (the agent has reader, watcher
and HTTP threads). `-I -S` keep start-up at ~10 ms and keep `PYTHON*` variables and site
packages of the command's environment from affecting the wrapper. `exec` keeps the pid,
so the process group, the process tree and `--die-with-parent` all see the real command.

Options (0 or absent means "no limit"):
  --cpu SECONDS        RLIMIT_CPU (SIGXCPU at SECONDS, SIGKILL 5 s later)
  --as BYTES           RLIMIT_AS (address space)
  --nofile N           RLIMIT_NOFILE
  --nproc-extra N      Linux, non-root: RLIMIT_NPROC = tasks the user has now + N
  --lc-ctype VALUE / --no-lc-ctype
                       the LC_CTYPE the command must see: Python's C-locale coercion
                       (PEP 538) may have changed it in this process's environment.
Core dumps are always disabled (RLIMIT_CORE = 0).
"""

from __future__ import annotations

import contextlib
import os
import sys

HARD_CPU_GRACE = 5


def _set(name: str, value: int, hard_extra: int = 0) -> None:
    """Lower soft and hard limit to `value` (never raise above the current hard limit)."""
    import resource

    which = getattr(resource, name, None)
    if which is None:
        return
    _soft, hard = resource.getrlimit(which)
    new_hard = value + hard_extra
    if hard != resource.RLIM_INFINITY:
        new_hard = min(new_hard, hard)
    new_soft = min(value, new_hard)
    # Some platforms refuse some limits (macOS and RLIMIT_AS); the others still apply.
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (new_soft, new_hard))


def user_task_count(uid: int) -> int:
    """Linux: threads (tasks) whose process belongs to `uid`, as RLIMIT_NPROC counts them."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return count


def nproc_backstop(extra: int) -> int | None:
    """The RLIMIT_NPROC to set, or None where it would be useless or harmful."""
    if extra <= 0 or not sys.platform.startswith("linux"):
        return None
    uid = os.getuid()
    if uid == 0:
        # Root (and CAP_SYS_RESOURCE) ignores RLIMIT_NPROC altogether.
        return None
    # RLIMIT_NPROC counts every task of the real uid, not just ours: a fixed small value
    # would fail the first fork of a user with a busy desktop. Relative to now, it is a
    # ceiling against fork bombs; the runner's watchdog enforces the documented cap.
    return user_task_count(uid) + extra


def _parse(args: list[str]) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return opts, args[i + 1 :]
        if arg == "--no-lc-ctype":
            opts[arg] = ""
            i += 1
            continue
        if not arg.startswith("--") or i + 1 >= len(args):
            raise SystemExit(f"limits_exec: bad argument {arg!r}")
        opts[arg] = args[i + 1]
        i += 2
    raise SystemExit("limits_exec: missing '--' before the command")


def main(argv: list[str]) -> int:
    """Apply the limits, fix LC_CTYPE, exec the command; 127 if it cannot be executed."""
    opts, command = _parse(argv)
    if not command:
        raise SystemExit("limits_exec: no command given")
    _set("RLIMIT_CORE", 0)
    cpu = int(opts.get("--cpu", "0"))
    if cpu > 0:
        _set("RLIMIT_CPU", cpu, HARD_CPU_GRACE)
    address_space = int(opts.get("--as", "0"))
    if address_space > 0:
        _set("RLIMIT_AS", address_space)
    nofile = int(opts.get("--nofile", "0"))
    if nofile > 0:
        _set("RLIMIT_NOFILE", nofile)
    nproc = nproc_backstop(int(opts.get("--nproc-extra", "0")))
    if nproc is not None:
        _set("RLIMIT_NPROC", nproc)
    if "--no-lc-ctype" in opts:
        os.environ.pop("LC_CTYPE", None)
    elif "--lc-ctype" in opts:
        os.environ["LC_CTYPE"] = opts["--lc-ctype"]
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"bareagent sandbox: cannot run {command[0]}: {exc.strerror}\n")
        return 127
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
