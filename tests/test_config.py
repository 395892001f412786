"""Config merging, validation and the workspace file's limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from bareagent.config import ConfigError, load_config


@pytest.fixture
def user_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "user" / "config.toml"
    path.parent.mkdir()
    monkeypatch.setenv("BAREAGENT_CONFIG", str(path))
    return path


def workspace(tmp_path: Path, text: str | None = None) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    if text is not None:
        (ws / ".bareagent.toml").write_text(text)
    return ws


def test_defaults_without_files(tmp_path: Path, user_file: Path) -> None:
    cfg = load_config(workspace(tmp_path))
    assert cfg.get("provider", "name") == "anthropic"
    assert cfg.get("permission", "mode") == "default"
    assert cfg.get("subagent", "max_depth") == 3
    assert cfg.sources == ()


def test_layers_merge_in_order(tmp_path: Path, user_file: Path) -> None:
    user_file.write_text(
        '[provider]\nname = "openai"\nmodel = "gpt-x"\n[subagent]\nmax_depth = 2\n'
    )
    ws = workspace(tmp_path, '[provider]\nmodel = "ws-model"\n')
    cfg = load_config(ws, {"provider": {"model": "flag-model", "name": None}})
    assert cfg.get("provider", "name") == "openai"
    assert cfg.get("provider", "model") == "flag-model"
    assert cfg.get("subagent", "max_depth") == 2
    assert len(cfg.sources) == 2


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[provider]\nmodle = 'x'\n", "unknown key 'modle'"),
        ("[providr]\nname = 'x'\n", "unknown section [providr]"),
        ("[permission]\nmode = 'yolo'\n", "[permission] mode must be one of"),
        ("[subagent]\nmax_depth = 'three'\n", "[subagent] max_depth must be int"),
        ("[agent]\nstream = 1\n", "[agent] stream must be bool"),
        ("[subagent]\nmax_depth = true\n", "[subagent] max_depth must be int"),
        ("[permission]\nallow = [1]\n", "must be a list of strings"),
        ("[subagent]\nmax_depth = -1\n", "must not be negative"),
        ("[provider\n", "invalid TOML"),
    ],
)
def test_invalid_config_names_the_key(
    tmp_path: Path, user_file: Path, text: str, needle: str
) -> None:
    user_file.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(workspace(tmp_path))
    message = str(info.value)
    assert needle in message
    assert str(user_file) in message


def test_invalid_flag_is_reported(tmp_path: Path, user_file: Path) -> None:
    with pytest.raises(ConfigError, match="command line: \\[permission\\] mode"):
        load_config(workspace(tmp_path), {"permission": {"mode": "nope"}})


def test_workspace_file_cannot_loosen_permissions(tmp_path: Path, user_file: Path) -> None:
    user_file.write_text('[permission]\nmode = "default"\ndeny = ["bash(prefix:make)"]\n')
    ws = workspace(
        tmp_path,
        '[permission]\nmode = "bypass"\nallow = ["bash(prefix:rm)"]\ndeny = ["bash(prefix:git)"]\n',
    )
    cfg = load_config(ws)
    assert cfg.get("permission", "mode") == "default"
    assert cfg.get("permission", "allow") == []
    assert cfg.get("permission", "deny") == ["bash(prefix:make)", "bash(prefix:git)"]


def test_workspace_file_may_tighten(tmp_path: Path, user_file: Path) -> None:
    ws = workspace(tmp_path, '[permission]\nmode = "plan"\n')
    assert load_config(ws).get("permission", "mode") == "plan"


def test_flags_may_loosen(tmp_path: Path, user_file: Path) -> None:
    ws = workspace(tmp_path, '[permission]\nmode = "plan"\n')
    cfg = load_config(ws, {"permission": {"mode": "auto"}})
    assert cfg.get("permission", "mode") == "auto"
