"""Skill loader: named instruction files (`<skills_dir>/<name>/SKILL.md`) for `load_skill`."""

from __future__ import annotations

import os
import re
from pathlib import Path

SKILLS_ENV = "BAREAGENT_SKILLS_DIR"
SKILL_FILE = "SKILL.md"
PACKAGED_SKILLS_DIR = Path(__file__).resolve().parent.parent / "skills"

_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")


def default_skills_dir() -> Path:
    """Return `$BAREAGENT_SKILLS_DIR` when set (and non-empty), else the packaged skills."""
    env = os.environ.get(SKILLS_ENV, "").strip()
    return Path(env).expanduser() if env else PACKAGED_SKILLS_DIR


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Split a leading `---` block of `key: value` lines from the body.

    Without a complete block the metadata is empty and the body is the whole text.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    for n, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return meta, "\n".join(lines[n + 1 :])
        key, sep, value = line.partition(":")
        if sep and key.strip():
            meta[key.strip().lower()] = value.strip().strip("\"'")
    return {}, text


def _first_line(body: str) -> str:
    for line in body.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped
    return ""


class SkillLoader:
    """Finds and reads the SKILL.md files of one skills directory."""

    def __init__(self, skills_dir: str | os.PathLike[str] | None = None) -> None:
        self.skills_dir = Path(skills_dir) if skills_dir is not None else default_skills_dir()

    def names(self) -> list[str]:
        """Return the sorted names of all skills (directories holding a SKILL.md)."""
        try:
            entries = list(self.skills_dir.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            p.name for p in entries if _NAME_RE.fullmatch(p.name) and (p / SKILL_FILE).is_file()
        )

    def _path(self, name: str) -> Path:
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ValueError(f"Invalid skill name {name!r}: use only letters, digits, '-' and '_'")
        path = self.skills_dir / name / SKILL_FILE
        if not path.is_file():
            available = ", ".join(self.names())
            if available:
                raise ValueError(f"Unknown skill {name!r}; available skills: {available}")
            raise ValueError(f"Unknown skill {name!r}; no skills found in {self.skills_dir}")
        return path

    def load(self, name: str) -> str:
        """Return the full text of the named skill's SKILL.md."""
        return self._path(name).read_text(encoding="utf-8", errors="replace")

    def description(self, name: str) -> str:
        """Return the skill's front-matter description (or its first line of text)."""
        meta, body = split_front_matter(self.load(name))
        return (
            " ".join(meta.get("description", "").split()) or _first_line(body) or "(no description)"
        )

    def describe(self) -> str:
        """Return one `- name: description` line per skill, for system prompts."""
        return "\n".join(f"- {name}: {self.description(name)}" for name in self.names())
