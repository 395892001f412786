"""Test support: a scripted local LLM server for the real Anthropic/OpenAI SDKs."""

from bareagent.testing.script import ScriptError, load_script
from bareagent.testing.scripted_server import EXHAUSTED_TEXT, RecordedRequest, ScriptedLLMServer

__all__ = ["EXHAUSTED_TEXT", "RecordedRequest", "ScriptError", "ScriptedLLMServer", "load_script"]
