"""OpenAI-compatible endpoints by name: base URL and the env var that holds the key."""

from __future__ import annotations

from dataclasses import dataclass

from bareagent.provider.base import ProviderError


@dataclass(frozen=True)
class Preset:
    """An OpenAI-compatible service.

    `base_url` None means "the OpenAI SDK default", which honours `OPENAI_BASE_URL`.
    `key_env` None means the service takes no key; `key_required` False means a missing
    key is replaced by a placeholder (local servers ignore it, the SDK insists on one).
    """

    name: str
    label: str
    base_url: str | None
    key_env: str | None
    key_required: bool = True
    # Most third-party servers only know the older `max_tokens` request field.
    max_tokens_field: str = "max_tokens"


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "openai", "OpenAI", None, "OPENAI_API_KEY", max_tokens_field="max_completion_tokens"
        ),
        Preset("deepseek", "DeepSeek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        Preset("openrouter", "OpenRouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        Preset("groq", "Groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        Preset("together", "Together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
        Preset("mistral", "Mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
        Preset(
            "fireworks", "Fireworks", "https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"
        ),
        Preset("xai", "xAI", "https://api.x.ai/v1", "XAI_API_KEY"),
        Preset("ollama", "Ollama", "http://localhost:11434/v1", None, key_required=False),
        Preset("lmstudio", "LM Studio", "http://localhost:1234/v1", None, key_required=False),
        Preset("vllm", "vLLM", "http://localhost:8000/v1", "VLLM_API_KEY", key_required=False),
        Preset("local", "local server", "http://localhost:8000/v1", None, key_required=False),
    )
}

PLACEHOLDER_KEY = "not-needed"


def preset_names() -> list[str]:
    """Every provider name accepted besides `anthropic`, sorted."""
    return sorted(PRESETS)


def get_preset(name: str) -> Preset:
    """Look a preset up by name (case-insensitive); ProviderError lists the valid names."""
    preset = PRESETS.get(name.strip().lower())
    if preset is None:
        choices = ", ".join(["anthropic", *preset_names()])
        raise ProviderError(f"unknown provider {name!r} (choose one of: {choices})")
    return preset
