"""Model providers behind one interface; SDKs are imported only when a provider is built."""

from bareagent.provider.base import (
    LLMResponse,
    Provider,
    ProviderConfig,
    ProviderError,
    StreamEvent,
    ToolCall,
)
from bareagent.provider.factory import create_provider

__all__ = [
    "LLMResponse",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "StreamEvent",
    "ToolCall",
    "create_provider",
]
