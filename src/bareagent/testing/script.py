"""Scripted-conversation files: loading and validation.

Format (see `bareagent.testing.scripted_server` for how turns are chosen)::

    {"turns": [turn, ...], "models": ["model-a", ...]?, "description": str?}
    turn = {"text": str?, "thinking": str?,
            "tool_calls": [{"name": str, "input": dict?, "id": str?, "arguments": str?}]?,
            "when": {"system_contains": str?, "last_user_contains": str?,
                     "tools_include": str?}?,
            "error": {"status": int, "message": str, "retry_after": float?}?,
            "stop_reason": "end_turn" | "tool_use" | "max_tokens"?,
            "delay": float?}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_TOP_KEYS = {"turns", "models", "description"}
_TURN_KEYS = {"text", "thinking", "tool_calls", "when", "error", "stop_reason", "delay"}
_WHEN_KEYS = {"system_contains", "last_user_contains", "tools_include"}
_CALL_KEYS = {"name", "input", "id", "arguments"}
_ERROR_KEYS = {"status", "message", "retry_after"}
_STOP_REASONS = {"end_turn", "tool_use", "max_tokens"}


class ScriptError(ValueError):
    """The script is malformed; the message names the turn and key."""


def load_script(script: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    """Read (if a path) and validate a script; ScriptError says what is wrong."""
    if isinstance(script, str | os.PathLike):
        path = Path(script)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as err:
            raise ScriptError(f"cannot read script {path}: {err.strerror or err}") from err
        except ValueError as err:
            raise ScriptError(f"script {path} is not valid JSON: {err}") from err
    else:
        data = script
    if not isinstance(data, Mapping):
        raise ScriptError("script must be a JSON object with a 'turns' list")
    for key in data:
        if key not in _TOP_KEYS:
            raise ScriptError(f"script: unknown key {key!r}")
    turns = data.get("turns")
    if not isinstance(turns, list):
        raise ScriptError("script: 'turns' must be a list")
    models = data.get("models")
    if models is not None and (
        not isinstance(models, list) or not all(isinstance(m, str) for m in models)
    ):
        raise ScriptError("script: 'models' must be a list of strings")
    clean = [_check_turn(i, turn) for i, turn in enumerate(turns)]
    return {"turns": clean, "models": list(models) if models is not None else None}


def _check_turn(index: int, turn: object) -> dict[str, Any]:
    where = f"script turn {index}"
    if not isinstance(turn, Mapping):
        raise ScriptError(f"{where}: must be an object")
    for key in turn:
        if key not in _TURN_KEYS:
            raise ScriptError(f"{where}: unknown key {key!r}")
    for key in ("text", "thinking"):
        if key in turn and not isinstance(turn[key], str):
            raise ScriptError(f"{where}: {key!r} must be a string")
    when = turn.get("when", {})
    if not isinstance(when, Mapping):
        raise ScriptError(f"{where}: 'when' must be an object")
    for key, value in when.items():
        if key not in _WHEN_KEYS:
            raise ScriptError(f"{where}: unknown 'when' key {key!r}")
        if not isinstance(value, str):
            raise ScriptError(f"{where}: when.{key} must be a string")
    calls = turn.get("tool_calls", [])
    if not isinstance(calls, list):
        raise ScriptError(f"{where}: 'tool_calls' must be a list")
    for n, call in enumerate(calls):
        _check_call(f"{where} tool_calls[{n}]", call)
    error = turn.get("error")
    if error is not None:
        _check_error(where, error)
    delay = turn.get("delay", 0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise ScriptError(f"{where}: 'delay' must be a non-negative number")
    stop = turn.get("stop_reason")
    if stop is not None and stop not in _STOP_REASONS:
        raise ScriptError(f"{where}: 'stop_reason' must be one of {sorted(_STOP_REASONS)}")
    return dict(turn)


def _check_call(where: str, call: object) -> None:
    if not isinstance(call, Mapping):
        raise ScriptError(f"{where}: must be an object")
    for key in call:
        if key not in _CALL_KEYS:
            raise ScriptError(f"{where}: unknown key {key!r}")
    if not isinstance(call.get("name"), str) or not call["name"]:
        raise ScriptError(f"{where}: 'name' must be a non-empty string")
    if "input" in call and not isinstance(call["input"], Mapping):
        raise ScriptError(f"{where}: 'input' must be an object")
    for key in ("id", "arguments"):
        if key in call and not isinstance(call[key], str):
            raise ScriptError(f"{where}: {key!r} must be a string")


def _check_error(where: str, error: object) -> None:
    if not isinstance(error, Mapping):
        raise ScriptError(f"{where}: 'error' must be an object")
    for key in error:
        if key not in _ERROR_KEYS:
            raise ScriptError(f"{where}: unknown 'error' key {key!r}")
    status = error.get("status")
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise ScriptError(f"{where}: error.status must be an HTTP error status (400-599)")
    if not isinstance(error.get("message", ""), str):
        raise ScriptError(f"{where}: error.message must be a string")
    retry = error.get("retry_after")
    if retry is not None and (isinstance(retry, bool) or not isinstance(retry, int | float)):
        raise ScriptError(f"{where}: error.retry_after must be a number of seconds")
