"""Tool schema construction: one provider-neutral shape for every tool."""

from __future__ import annotations

import copy
from typing import Any

ToolSchema = dict[str, Any]


def tool_schema(
    name: str,
    description: str,
    properties: dict[str, Any] | None = None,
    required: list[str] | None = None,
) -> ToolSchema:
    """Build `{"name", "description", "parameters": {"type": "object", ...}}` for a tool."""
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": copy.deepcopy(properties or {}),
            "required": list(required or []),
        },
    }
