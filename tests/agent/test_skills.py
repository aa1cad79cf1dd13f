"""Agent Skills found and parsed (pure, on real folders): front matter, the nearest skill of a name
wins, the user's own skills, a skill linked out of the repository needs approval, the ``skill``
tool returns the body and the files, ``read`` opens a skill's files without asking, a link to
``/proc`` is never followed and a malformed skill is named."""

from __future__ import annotations

import os

from ipyagent.agent.skills.discovery import find_skills, split_front_matter
from ipyagent.agent.skills.tool import SkillTool, skills_text
from ipyagent.agent.tools import get_tool
from ipyagent.agent.tools.base import ToolContext


def write_skill(folder, name, description, body="Do the thing step by step.", extra=""):
    skill = folder / name
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n")
    (skill / "scripts" / "run.py").write_text("print('hi')\n")
    return skill


def test_front_matter_fields_and_body():
    fields, body = split_front_matter("---\nname: csv-clean\ndescription: >\n  Cleans CSV\n  files.\n"
                                      "license: 'MIT'\nmetadata:\n  author: x\n---\n# Body\n")
    assert fields == {"name": "csv-clean", "description": "Cleans CSV files.", "license": "MIT"}
    assert body == "# Body"
    assert split_front_matter("no front matter") == ({}, "no front matter")


def test_skills_are_found_nearest_first_with_the_users_own_last(tmp_path):
    repo, home = tmp_path / "repo", tmp_path / "home"
    (repo / ".git").mkdir(parents=True)
    work = repo / "analysis"
    write_skill(repo / ".agents" / "skills", "plots", "Plots, the repository's way.")
    write_skill(work / ".claude" / "skills", "plots", "Plots, the analysis folder's way.")
    write_skill(repo / ".pi" / "skills", "tables", "Tables.")
    write_skill(home / ".agents" / "skills", "mine", "My own skill.")
    (repo / ".agents" / "skills" / "broken").mkdir()
    (repo / ".agents" / "skills" / "broken" / "SKILL.md").write_text("no front matter")
    search = find_skills(work, home=home)
    assert [(s.name, s.description, s.origin) for s in search.skills] == [
        ("plots", "Plots, the analysis folder's way.", "project"), ("tables", "Tables.", "project"),
        ("mine", "My own skill.", "user")]
    assert [s.reason for s in search.skipped] == ["its front matter lacks a name or a description"]
    text = skills_text(search.skills)
    assert "- plots: Plots, the analysis folder's way." in text and "Do the thing" not in text


def test_a_skill_linked_out_of_the_repository_needs_approval(tmp_path):
    repo, home = tmp_path / "repo", tmp_path / "home"
    (repo / ".git").mkdir(parents=True)
    (repo / ".agents" / "skills").mkdir(parents=True)
    outside = write_skill(tmp_path / "elsewhere", "stranger", "From outside.")
    os.symlink(outside, repo / ".agents" / "skills" / "stranger")
    refused = find_skills(repo, home=home)
    assert refused.skills == () and refused.skipped[0].needs_approval and "outside" in refused.skipped[0].reason
    asked = []
    allowed = find_skills(repo, home=home, allow=lambda verdict, folder: asked.append(verdict.real) or True)
    assert [s.name for s in allowed.skills] == ["stranger"] and asked == [str(outside / "SKILL.md")]


def test_the_skill_tool_returns_the_body_and_files_and_read_opens_them(tmp_path):
    home = tmp_path / "home"
    write_skill(home / ".agents" / "skills", "mine", "My own skill.", body="Step one.\nStep two.")
    skills = find_skills(tmp_path / "nowhere", home=home).skills
    context = ToolContext(cwd=str(tmp_path), root=str(tmp_path / "project"), skills=skills,
                          readable=tuple(s.folder for s in skills))
    out = SkillTool().run({"name": "mine"}, context)
    assert "Step one.\nStep two." in out.text and "name: mine" not in out.text
    assert "- SKILL.md" in out.text and "- scripts/run.py" in out.text
    assert SkillTool().run({"name": "nope"}, context).is_error
    script = os.path.join(skills[0].folder, "scripts", "run.py")
    read = get_tool("read")
    assert read.approval_reason({"path": script}, context) is None  # inside the skill's folder: no asking
    assert read.approval_reason({"path": script}, ToolContext(cwd=str(tmp_path), root=str(tmp_path / "project")))


def test_a_link_to_proc_is_never_followed_and_a_malformed_skill_is_named(tmp_path):
    repo, home = tmp_path / "repo", tmp_path / "home"
    (repo / ".git").mkdir(parents=True)
    skills = repo / ".agents" / "skills"
    (skills / "environ").mkdir(parents=True)
    (skills / "environ" / "SKILL.md").symlink_to("/proc/self/environ")
    (skills / "plain").mkdir()
    (skills / "plain" / "SKILL.md").write_text("# no front matter, only text\n")
    write_skill(skills, "good", "Works.")
    asked = []
    found = find_skills(repo, home=home, allow=lambda verdict, folder: asked.append(verdict.real) or True)
    assert [s.name for s in found.skills] == ["good"] and asked == []  # /proc: never even asked about
    reasons = {os.path.basename(os.path.dirname(s.path)): s.reason for s in found.skipped}
    assert "never read" in reasons["environ"] and "lacks a name or a description" in reasons["plain"]
