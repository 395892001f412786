"""Danger checks for system-wide commands: disks, processes, services, network, packages."""

from __future__ import annotations

import re

from bareagent.permission.bash_parse import Word
from bareagent.permission.bash_util import (
    Checker,
    Judge,
    Stdin,
    has_long,
    operands,
    short_flags,
    subcommand,
    write_target_danger,
)

ALWAYS_DANGEROUS: dict[str, str] = {
    **{
        n: "formats a file system"
        for n in ("mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "newfs")
    },
    **{
        n: "rewrites a partition table"
        for n in ("fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "parted", "partprobe")
    },
    **{
        n: "irrecoverably destroys data"
        for n in (
            "dd",
            "shred",
            "wipe",
            "srm",
            "wipefs",
            "blkdiscard",
            "sg_format",
            "truncate",
            "cryptsetup",
            "lvremove",
            "vgremove",
            "pvremove",
            "mdadm",
            "hdparm",
            "badblocks",
            "dropdb",
            "dropuser",
        )
    },
    **{
        n: "kills processes by name or en masse"
        for n in ("killall", "pkill", "killall5", "skill", "slay")
    },
    **{
        n: "shuts down or reboots the machine"
        for n in ("shutdown", "reboot", "halt", "poweroff", "telinit")
    },
    **{
        n: "changes user accounts or sudo rights"
        for n in (
            "userdel",
            "usermod",
            "useradd",
            "groupdel",
            "groupmod",
            "deluser",
            "delgroup",
            "adduser",
            "passwd",
            "chpasswd",
            "visudo",
            "chsh",
            "chfn",
        )
    },
    **{
        n: "loads or unloads kernel modules"
        for n in ("insmod", "rmmod", "modprobe", "kextload", "kextunload")
    },
    **{n: "schedules commands to run later" for n in ("at", "batch")},
    "parallel": "runs generated commands through a shell (GNU parallel)",
    "sudoedit": "edits files as root",
}


DISK_PATTERN = re.compile(r"^(?:mkfs|newfs)(?:\..+)?$")


CLOUD_TOOLS = frozenset(
    {
        "kubectl",
        "helm",
        "terraform",
        "tofu",
        "pulumi",
        "aws",
        "gcloud",
        "az",
        "doctl",
        "heroku",
        "fly",
        "flyctl",
        "gsutil",
        "oc",
        "eksctl",
        "vercel",
        "netlify",
        "firebase",
        "wrangler",
        "gh",
        "glab",
        "s3cmd",
        "rclone",
    }
)


_CLOUD_DESTRUCTIVE = re.compile(
    r"^(?:delete|destroy|terminate|rm|rb|remove|uninstall|purge|drain|deprovision|deletefile"
    r"|purge|prune)(?:[-_].*)?$|-auto-approve$|^--force$"
)


_URL_SPEC = re.compile(r"://|^(?:git|hg|svn|bzr)\+|^github:|^gitlab:|^bitbucket:")


DATABASE_CLIENTS = (
    "psql",
    "mysql",
    "mariadb",
    "sqlite3",
    "duckdb",
    "sqlcmd",
    "clickhouse-client",
    "cockroach",
    "mongo",
    "mongosh",
    "redis-cli",
    "cqlsh",
    "pgcli",
    "mycli",
    "litecli",
)
_PUBLISH = {
    ("npm", "publish"),
    ("npm", "unpublish"),
    ("npm", "deprecate"),
    ("pnpm", "publish"),
    ("yarn", "publish"),
    ("yarn", "npm"),
    ("bun", "publish"),
    ("twine", "upload"),
    ("cargo", "publish"),
    ("cargo", "yank"),
    ("gem", "push"),
    ("gem", "yank"),
    ("poetry", "publish"),
    ("uv", "publish"),
    ("flit", "publish"),
    ("hatch", "publish"),
    ("docker", "push"),
    ("podman", "push"),
}


def _kill(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    targets: list[Word] = []
    i = 0
    if args and (args[0].value or "").startswith("-") and len(args) > 1:
        first = args[0].value or ""
        if first in ("-l", "-L", "--list", "--table"):
            return None
        i = 2 if first in ("-s", "-n", "--signal") else 1
    for w in args[i:]:
        if w.value == "--":
            continue
        targets.append(w)
    for w in targets:
        v = w.value
        if v in ("-1", "0", "1") or (v and v.startswith("-") and v[1:].isdigit()):
            j.danger(f"kill {v} signals every process, a process group or init")
    return None


def _systemctl(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    bad = {
        "poweroff",
        "reboot",
        "halt",
        "kexec",
        "suspend",
        "hibernate",
        "hybrid-sleep",
        "suspend-then-hibernate",
        "rescue",
        "emergency",
        "isolate",
        "default",
        "stop",
        "kill",
        "disable",
        "mask",
        "soft-reboot",
    }
    if subcommand(args) in bad:
        j.danger(f"systemctl {subcommand(args)} stops services or the machine")
    return None


def _service(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if any(w.value in ("stop", "--full-restart") for w in args):
        j.danger("service stop")
    return None


def _launchctl(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if subcommand(args) in ("unload", "remove", "bootout", "disable", "kill", "reboot"):
        j.danger(f"launchctl {subcommand(args)} stops services or the machine")
    return None


def _init(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if args:
        j.danger("init changes the run level")
    return None


def _crontab(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    flags = short_flags(args)
    if not (flags <= {"l", "u"} and "l" in flags):
        j.danger("crontab replaces or removes scheduled jobs")
    return None


def _zfs(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if subcommand(args) in ("destroy", "rollback", "labelclear"):
        j.danger(f"{name} {subcommand(args)} destroys data")
    return None


def _diskutil(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    sub = (subcommand(args) or "").lower()
    if sub.startswith(("erase", "zero", "random", "secureerase", "partition", "reformat")):
        j.danger(f"diskutil {sub} destroys data")
    return None


def _nvme(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if subcommand(args) in ("format", "sanitize", "delete-ns"):
        j.danger("nvme format/sanitize destroys data")
    return None


def _download(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    j.note("download")
    for idx, a in enumerate(args):
        v = a.value or ""
        target: str | None = None
        if v in ("-o", "--output", "-O", "--output-document") and idx + 1 < len(args):
            target = args[idx + 1].value
        elif v.startswith(("--output=", "--output-document=")):
            target = v.split("=", 1)[1]
        if target:
            why = write_target_danger(target)
            if why:
                j.danger(f"{name} {why}")
    return None


def _decoder(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    flags = short_flags(args)
    words = [w.value for w in args]
    decodes = {
        "base64": bool(flags & {"d", "D"}) or has_long(args, "--decode"),
        "gbase64": bool(flags & {"d", "D"}) or has_long(args, "--decode"),
        "basenc": bool(flags & {"d", "D"}) or has_long(args, "--decode"),
        "xxd": "r" in flags,
        "uudecode": True,
        "openssl": "d" in flags or "-a" in words,
        "gpg": "d" in flags or has_long(args, "--decrypt"),
    }
    if decodes.get(name, False):
        j.note("decode")
    return None


def check_packages(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    words = [w.value or "" for w in args]
    subs = [w for w in words if w and not w.startswith("-")]
    first = subs[0] if subs else None
    if (name, first) in _PUBLISH:
        j.danger(f"{name} {first} publishes or withdraws a package")
    installing = any(s in ("install", "add", "i", "get") for s in subs[:2])
    if installing and any(_URL_SPEC.search(w) for w in words):
        j.danger(f"{name} installs a package from a URL or repository")
    return None


def _docker(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    check_packages(j, name, args, stdin)
    words = [w.text for w in args]
    sub = subcommand(args)
    for idx, w in enumerate(words):
        cap = w + " " + (words[idx + 1] if idx + 1 < len(words) else "")
        if w == "--privileged" or (
            w.startswith("--cap-add") and ("ALL" in cap or "SYS_ADMIN" in cap)
        ):
            j.danger(f"{name} runs a privileged container")
        vol = None
        if w in ("-v", "--volume") and idx + 1 < len(words):
            vol = words[idx + 1]
        elif w.startswith("--volume="):
            vol = w.split("=", 1)[1]
        if vol is not None and re.match(r"^(?:/|~|\$HOME)(?::|$)|^/(?:etc|root|var/run)", vol):
            j.danger(f"{name} mounts the host file system ({vol})")
        if w.startswith("--mount") and re.search(
            r"(?:source|src)=/(?:,|$)", w + " ".join(words[idx + 1 : idx + 2])
        ):
            j.danger(f"{name} mounts the host root file system")
    if sub in ("rm", "rmi", "container", "image") and (
        "f" in short_flags(args) or has_long(args, "--force")
    ):
        j.danger(f"{name} {sub} --force removes containers or images")
    if sub in ("system", "volume", "image", "container", "builder", "network") and any(
        w in ("prune", "rm") for w in words
    ):
        j.danger(f"{name} {sub} prune/rm deletes data")
    return None


def check_cloud(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    for w in args:
        if w.value and _CLOUD_DESTRUCTIVE.search(w.value):
            j.danger(f"{name} {w.value} deletes or destroys remote resources")
            break
    return None


def _firewall(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    words = [w.value or "" for w in args]
    flags = short_flags(args)
    if name.startswith(("iptables", "ip6tables")) and (
        flags & {"F", "X", "P", "D"}
        or any(w in ("--flush", "--delete-chain", "--policy") for w in words)
    ):
        j.danger(f"{name} flushes or changes firewall rules")
    elif name == "nft" and any(w in ("flush", "delete") for w in words):
        j.danger("nft flushes or deletes firewall rules")
    elif name == "ufw" and any(w in ("disable", "reset", "delete") for w in words):
        j.danger("ufw disables or resets the firewall")
    elif name == "pfctl" and flags & {"d", "F"}:
        j.danger("pfctl disables or flushes the firewall")
    return None


def _sysctl(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if "w" in short_flags(args) or any("=" in (w.value or "") for w in operands(args)):
        j.danger("sysctl changes kernel parameters")
    return None


def _netcat(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    flags = short_flags(args)
    if flags & {"e", "c"} or any(
        (w.value or "").startswith(("--exec", "--sh-exec", "--lua-exec")) for w in args
    ):
        j.danger(f"{name} serves a shell over the network")
    return None


def _socat(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if any(re.search(r"(?i)\b(?:exec|system):", w.text) for w in args):
        j.danger("socat runs a program on a network connection")
    return None


def _database(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if any(not w.static for w in args):
        j.danger(f"{name} statement or target only known at run time")
    if stdin.opaque:
        j.danger(f"pipes text into {name} as statements")
    return None


def _mount(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    if operands(args, "tOoLU", ("--types", "--options")) or (name != "mount" and args):
        j.danger(f"{name} changes mounted file systems")
    return None


def _netconf(j: Judge, name: str, args: list[Word], stdin: Stdin) -> bool | None:
    words = [w.value or "" for w in args]
    if name == "ip" and any(w in ("del", "delete", "flush", "down", "set") for w in words):
        j.danger("ip changes network interfaces or routes")
    elif name in ("ifconfig", "ifdown") and (name == "ifdown" or "down" in words):
        j.danger(f"{name} takes a network interface down")
    elif name == "route" and any(w in ("del", "delete", "flush") for w in words):
        j.danger("route deletes network routes")
    return None


SYSTEM_CHECKERS: dict[str, Checker] = {
    "kill": _kill,
    "systemctl": _systemctl,
    "service": _service,
    "launchctl": _launchctl,
    "init": _init,
    "crontab": _crontab,
    "zfs": _zfs,
    "zpool": _zfs,
    "diskutil": _diskutil,
    "nvme": _nvme,
    "curl": _download,
    "wget": _download,
    "fetch": _download,
    "aria2c": _download,
    "http": _download,
    "https": _download,
    "xh": _download,
    "lwp-download": _download,
    "base64": _decoder,
    "gbase64": _decoder,
    "basenc": _decoder,
    "xxd": _decoder,
    "uudecode": _decoder,
    "openssl": _decoder,
    "gpg": _decoder,
    "pip": check_packages,
    "pip3": check_packages,
    "pipx": check_packages,
    "uv": check_packages,
    "poetry": check_packages,
    "pdm": check_packages,
    "npm": check_packages,
    "pnpm": check_packages,
    "yarn": check_packages,
    "bun": check_packages,
    "gem": check_packages,
    "cargo": check_packages,
    "twine": check_packages,
    "flit": check_packages,
    "hatch": check_packages,
    "docker": _docker,
    "podman": _docker,
    "iptables": _firewall,
    "ip6tables": _firewall,
    "iptables-legacy": _firewall,
    "nft": _firewall,
    "ufw": _firewall,
    "pfctl": _firewall,
    "sysctl": _sysctl,
    "nc": _netcat,
    "ncat": _netcat,
    "netcat": _netcat,
    "nc.traditional": _netcat,
    "nc.openbsd": _netcat,
    "socat": _socat,
    "mount": _mount,
    "umount": _mount,
    "swapoff": _mount,
    "ip": _netconf,
    "ifconfig": _netconf,
    "ifdown": _netconf,
    "route": _netconf,
    **{n: _database for n in DATABASE_CLIENTS},
}
