"""bubblewrap (Linux): find it, probe once whether it works here, build its argv.

Mount layout, in this order (later mounts win):

1. `--ro-bind / /`, `--dev /dev`, `--proc /proc`, `--tmpfs /tmp`: everything read-only,
   fresh devices and procfs for the new pid namespace, a private empty `/tmp`;
2. `$HOME` bound back read-only when it lives under `/tmp` (so it still resolves);
3. hidden paths that contain the workspace (emptied with a tmpfs);
4. the workspace, read-write at its own path (after the `/tmp` tmpfs, so a workspace
   under `/tmp` works);
5. the other hidden paths (state root, BareAgent config): an empty tmpfs over a
   directory, `/dev/null` over a file;
6. the hidden directories remounted read-only (the workspace mount inside one stays
   writable: the remount is not recursive).

Plus `--unshare-net` (unless network is allowed), `--unshare-pid`, `--die-with-parent`,
`--new-session` (no TIOCSTI into the user's terminal) and `--chdir`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

PROBE_TIMEOUT = 10.0


def find_bwrap() -> str | None:
    """The bwrap executable to use, or None."""
    if os.name != "posix":
        return None
    if os.access("/usr/bin/bwrap", os.X_OK):
        return "/usr/bin/bwrap"
    return shutil.which("bwrap")


def _isolation_flags(network: bool) -> list[str]:
    flags = [] if network else ["--unshare-net"]
    return [*flags, "--unshare-pid", "--die-with-parent", "--new-session"]


@functools.lru_cache(maxsize=8)
def _probe(bwrap: str, network: bool) -> str | None:
    argv = [
        bwrap,
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
        *_isolation_flags(network),
        "true",
    ]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{bwrap} could not be started ({exc})"
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = lines[-1] if lines else f"exit code {done.returncode}"
        return f"{bwrap} cannot create a sandbox here ({detail})"
    return None


def unavailable_reason(network: bool) -> str | None:
    """None if bwrap works on this machine (probed once per setting), else why not."""
    if os.name != "posix":
        return "bubblewrap does not exist on Windows"
    bwrap = find_bwrap()
    if bwrap is None:
        return "bwrap is not installed (no 'bwrap' on PATH; install the bubblewrap package)"
    return _probe(bwrap, network)


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _outermost(paths: set[Path]) -> list[Path]:
    """Drop paths inside another one: hiding the outer path hides them already."""
    return sorted(p for p in paths if not any(o != p and _inside(p, o) for o in paths))


def _hide(path: Path) -> list[str]:
    if path.is_dir():
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def bwrap_argv(
    bwrap: str,
    inner: list[str],
    *,
    workspace: str | os.PathLike[str],
    cwd: str | os.PathLike[str],
    hidden: Iterable[str | os.PathLike[str]] = (),
    network: bool = False,
    home: str | None = None,
) -> list[str]:
    """The full argv running `inner` inside the sandbox described in the module docstring."""
    ws = Path(workspace).resolve()
    tmp = Path("/tmp")
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if home:
        home_path = Path(home).resolve()
        if home_path != tmp and _inside(home_path, tmp) and home_path.is_dir():
            argv += ["--ro-bind", str(home_path), str(home_path)]
    # Only existing paths: a mount point cannot be created on the read-only root, and a
    # path that does not exist holds nothing to hide.
    to_hide = _outermost({Path(p).resolve() for p in hidden if Path(p).exists()})
    before = [p for p in to_hide if _inside(ws, p)]
    after = [p for p in to_hide if not _inside(ws, p)]
    for path in before:
        argv += _hide(path)
    argv += ["--bind", str(ws), str(ws)]
    for path in after:
        argv += _hide(path)
    for path in [*before, *after]:
        if path.is_dir():
            # Not recursive: a workspace bound inside stays writable.
            argv += ["--remount-ro", str(path)]
    argv += _isolation_flags(network)
    argv += ["--chdir", os.fspath(cwd), "--", *inner]
    return argv
