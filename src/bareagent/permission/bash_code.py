"""Code handed to other languages: shells, interpreters, awk and sed programs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bareagent.permission.bash_parse import Word
from bareagent.permission.bash_util import Judge, Stdin, write_target_danger

SHELLS = frozenset(
    {
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "mksh",
        "ash",
        "fish",
        "csh",
        "tcsh",
        "yash",
        "posh",
        "rbash",
        "pdksh",
        "oksh",
        "loksh",
    }
)

# APIs that delete, chmod, write, spawn processes, open sockets or hide what they do.
_RISKY_CODE = re.compile(
    r"shutil\s*\.\s*(?:rmtree|move|chown)|\bos\s*\.\s*(?:remove|unlink|rmdir|removedirs|system"
    r"|popen|exec\w*|spawn\w*|kill\w*|chmod|chown|lchown|rename|replace|truncate|fork|setuid)\b"
    r"|\bsubprocess\b|\bsocket\b|\bpty\b|__import__|\bimportlib\b|\bctypes\b|\bgetattr\s*\("
    r"|\bexec\s*\(|\beval\b|\bcompile\s*\(|\burllib\b|\burlopen\b|\brequests\b|http\.client"
    r"|\bftplib\b|\bsmtplib\b|\btelnetlib\b|\bparamiko\b|\bmarshal\b|\bpickle\b|\bbase64\b"
    r"|\bcodecs\b|\.unlink\s*\(|\.rmdir\s*\(|\.chmod\s*\(|\.write_(?:text|bytes)\s*\("
    r"|\bopen\s*\(\s*[^,()]+,\s*(?:mode\s*=\s*)?[rbt]?['\"][rbt]*[wax+]"
    r"|\bsystem\s*\(|\bsystem\b\s*['\"]|\bexec\w*\s*\(|\bspawn\w*\s*\(|\bpopen\b|child_process"
    r"|\brimraf\b|\bfs\s*\.\s*(?:rm|unlink|rmdir|chmod|chown|writeFile|appendFile|truncate"
    r"|createWriteStream)\w*|\.(?:rm|unlink|rmdir|chmod|chown|writeFile|appendFile)(?:Sync)?\s*\(|\brequire\s*\(\s*['\"](?:child_process|net|http|https|dgram|tls"
    r"|cluster)['\"]|\bnet\s*\.|\bFunction\s*\(|process\s*\.\s*binding|\bDeno\s*\.\s*(?:run"
    r"|remove|writeTextFile|writeFile|Command|connect)|\bFileUtils\b|\bFile\s*\.\s*(?:delete"
    r"|unlink|chmod|write)|\bDir\s*\.\s*(?:rmdir|delete|unlink)|\bIO\s*\.\s*popen|\bOpen3\b"
    r"|\bKernel\s*\.|%x[({\[]|`|\bqx\b|\bunlink\b|\brmdir\b|\brmtree\b|\bchmod\b|\bchown\b"
    r"|__dict__|__builtins__|__getattribute__|__subclasses__|\bvars\s*\(|\bglobals\s*\("
    r"|['\"](?:remove|unlink|rmdir|rmtree|removedirs|system|popen|spawn\w*|exec\w*|chmod"
    r"|kill)['\"]|\bkill\b|\bremove_tree\b|\bIO::Socket|\bshell_exec\b|\bpassthru\b|\bproc_open\b|\bfsockopen\b|\bSocket\b"
    r"|\bdo\s+shell\s+script\b|\brm\s+-\w*[rf]|\bsudo\b|\bos\.execute\b|\bio\.popen\b",
)


@dataclass(frozen=True)
class _Interp:
    lang: str
    code_short: str = ""
    code_long: tuple[str, ...] = ()
    value_short: str = ""
    attached_short: str = ""
    module_flag: str = ""


_PY = _Interp("Python", code_short="c", value_short="WX", module_flag="m")
_INTERPRETERS: list[tuple[re.Pattern[str], _Interp]] = [
    (re.compile(r"^(?:python|pypy|ipython)[0-9.]*(?:w)?$"), _PY),
    (
        re.compile(r"^perl[0-9.]*$"),
        _Interp("Perl", code_short="eE", value_short="I", attached_short="MmxlC0idDV"),
    ),
    (
        re.compile(r"^(?:j?ruby|irb)[0-9.]*$"),
        _Interp("Ruby", code_short="e", value_short="rICE", attached_short="FTWKx0"),
    ),
    (
        re.compile(r"^(?:node|nodejs|bun)$"),
        _Interp("JavaScript", code_short="ep", code_long=("--eval", "--print"), value_short="r"),
    ),
    (re.compile(r"^php[0-9.]*$"), _Interp("PHP", code_short="rBRE", value_short="cdfzt")),
    (re.compile(r"^lua(?:jit)?[0-9.]*$"), _Interp("Lua", code_short="e", value_short="l")),
    (re.compile(r"^r(?:script)?$"), _Interp("R", code_short="e")),
    (re.compile(r"^osascript$"), _Interp("AppleScript", code_short="e", value_short="l")),
    (re.compile(r"^julia$"), _Interp("Julia", code_short="eE", code_long=("--eval", "--print"))),
    (re.compile(r"^(?:tclsh|wish|expect)[0-9.]*$"), _Interp("Tcl", code_short="c")),
    (re.compile(r"^(?:groovy|scala|kotlinc?)$"), _Interp("JVM", code_short="e")),
]


def interpreter(name: str) -> _Interp | None:
    """The interpreter description for a command name, if it runs a scripting language."""
    for pattern, spec in _INTERPRETERS:
        if pattern.match(name):
            return spec
    return None


def risky_code(code: str) -> str | None:
    """The first risky API a piece of inline code mentions, if any."""
    m = _RISKY_CODE.search(code)
    return m.group(0).strip() if m else None


def _parse_interp_args(spec: _Interp, args: list[Word]) -> tuple[list[Word], str | None, int]:
    """Inline code words, the `-m` module name, and the index of the script operand."""
    code: list[Word] = []
    module: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        v = a.value
        if v is None or not v.startswith("-") or v == "-":
            return code, module, i
        i += 1
        if v == "--":
            return code, module, i
        if v.startswith("--"):
            head, eq, val = v.partition("=")
            if head in spec.code_long:
                if eq:
                    code.append(Word(value=val, raw=a.raw))
                elif i < len(args):
                    code.append(args[i])
                    i += 1
            continue
        cluster = v[1:]
        for pos, ch in enumerate(cluster):
            attached = cluster[pos + 1 :]
            if ch in spec.code_short:
                if attached:
                    code.append(Word(value=attached, raw=a.raw))
                elif i < len(args):
                    code.append(args[i])
                    i += 1
                break
            if ch == spec.module_flag and spec.module_flag:
                if attached:
                    module = attached
                elif i < len(args):
                    module = args[i].value or "?"
                    i += 1
                return code, module, len(args)
            if ch in spec.attached_short:
                if ch in "Mm" and attached:
                    # `-MFile::Path=remove_tree` imports code; judge it like inline code.
                    code.append(Word(value=attached, raw=a.raw))
                break
            if ch in spec.value_short:
                if not attached:
                    i += 1
                break
    return code, module, i


def check_interpreter(j: Judge, name: str, args: list[Word], stdin: Stdin) -> str | None:
    """Judge an interpreter call; returns the `-m` module it runs (for the safe table)."""
    spec = interpreter(name)
    if spec is None:
        return None
    code, module, idx = _parse_interp_args(spec, args)
    for word in code:
        _judge_code(j, spec.lang, word)
    if code or module:
        j.note("execute")
        return module
    script = args[idx] if idx < len(args) else None
    j.note("execute")
    if script is None or script.value == "-":
        _judge_stdin_program(j, spec.lang, stdin)
    elif script.procsub:
        j.danger(f"runs {spec.lang} code from a process substitution")
    elif not script.static:
        j.danger(f"runs a {spec.lang} script whose name is only known at run time")
    elif "://" in (script.value or ""):
        j.danger(f"runs remote {spec.lang} code ({script.value})")
    else:
        j.runs_file(script.value or "", spec.lang)
    return None


def _judge_code(j: Judge, lang: str, word: Word) -> None:
    if not word.static:
        j.danger(f"runs inline {lang} code built at run time")
        return
    hit = risky_code(word.value or "")
    if hit:
        j.danger(f"inline {lang} code uses {hit!r} (deletes, writes, spawns or connects)")


def _judge_stdin_program(j: Judge, lang: str, stdin: Stdin) -> None:
    if stdin.opaque:
        j.danger(f"pipes text into {lang} as a program")
        return
    for text in stdin.texts:
        hit = risky_code(text)
        if hit:
            j.danger(f"{lang} program on standard input uses {hit!r}")


def check_shell(j: Judge, name: str, args: list[Word], stdin: Stdin) -> None:
    """Judge a shell invocation: `-c` bodies are parsed; stdin programs are unknowable."""
    j.note("execute")
    i = 0
    command_mode = False
    stdin_mode = False
    while i < len(args):
        v = args[i].value
        if v is None or v == "-" or not v.startswith(("-", "+")):
            break
        i += 1
        if v == "--":
            break
        if v.startswith("--"):
            if v in ("--rcfile", "--init-file") and i < len(args):
                i += 1
            continue
        if "c" in v[1:]:
            command_mode = True
        if "s" in v[1:] and v.startswith("-"):
            stdin_mode = True
        if "o" in v[1:] and i < len(args):
            i += 1
    operand = args[i] if i < len(args) else None
    if (stdin_mode and not command_mode) or (operand is not None and operand.value == "-"):
        operand = None
    if command_mode:
        j.danger(f"runs code through a `{name} -c` wrapper")
        if operand is None:
            return
        if operand.static:
            j.analyse(operand.value or "")
        else:
            j.danger("the shell code is only known at run time")
        return
    if operand is None:
        if stdin.opaque:
            j.danger(f"pipes text into a shell ({name})")
        elif stdin.kinds & {"heredoc", "herestring"}:
            j.danger(f"feeds inline code to a shell ({name})")
            for text in stdin.texts:
                j.analyse(text)
        return
    if operand.procsub:
        j.danger(f"runs a shell script from a process substitution ({name})")
    elif not operand.static:
        j.danger(f"runs a shell script whose name is only known at run time ({name})")
    elif "://" in (operand.value or ""):
        j.danger(f"runs a remote shell script ({operand.value})")
    else:
        j.runs_file(operand.value or "", "shell")


def check_source(j: Judge, args: list[Word]) -> bool:
    """`source FILE` / `. FILE`; returns True for a virtualenv activation script."""
    j.note("execute")
    if not args:
        return False
    target = args[0]
    value = target.value
    if target.procsub or value is None:
        j.danger("sources shell code that is only known at run time")
        return False
    if value in ("/dev/stdin", "-", "/proc/self/fd/0") or value.startswith("/dev/fd/"):
        j.danger("sources shell code from standard input")
        return False
    if "://" in value:
        j.danger(f"sources remote shell code ({value})")
        return False
    j.runs_file(value, "shell")
    return value.endswith("bin/activate") and not value.startswith(("/", "~"))


# --- awk ------------------------------------------------------------------------------

_AWK_DANGER = re.compile(r"\bsystem\s*\(|(?<!\|)\|(?!\|)\s*(?:getline\b|&|\"|[A-Za-z_(])|\|&")
_AWK_UNSAFE = re.compile(r"\bprintf?\b[^;{}]*>|@load|\bclose\s*\(|\bfflush\b")


def check_awk(j: Judge, args: list[Word]) -> bool:
    """Judge an awk call; returns whether it is a read-only program we can see."""
    i = 0
    from_file = False
    while i < len(args):
        v = args[i].value
        if v is None or not v.startswith("-") or v == "-":
            break
        i += 1
        if v == "--":
            break
        if v in ("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec"):
            from_file = True
            i += 1
        elif v.startswith(("-f", "--file=", "-E", "--exec=")):
            from_file = True
        elif v in ("-F", "-v", "--field-separator", "--assign"):
            i += 1
    if from_file:
        return False
    if i >= len(args):
        return False
    program = args[i]
    if not program.static:
        j.danger("the awk program is only known at run time")
        return False
    text = program.value or ""
    if _AWK_DANGER.search(text):
        j.danger("awk program runs shell commands (system() or a pipe)")
        return False
    return _AWK_UNSAFE.search(text) is None


# --- sed ------------------------------------------------------------------------------

_SED_SIMPLE = set("pPdDnNgGhHxlz=FqQ")


class _SedError(ValueError):
    pass


def _sed_delimited(script: str, pos: int, delim: str) -> int:
    """Index just past the next unescaped delimiter at or after pos."""
    while pos < len(script):
        ch = script[pos]
        if ch == "\\":
            pos += 2
            continue
        if ch == "\n" and delim != "\n":
            raise _SedError("newline inside a sed expression")
        if ch == delim:
            return pos + 1
        pos += 1
    raise _SedError("unterminated sed expression")


def _sed_address(script: str, pos: int) -> int:
    n = len(script)
    for _ in range(2):
        while pos < n and script[pos] in " \t":
            pos += 1
        if pos < n and script[pos] in "0123456789$+~":
            while pos < n and script[pos] in "0123456789$+~":
                pos += 1
        elif pos < n and script[pos] == "/":
            pos = _sed_delimited(script, pos + 1, "/")
            while pos < n and script[pos] in "IM":
                pos += 1
        elif pos + 1 < n and script[pos] == "\\":
            pos = _sed_delimited(script, pos + 2, script[pos + 1])
            while pos < n and script[pos] in "IM":
                pos += 1
        if pos < n and script[pos] == ",":
            pos += 1
            continue
        break
    while pos < n and script[pos] in " \t!":
        pos += 1
    return pos


def sed_script_effects(script: str) -> set[str]:
    """Effects of a sed script: `exec`, `write:<file>`, or `unknown` when it cannot be read."""
    effects: set[str] = set()
    pos = 0
    n = len(script)
    try:
        while pos < n:
            while pos < n and script[pos] in " \t\n;{}":
                pos += 1
            if pos >= n:
                break
            pos = _sed_address(script, pos)
            if pos >= n:
                raise _SedError("address without a command")
            cmd = script[pos]
            pos += 1
            if cmd == "#":
                nl = script.find("\n", pos)
                pos = n if nl < 0 else nl
            elif cmd in "sy":
                delim = script[pos]
                if delim in "\\\n":
                    raise _SedError("bad delimiter")
                pos = _sed_delimited(script, pos + 1, delim)
                pos = _sed_delimited(script, pos, delim)
                flags: list[str] = []
                while pos < n and script[pos] not in ";\n}":
                    if script[pos] in "wW":
                        end = script.find("\n", pos)
                        effects.add("write:" + script[pos + 1 : n if end < 0 else end].strip())
                        pos = n if end < 0 else end
                        break
                    flags.append(script[pos])
                    pos += 1
                if cmd == "s" and "e" in flags:
                    effects.add("exec")
            elif cmd in "aic":
                end = script.find("\n", pos)
                pos = n if end < 0 else end
            elif cmd in "wW":
                end = script.find("\n", pos)
                effects.add("write:" + script[pos : n if end < 0 else end].strip())
                pos = n if end < 0 else end
            elif cmd in "rR":
                end = script.find("\n", pos)
                pos = n if end < 0 else end
            elif cmd == "e":
                effects.add("exec")
                end = script.find("\n", pos)
                pos = n if end < 0 else end
            elif cmd in "btT:v":
                while pos < n and script[pos] not in ";\n}":
                    pos += 1
            elif cmd in "qQlL":
                while pos < n and (script[pos].isdigit() or script[pos] in " \t"):
                    pos += 1
            elif cmd in _SED_SIMPLE:
                pass
            else:
                raise _SedError(f"unknown sed command {cmd!r}")
    except (_SedError, IndexError):
        effects.add("unknown")
    return effects


def check_sed(j: Judge, args: list[Word]) -> bool:
    """Judge a sed call; returns True when it only prints (no -i, no w/e commands)."""
    scripts: list[Word] = []
    files: list[Word] = []
    safe = True
    in_place = False
    i = 0
    explicit = False
    while i < len(args):
        a = args[i]
        v = a.value
        i += 1
        if v is None:
            if not explicit and not scripts:
                scripts.append(a)
            else:
                files.append(a)
            continue
        if v == "--":
            files.extend(args[i:])
            break
        if v in ("-e", "--expression") and i < len(args):
            scripts.append(args[i])
            explicit = True
            i += 1
        elif v.startswith("--expression="):
            scripts.append(Word(value=v.split("=", 1)[1], raw=a.raw))
            explicit = True
        elif v.startswith("-e") and len(v) > 2 and not v.startswith("--"):
            scripts.append(Word(value=v[2:], raw=a.raw))
            explicit = True
        elif v in ("-f", "--file") or v.startswith(("--file=", "-f")):
            safe = False
            explicit = True
            if v in ("-f", "--file"):
                i += 1
        elif v.startswith("--in-place") or (
            v.startswith("-") and not v.startswith("--") and "i" in v[1:]
        ):
            safe = False
            in_place = True
        elif v.startswith("-") and v != "-":
            if v in ("-l", "--line-length"):
                i += 1
        elif not explicit and not scripts:
            scripts.append(a)
        else:
            files.append(a)
    if in_place:
        for target in files:
            why = write_target_danger(target.value) if target.value else None
            if why:
                j.danger(f"sed -i {why}")
    for word in scripts:
        if not word.static:
            j.danger("the sed script is only known at run time")
            return False
        effects = sed_script_effects(word.value or "")
        if "exec" in effects:
            j.danger("sed script executes shell commands (e)")
        if "unknown" in effects:
            j.danger("the sed script could not be analysed")
        for eff in effects:
            if eff.startswith("write:"):
                safe = False
                why = write_target_danger(eff[6:])
                if why:
                    j.danger(f"sed {why}")
        if effects:
            safe = False
    return safe


_VIM_EXEC = re.compile(r"!|\bsystem\s*\(|\bterminal\b|\bpy(?:thon)?3?\b|\blua\b|\bperl\b")


def check_editor(j: Judge, name: str, args: list[Word]) -> None:
    """vim-family `-c`/`+cmd` arguments run ex commands, which can run shell commands."""
    for idx, a in enumerate(args):
        v = a.value
        cmd: str | None = None
        if v in ("-c", "--cmd", "-S") and idx + 1 < len(args):
            cmd = args[idx + 1].text
        elif v is not None and v.startswith("+") and len(v) > 1:
            cmd = v[1:]
        elif v is None:
            cmd = a.raw
        if cmd is not None and _VIM_EXEC.search(cmd):
            j.danger(f"{name} runs an ex command that can execute programs")
