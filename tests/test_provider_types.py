"""Provider-neutral types, config validation, presets, key resolution and lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import bareagent
from bareagent.provider import (
    LLMResponse,
    Provider,
    ProviderConfig,
    ProviderError,
    StreamEvent,
    ToolCall,
    create_provider,
)
from bareagent.provider.base import error_body_message, format_status_error, one_line
from bareagent.provider.presets import PRESETS, get_preset

SRC = str(Path(bareagent.__file__).resolve().parents[1])
KEY_VARS = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "MY_KEY", "VLLM_API_KEY"]


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)


# --------------------------------------------------------------------------- responses


def test_response_to_message_keeps_blocks_and_copies() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig1"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"file_path": "a"}},
    ]
    call = ToolCall("call_1", "read_file", {"file_path": "a"})
    response = LLMResponse("Reading.", "tool_use", 10, 5, [call], "hmm", blocks)
    assert response.has_tool_calls
    message = response.to_message()
    assert message == {"role": "assistant", "content": blocks}
    message["content"][2]["input"]["file_path"] = "changed"
    assert response.content_blocks[2]["input"] == {"file_path": "a"}


def test_response_without_blocks_derives_them() -> None:
    call = ToolCall("t1", "glob", {"pattern": "*.py"})
    response = LLMResponse(text="hi", tool_calls=[call], thinking="x")
    assert [b["type"] for b in response.to_message()["content"]] == ["thinking", "text", "tool_use"]
    assert response.content_blocks[2] == {
        "type": "tool_use",
        "id": "t1",
        "name": "glob",
        "input": {"pattern": "*.py"},
    }
    plain = LLMResponse(text="done")
    assert not plain.has_tool_calls
    assert plain.to_message() == {
        "role": "assistant",
        "content": [{"type": "text", "text": "done"}],
    }


def test_stream_event_defaults() -> None:
    event = StreamEvent("text", text="a")
    assert (event.tool_call, event.response) == (None, None)
    final = StreamEvent("response", response=LLMResponse(text="x"))
    assert final.response is not None and final.response.text == "x"


class _OnlyCreate(Provider):
    def create(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        **kw: Any,
    ) -> LLMResponse:
        return LLMResponse(text="ok")


def test_provider_base_stream_not_implemented() -> None:
    provider = _OnlyCreate()
    assert provider.create([], []).text == "ok"
    with pytest.raises(NotImplementedError):
        provider.create_stream([], [])
    with pytest.raises(TypeError):
        Provider()  # type: ignore[abstract]


# --------------------------------------------------------------------------- errors


def test_provider_error_is_one_line() -> None:
    err = ProviderError("first line\nsecond\tline   " + "x" * 1000)
    text = str(err)
    assert "\n" not in text and text.startswith("first line second line")
    assert len(text) <= 300 and text.endswith("...")
    assert one_line("  a \n b ") == "a b"


def test_error_body_message_shapes() -> None:
    anthropic_body = {"type": "error", "error": {"type": "not_found_error", "message": "nope"}}
    assert error_body_message(anthropic_body) == "nope"
    assert error_body_message({"message": "inner", "type": "x"}) == "inner"
    assert error_body_message("plain text") == "plain text"
    assert error_body_message(None) is None
    assert format_status_error("OpenAI", 429, {"message": "slow\ndown"}, "") == (
        "OpenAI API error 429: slow down"
    )
    assert "during streaming" in format_status_error("Anthropic", 200, {"error": "boom"}, "")


# --------------------------------------------------------------------------- config


def test_config_from_dict_defaults_and_none() -> None:
    cfg = ProviderConfig.from_dict({"name": "openai", "model": "m", "api_key": None, "timeout": 5})
    assert cfg.name == "openai" and cfg.model == "m"
    assert cfg.max_tokens == 4096 and cfg.max_retries == 2 and cfg.api == "chat"
    assert isinstance(cfg.timeout, float) and cfg.timeout == 5.0
    assert ProviderConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"name": "openai", "modle": "x"}, "modle"),
        ({"max_tokens": "many"}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_retries": True}, "max_retries"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout": "slow"}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"api": "rest", "name": "openai"}, "api"),
        ({"api": "responses", "name": "anthropic"}, "api"),
        ({"temperature": "hot"}, "temperature"),
        ({"model": 3}, "model"),
        ({"thinking_budget": 5000, "max_tokens": 4096}, "thinking_budget"),
    ],
)
def test_config_from_dict_rejects_bad_values(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key):
        ProviderConfig.from_dict(data)


def test_config_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(ValueError, match="mapping"):
        ProviderConfig.from_dict(["name"])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- factory


def test_missing_anthropic_key_names_env_var() -> None:
    with pytest.raises(ProviderError) as info:
        create_provider({"name": "anthropic", "model": "m"})
    assert str(info.value) == "missing API key: set ANTHROPIC_API_KEY or [provider] api_key"


def test_missing_openai_and_preset_keys_name_env_var() -> None:
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        create_provider(ProviderConfig(name="openai", model="m"))
    with pytest.raises(ProviderError, match="DEEPSEEK_API_KEY"):
        create_provider({"name": "deepseek", "model": "m"})
    with pytest.raises(ProviderError, match="set MY_KEY or"):
        create_provider({"name": "openai", "model": "m", "api_key_env": "MY_KEY"})


def test_key_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "from-custom-env")
    monkeypatch.setenv("OPENAI_API_KEY", "from-default-env")
    provider = create_provider({"name": "openai", "model": "m", "api_key_env": "MY_KEY"})
    assert provider.client.api_key == "from-custom-env"  # type: ignore[attr-defined]
    provider = create_provider({"name": "openai", "model": "m"})
    assert provider.client.api_key == "from-default-env"  # type: ignore[attr-defined]
    provider = create_provider({"name": "openai", "model": "m", "api_key": "from-config"})
    assert provider.client.api_key == "from-config"  # type: ignore[attr-defined]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ant-key")
    provider = create_provider({"name": "anthropic", "model": "m"})
    assert provider.client.api_key == "ant-key"  # type: ignore[attr-defined]


def test_local_presets_need_no_key() -> None:
    provider = create_provider({"name": "ollama", "model": "llama3"})
    assert provider.base_url.startswith("http://localhost:11434/v1")  # type: ignore[attr-defined]
    assert provider.name == "ollama" and provider.model == "llama3"
    provider = create_provider({"name": "vllm", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    assert provider.base_url.startswith("http://127.0.0.1:9/v1")  # type: ignore[attr-defined]


def test_unknown_provider_missing_model_and_bad_dict() -> None:
    with pytest.raises(ProviderError, match=r"unknown provider 'gemeni'.*anthropic.*ollama"):
        create_provider({"name": "gemeni", "model": "m"})
    with pytest.raises(ProviderError, match="missing model"):
        create_provider({"name": "ollama"})
    assert create_provider({"name": "anthropic", "api_key": "k"}).model == "claude-sonnet-4-5"
    assert create_provider({"name": "openai", "api_key": "k"}).model == "gpt-4.1"
    with pytest.raises(ProviderError, match="unknown provider config key 'colour'"):
        create_provider({"name": "anthropic", "model": "m", "colour": "red"})


def test_presets_are_consistent() -> None:
    assert get_preset("OpenRouter").base_url == "https://openrouter.ai/api/v1"
    for preset in PRESETS.values():
        assert preset.key_required == (preset.key_env is not None and preset.name != "vllm")
        assert preset.base_url is None or preset.base_url.startswith("http")


def test_provider_package_import_is_light() -> None:
    code = (
        "import sys, bareagent.provider, bareagent.provider.factory;"
        "print(sorted(m for m in ('anthropic', 'openai', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": SRC, "PATH": ""},
        check=True,
    )
    assert out.stdout.strip() == "[]"
