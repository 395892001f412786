"""Permission modes and their strictness order."""

from __future__ import annotations

from enum import StrEnum


class PermissionMode(StrEnum):
    """How much the agent may do without asking: BYPASS < AUTO < DEFAULT < PLAN."""

    DEFAULT = "default"
    AUTO = "auto"
    PLAN = "plan"
    BYPASS = "bypass"

    @property
    def strictness(self) -> int:
        """Rank used to keep children at least as strict as parents."""
        return _STRICTNESS[self]

    @classmethod
    def parse(cls, value: str | PermissionMode) -> PermissionMode:
        """Parse a mode name case-insensitively; ValueError names the valid choices."""
        if isinstance(value, PermissionMode):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown permission mode {value!r} (choose {choices})") from None

    @staticmethod
    def stricter(a: PermissionMode, b: PermissionMode) -> PermissionMode:
        """Return whichever of two modes is stricter."""
        return a if a.strictness >= b.strictness else b


_STRICTNESS = {
    PermissionMode.BYPASS: 0,
    PermissionMode.AUTO: 1,
    PermissionMode.DEFAULT: 2,
    PermissionMode.PLAN: 3,
}
