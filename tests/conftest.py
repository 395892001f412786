"""Suite-wide isolation: a private HOME, state root and user config for every test run.

A private HOME keeps `bash -lc` from sourcing the developer's shell start-up files (slow,
and on pyenv machines a killed login shell can leave a rehash lock behind), and keeps the
suite from reading or writing the user's real BareAgent config and state.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

_SANDBOX_HOME = tempfile.mkdtemp(prefix="bareagent-test-home-")
for _var, _value in {
    "HOME": _SANDBOX_HOME,
    "BAREAGENT_HOME": os.path.join(_SANDBOX_HOME, "bareagent-home"),
    "BAREAGENT_CONFIG": os.path.join(_SANDBOX_HOME, "no-such-config.toml"),
    "XDG_CONFIG_HOME": os.path.join(_SANDBOX_HOME, ".config"),
    "XDG_STATE_HOME": os.path.join(_SANDBOX_HOME, ".local", "state"),
}.items():
    os.environ[_var] = _value
for _secret in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
    os.environ.pop(_secret, None)


@pytest.fixture(scope="session", autouse=True)
def _remove_sandbox_home() -> Iterator[None]:
    yield
    shutil.rmtree(_SANDBOX_HOME, ignore_errors=True)
