"""Skills: directories holding a `SKILL.md`, offered to the model by name and loaded on request.

The format is the agent-skills one: YAML front matter with `name` and `description`, then
the instructions in Markdown. The engine discovers them at boot (`skill.discover`), lists
them in the system prompt, and gives the model a `skill` tool that returns one's body.
Discovery reads the case's own files, so replay runs it live, as every boot event is; a
changed skill then shows as a changed request (a divergence), not as a stale answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .providers import ToolDef
from .tools import ToolContext, ToolOutcome

SKILL_FILE = "SKILL.md"
TOOL_NAME = "skill"
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    path: str
    """The skill's directory, relative to the skills root."""
    body: str


def discover_skills(root: Path) -> list[Skill]:
    """Every `<root>/<dir>/SKILL.md`, sorted by name; a bad one is a ConfigError naming its file."""
    if not root.is_dir():
        raise ConfigError(
            f"{root}: the skills directory named by 'skills' in input/config.yaml does not exist"
        )
    skills = [_read_skill(path, root) for path in sorted(root.glob(f"*/{SKILL_FILE}"))]
    seen: dict[str, str] = {}
    for skill in skills:
        if skill.name in seen:
            raise ConfigError(
                f"{root / skill.path / SKILL_FILE}: skill name {skill.name!r} is also the name of "
                f"{root / seen[skill.name] / SKILL_FILE}; names must be unique"
            )
        seen[skill.name] = skill.path
    return skills


def _read_skill(path: Path, root: Path) -> Skill:
    import yaml

    text = path.read_text(encoding="utf-8", errors="replace")
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise ConfigError(
            f"{path}: no front matter; a SKILL.md starts with '---', the lines 'name: ...' and "
            "'description: ...', and '---'"
        )
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{path}: front matter must be a mapping with 'name' and 'description'")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"{path}: front matter 'name' must be lowercase letters, digits and hyphens "
            f"(at most 64), got {name!r}"
        )
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(
            f"{path}: front matter 'description' must be a non-empty string, got {description!r}"
        )
    return Skill(
        name, description.strip(), path.parent.relative_to(root).as_posix(), match.group(2).strip()
    )


def skills_prompt(skills: list[Skill]) -> str:
    """What the system prompt gains: the skills by name and description, and how to load one."""
    lines = [f"- {s.name}: {s.description}" for s in skills]
    return (
        f"You have these skills; call the `{TOOL_NAME}` tool with a skill's name to read its "
        "instructions before you use it:\n" + "\n".join(lines)
    )


def discover_payload(skills: list[Skill]) -> dict[str, Any]:
    return {
        "skills": [{"name": s.name, "description": s.description, "path": s.path} for s in skills]
    }


class SkillTool:
    """Returns a skill's instructions. It reads the case's files only: it runs live in
    replay too."""

    side_effects = False
    source = "builtin"

    def __init__(self, skills: list[Skill]) -> None:
        self._skills = {s.name: s for s in skills}
        self.definition = ToolDef(
            TOOL_NAME,
            "Load a skill's instructions by its name.",
            {
                "type": "object",
                "properties": {"name": {"type": "string", "enum": sorted(self._skills)}},
                "required": ["name"],
            },
        )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        skill = self._skills.get(str(args.get("name")))
        if skill is None:
            return ToolOutcome(
                False,
                None,
                f"no skill named {args.get('name')!r} "
                f"(skills: {', '.join(self._skills) or 'none'})",
            )
        return ToolOutcome(True, {"name": skill.name, "instructions": skill.body})
