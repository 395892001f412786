"""Child-environment policy: which variables a sandboxed command inherits.

The policy is a deny list with an explicit allow list on top: everything passes except
names that look like secrets (provider keys, tokens, passwords, cloud credentials, the
SSH agent socket) and BareAgent's own variables that point at its state and config.
A deny list, not an allow list, because commands need an open-ended set of ordinary
variables (PATH, HOME, locale, TERM, VIRTUAL_ENV, tool settings) to behave as they do in
the user's shell.

Matching is case-insensitive on every OS: Windows treats `openai_api_key` and
`OPENAI_API_KEY` as the same variable, and a lower-case spelling must not slip through
on POSIX either. Only names are judged; values are passed as they are.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping

# fnmatch patterns, matched against the upper-cased name.
SECRET_PATTERNS: tuple[str, ...] = (
    "*_API_KEY",
    "*_API_KEY_*",
    "*_APIKEY",
    "API_KEY",
    "APIKEY",
    "*_KEY",
    "*_ACCESS_KEY*",
    "*_PRIVATE_KEY*",
    "*_TOKEN",
    "*_TOKEN_*",
    "TOKEN",
    "*_PAT",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_PWD",
    "*PASSPHRASE*",
    "*_CREDENTIAL",
    "*_CREDENTIALS*",
    "*_AUTH",
    "*_AUTH_*",
    "*ASKPASS*",
    "*_DSN",
    "DATABASE_URL",
    "*_DATABASE_URL",
)

# Exact names that the patterns above do not cover.
SECRET_NAMES: frozenset[str] = frozenset(
    {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "AZURE_CLIENT_SECRET",
        "AZURE_CLIENT_CERTIFICATE_PASSWORD",
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "GPG_AGENT_INFO",
        "VSCODE_GIT_IPC_HANDLE",
        # BareAgent's own pointers at its state root and its config (which may hold an
        # api_key); `BAREAGENT_*` as a whole is not stripped, only what leads to secrets.
        "BAREAGENT_HOME",
        "BAREAGENT_CONFIG",
    }
)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern.upper()) for pattern in patterns)


def is_secret_name(name: str, extra_deny: Iterable[str] = ()) -> bool:
    """True if a variable called `name` must not reach a sandboxed command."""
    upper = name.upper()
    if upper in SECRET_NAMES:
        return True
    return _matches(name, SECRET_PATTERNS) or _matches(name, extra_deny)


def filter_env(
    env: Mapping[str, str] | None = None,
    *,
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
) -> dict[str, str]:
    """Return a copy of `env` (default `os.environ`) without secret-looking variables.

    `allow` holds exact names or fnmatch patterns that pass even if they look secret;
    `deny` adds names or patterns to strip (e.g. the provider's `api_key_env`).
    """
    source = os.environ if env is None else env
    allowed = tuple(allow)
    denied = tuple(deny)
    return {
        name: value
        for name, value in source.items()
        if _matches(name, allowed) or not is_secret_name(name, denied)
    }


def stripped_names(
    env: Mapping[str, str] | None = None,
    *,
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
) -> list[str]:
    """The names `filter_env` would drop, sorted (for diagnostics such as `config show`)."""
    source = os.environ if env is None else env
    kept = filter_env(source, allow=allow, deny=deny)
    return sorted(name for name in source if name not in kept)
