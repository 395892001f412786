"""SkillLoader: skills directory resolution, name validation, packaged skills."""

from __future__ import annotations

from pathlib import Path

import pytest

import bareagent
from bareagent.planning.skills import (
    PACKAGED_SKILLS_DIR,
    SKILLS_ENV,
    SkillLoader,
    default_skills_dir,
    split_front_matter,
)

REQUIRED_SKILLS = {"code-review", "git", "test"}


def _skill(root: Path, name: str, text: str) -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SKILLS_ENV, raising=False)


@pytest.fixture
def custom(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    _skill(root, "alpha", "---\nname: alpha\ndescription: First skill.\n---\n\n# Alpha\nDo A.\n")
    _skill(root, "beta_2", "# Beta heading\n\nNo front matter here.\n")
    _skill(root, "gamma", '---\nname: gamma\ndescription: "Quoted   desc"\n---\nbody\n')
    (root / "no-skill-file").mkdir()
    _skill(root, "bad.name", "---\ndescription: invalid dir name\n---\n")
    (root / "README.md").write_text("not a skill", encoding="utf-8")
    return root


# -- packaged skills ------------------------------------------------------------------------


def test_packaged_dir_is_inside_the_package() -> None:
    assert Path(bareagent.__file__).resolve().parent / "skills" == PACKAGED_SKILLS_DIR
    assert PACKAGED_SKILLS_DIR.is_dir()


def test_default_uses_packaged_skills(no_env: None) -> None:
    loader = SkillLoader()
    assert loader.skills_dir == PACKAGED_SKILLS_DIR
    names = loader.names()
    assert names == sorted(names)
    assert set(names) >= REQUIRED_SKILLS


@pytest.mark.parametrize("name", sorted(REQUIRED_SKILLS))
def test_packaged_skill_has_front_matter_and_instructions(no_env: None, name: str) -> None:
    text = SkillLoader().load(name)
    assert text == (PACKAGED_SKILLS_DIR / name / "SKILL.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    meta, body = split_front_matter(text)
    assert meta["name"] == name
    assert len(meta["description"]) > 20
    assert len(body.split()) > 150  # real instructions, not a stub


def test_packaged_describe_lists_every_skill(no_env: None) -> None:
    loader = SkillLoader()
    lines = loader.describe().splitlines()
    assert len(lines) == len(loader.names())
    by_name = {line.split(":", 1)[0].removeprefix("- "): line for line in lines}
    assert set(by_name) == set(loader.names())
    for name in REQUIRED_SKILLS:
        meta, _ = split_front_matter(loader.load(name))
        assert by_name[name] == f"- {name}: {meta['description']}"


# -- directory resolution -------------------------------------------------------------------


def test_env_override(monkeypatch: pytest.MonkeyPatch, custom: Path) -> None:
    monkeypatch.setenv(SKILLS_ENV, str(custom))
    assert default_skills_dir() == custom
    loader = SkillLoader()
    assert loader.skills_dir == custom
    assert loader.names() == ["alpha", "beta_2", "gamma"]
    assert "Do A." in loader.load("alpha")
    with pytest.raises(ValueError, match="Unknown skill 'git'"):
        loader.load("git")


def test_empty_env_means_packaged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SKILLS_ENV, "  ")
    assert SkillLoader().skills_dir == PACKAGED_SKILLS_DIR


def test_explicit_dir_beats_env(
    monkeypatch: pytest.MonkeyPatch, custom: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    _skill(other, "only-here", "x\n")
    monkeypatch.setenv(SKILLS_ENV, str(custom))
    assert SkillLoader(other).names() == ["only-here"]
    assert SkillLoader(str(other)).load("only-here") == "x\n"


def test_missing_dir(tmp_path: Path) -> None:
    loader = SkillLoader(tmp_path / "absent")
    assert loader.names() == []
    assert loader.describe() == ""
    with pytest.raises(ValueError, match=r"Unknown skill 'git'; no skills found in .*absent"):
        loader.load("git")


# -- load / names / describe ----------------------------------------------------------------


def test_load_returns_full_text(custom: Path) -> None:
    loader = SkillLoader(custom)
    assert loader.load("alpha") == (custom / "alpha" / "SKILL.md").read_text(encoding="utf-8")


def test_names_skip_non_skills(custom: Path) -> None:
    assert SkillLoader(custom).names() == ["alpha", "beta_2", "gamma"]


def test_unknown_skill_lists_available(custom: Path) -> None:
    with pytest.raises(ValueError) as info:
        SkillLoader(custom).load("deploy")
    assert str(info.value) == "Unknown skill 'deploy'; available skills: alpha, beta_2, gamma"


def test_directory_without_skill_file_is_unknown(custom: Path) -> None:
    with pytest.raises(ValueError, match="Unknown skill 'no-skill-file'"):
        SkillLoader(custom).load("no-skill-file")


@pytest.mark.parametrize(
    "name", ["../alpha", "alpha/../alpha", "/etc/passwd", "", "a b", "alpha\n", "bad.name", ".."]
)
def test_invalid_names_rejected(custom: Path, name: str) -> None:
    with pytest.raises(ValueError, match="Invalid skill name"):
        SkillLoader(custom).load(name)


def test_traversal_cannot_reach_outside(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    (tmp_path / "SKILL.md").write_text("secret", encoding="utf-8")
    with pytest.raises(ValueError, match="Invalid skill name"):
        SkillLoader(root).load("..")


def test_describe_uses_front_matter_or_first_line(custom: Path) -> None:
    assert SkillLoader(custom).describe().splitlines() == [
        "- alpha: First skill.",
        "- beta_2: Beta heading",
        "- gamma: Quoted desc",
    ]


def test_split_front_matter() -> None:
    assert split_front_matter("---\nname: x\ndescription: a: b\n---\nbody") == (
        {"name": "x", "description": "a: b"},
        "body",
    )
    assert split_front_matter("no meta\n") == ({}, "no meta\n")
    unterminated = "---\nname: x\nbody without end\n"
    assert split_front_matter(unterminated) == ({}, unterminated)
    assert split_front_matter("")[0] == {}
