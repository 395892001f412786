"""Sandbox environment policy and SandboxPolicy: what a command inherits, and from where."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bareagent.config import load_config
from bareagent.core.handlers.bash import run_bash
from bareagent.sandbox.env_policy import filter_env, is_secret_name, stripped_names
from bareagent.sandbox.limits import ResourceLimits
from bareagent.sandbox.policy import SandboxPolicy
from bareagent.sandbox.runner import run_shell

posix_only = pytest.mark.skipif(os.name != "posix", reason="runs bash")

SECRETS = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "FAKE_SERVICE_API_KEY",
    "openai_api_key",
    "Fake_Service_Api_Key",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "HF_TOKEN",
    "NPM_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_SECRET",
    "DB_PASSWORD",
    "MYSQL_PWD",
    "PGPASSWORD",
    "SMTP_PASSWD",
    "DOCKER_CREDENTIALS_FILE",
    "GIT_PRIVATE_KEY_PATH",
    "SSH_AUTH_SOCK",
    "GIT_ASKPASS",
    "CLIENT_SECRET",
    "SENTRY_DSN",
    "DATABASE_URL",
    "STRIPE_KEY",
    "API_KEY",
    "BAREAGENT_HOME",
    "bareagent_config",
]
ORDINARY = [
    "HOME",
    "PATH",
    "PWD",
    "OLDPWD",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "USER",
    "SHELL",
    "TMPDIR",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "TOKENIZERS_PARALLELISM",
    "GOPATH",
    "XAUTHORITY",
    "KUBECONFIG",
    "BAREAGENT_TEST_VAR",
    "BAREAGENT_START_METHOD",
    "SYSTEMROOT",
    "PATHEXT",
    "COMSPEC",
]


@pytest.mark.parametrize("name", SECRETS)
def test_secret_names_are_stripped(name: str) -> None:
    assert is_secret_name(name)
    assert filter_env({name: "x", "PATH": "/bin"}) == {"PATH": "/bin"}


@pytest.mark.parametrize("name", ORDINARY)
def test_ordinary_names_pass(name: str) -> None:
    assert not is_secret_name(name)
    assert filter_env({name: "v"}) == {name: "v"}


def test_allow_list_exact_and_pattern_case_insensitive() -> None:
    env = {"FAKE_SERVICE_API_KEY": "a", "OTHER_API_KEY": "b", "GH_TOKEN": "c", "PATH": "p"}
    assert filter_env(env, allow=["fake_service_api_key"]) == {
        "FAKE_SERVICE_API_KEY": "a",
        "PATH": "p",
    }
    assert filter_env(env, allow=["*_API_KEY"]) == {
        "FAKE_SERVICE_API_KEY": "a",
        "OTHER_API_KEY": "b",
        "PATH": "p",
    }
    assert stripped_names(env, allow=["gh_*"]) == ["FAKE_SERVICE_API_KEY", "OTHER_API_KEY"]


def test_extra_deny_names_the_custom_key_variable() -> None:
    env = {"MY_LLM": "k", "PATH": "p"}
    assert filter_env(env) == env
    assert filter_env(env, deny=["my_llm"]) == {"PATH": "p"}


@posix_only
def test_bash_tool_hides_secrets_and_passes_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SERVICE_API_KEY", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_x")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    command = (
        'echo "k=${FAKE_SERVICE_API_KEY-unset} o=${OPENAI_API_KEY-unset} '
        'g=${GITHUB_TOKEN-unset} p=$PLAIN_SETTING h=$HOME"; env | grep -c s3cret || true'
    )
    out = run_bash(tmp_path, command)
    home = os.environ["HOME"]
    assert out == f"k=unset o=unset g=unset p=visible h={home}\n0\n"
    allowed = SandboxPolicy(env_allow=("FAKE_SERVICE_API_KEY",))
    out = run_bash(tmp_path, command, policy=allowed)
    assert out.startswith("k=s3cret o=unset g=unset p=visible")
    # `none` is the user's explicit opt-out: nothing is filtered.
    out = run_bash(tmp_path, command, policy=SandboxPolicy(level="none"))
    assert out.startswith("k=s3cret o=sk-test-123 g=ghp_x p=visible")


@posix_only
def test_explicit_env_is_filtered_too(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SERVICE_TOKEN": "t"}
    result = run_shell('echo "${SERVICE_TOKEN-unset}"', cwd=tmp_path, timeout=10, env=env)
    assert result.output == "unset\n"


@posix_only
def test_lc_ctype_is_not_invented_by_the_wrapper(tmp_path: Path) -> None:
    # Python's C-locale coercion in the limits wrapper must not leak into the command.
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C"}
    out = run_shell('echo "${LC_CTYPE-unset}"', cwd=tmp_path, timeout=10, env=base).output
    assert out == "unset\n"
    with_ctype = {**base, "LC_CTYPE": "C"}
    out = run_shell('echo "${LC_CTYPE-unset}"', cwd=tmp_path, timeout=10, env=with_ctype).output
    assert out == "C\n"


def test_policy_round_trips_through_json(tmp_path: Path) -> None:
    policy = SandboxPolicy(
        level="bwrap",
        network=True,
        env_allow=("A_TOKEN",),
        env_deny=("MY_KEY_VAR",),
        fallback="process",
        limits=ResourceLimits(cpu_seconds=5, memory_mb=0, open_files=64, max_processes=9),
        workspace=str(tmp_path),
        state_root="/var/lib/x",
        hidden_paths=("/etc/bareagent",),
    )
    data = json.loads(json.dumps(policy.to_dict()))
    assert SandboxPolicy.from_dict(data) == policy
    assert SandboxPolicy.from_dict({}) == SandboxPolicy()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"level": "chroot"}, "sandbox level must be one of"),
        ({"fallback": "none"}, "sandbox fallback must be one of"),
        ({"bogus": 1}, "unknown sandbox policy keys: bogus"),
        ({"limits": {"memory_mb": -1}}, "memory_mb must be a non-negative integer"),
        ({"limits": {"nproc": 1}}, "unknown sandbox limit keys"),
        ({"env_allow": "X_TOKEN"}, "env_allow must be a list of strings"),
        ({"network": "yes"}, "network must be true or false"),
    ],
)
def test_policy_from_dict_rejects_bad_input(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SandboxPolicy.from_dict(data)


def test_policy_from_config(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text(
        '[provider]\napi_key_env = "MY_LLM_KEY"\n'
        '[sandbox]\nlevel = "bwrap"\nnetwork = true\nenv_allow = ["HF_TOKEN"]\n'
        "memory_mb = 512\nmax_processes = 0\n"
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    config = load_config(ws, user_file=user)
    policy = SandboxPolicy.from_config(config, workspace=ws)
    assert policy.level == "bwrap" and policy.network is True
    assert policy.env_allow == ("HF_TOKEN",) and policy.env_deny == ("MY_LLM_KEY",)
    assert policy.limits == ResourceLimits(memory_mb=512, max_processes=0)
    assert policy.workspace == str(ws.resolve())
    assert policy.state_root is not None
    assert Path(policy.state_root).is_relative_to(Path(os.environ["BAREAGENT_HOME"]).resolve())
    assert str(Path(os.environ["BAREAGENT_HOME"]).resolve()) in policy.hidden_paths
    assert os.environ["BAREAGENT_CONFIG"] in policy.hidden_paths


def test_defaults_are_the_process_level(tmp_path: Path) -> None:
    config = load_config(tmp_path, user_file=tmp_path / "missing.toml")
    policy = SandboxPolicy.from_config(config)
    assert policy.level == "process" and policy.fallback == "refuse" and not policy.network
    assert policy.limits == ResourceLimits()
    assert policy.limits.to_dict() == {
        "cpu_seconds": 1800,
        "memory_mb": 4096,
        "open_files": 4096,
        "max_processes": 256,
    }


def test_workspace_file_cannot_loosen_the_sandbox(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user = tmp_path / "user.toml"
    user.write_text('[sandbox]\nlevel = "process"\nmemory_mb = 1024\n')
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".bareagent.toml").write_text(
        '[sandbox]\nlevel = "none"\nnetwork = true\nenv_allow = ["*"]\nfallback = "process"\n'
        "memory_mb = 0\ncpu_seconds = 10\nopen_files = 99999\n"
    )
    box = load_config(ws, user_file=user).section("sandbox")
    assert box["level"] == "process" and box["network"] is False and box["env_allow"] == []
    assert box["fallback"] == "refuse" and box["memory_mb"] == 1024
    assert box["cpu_seconds"] == 10  # tightening is accepted
    assert box["open_files"] is None  # 99999 is above the default of 4096
    assert "ignoring looser [sandbox] settings" in caplog.text
    (ws / ".bareagent.toml").write_text('[sandbox]\nlevel = "bwrap"\nmemory_mb = 256\n')
    box = load_config(ws, user_file=user).section("sandbox")
    assert box["level"] == "bwrap" and box["memory_mb"] == 256
