"""Build a provider from config: resolve the key early, import the SDK lazily."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from bareagent.provider.base import Provider, ProviderConfig, ProviderError
from bareagent.provider.presets import PLACEHOLDER_KEY, get_preset

ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
# Only the two first-party APIs get a default; a preset's server decides its own models.
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}


def resolve_api_key(
    config: ProviderConfig, default_env: str | None, *, required: bool
) -> str | None:
    """`api_key` from config, else the env var named by `api_key_env`, else `default_env`.

    When `api_key_env` is given only that variable is consulted: falling back to another
    variable could silently bill a different account.
    """
    if config.api_key:
        return config.api_key
    env = config.api_key_env or default_env
    if env:
        value = os.environ.get(env, "").strip()
        if value:
            return value
    if not required:
        return None
    if env:
        raise ProviderError(f"missing API key: set {env} or [provider] api_key")
    raise ProviderError("missing API key: set [provider] api_key or api_key_env")


def create_provider(config: ProviderConfig | Mapping[str, Any]) -> Provider:
    """A ready provider; a missing key, model or unknown name fails here, not at first call."""
    if isinstance(config, ProviderConfig):
        cfg = config
    else:
        try:
            cfg = ProviderConfig.from_dict(config)
        except (TypeError, ValueError) as err:
            raise ProviderError(str(err)) from err
    name = cfg.name.strip().lower()
    if not cfg.model and name in DEFAULT_MODELS:
        cfg = ProviderConfig.from_dict({**cfg.to_dict(), "model": DEFAULT_MODELS[name]})
    if not cfg.model:
        raise ProviderError("missing model: set [provider] model or pass --model")
    try:
        if name == "anthropic":
            key = resolve_api_key(cfg, ANTHROPIC_KEY_ENV, required=True)
            from bareagent.provider.anthropic_provider import AnthropicProvider

            return AnthropicProvider(cfg, api_key=key or "")
        preset = get_preset(name)
        key = resolve_api_key(cfg, preset.key_env, required=preset.key_required)
        if cfg.api == "responses":
            from bareagent.provider.openai_responses import OpenAIResponsesProvider

            return OpenAIResponsesProvider(cfg, api_key=key or PLACEHOLDER_KEY, preset=preset)
        from bareagent.provider.openai_provider import OpenAIChatProvider

        return OpenAIChatProvider(cfg, api_key=key or PLACEHOLDER_KEY, preset=preset)
    except ProviderError:
        raise
    except Exception as err:  # SDK constructor failures (bad URL, ...) become one line
        raise ProviderError(f"cannot set up provider {cfg.name!r}: {err}") from err
