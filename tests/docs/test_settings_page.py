"""docs/settings.md: the settings reference generated from the ``Agent`` traitlets. Every setting
has its entry (anchor, type, default, help), and every ``Agent.NAME`` the pages mention exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.sphinx_pages import DOCS, ROOT, page_text


@pytest.fixture(scope="module")
def settings_page(reference_section: Path) -> str:
    return (reference_section / "settings.html").read_text(encoding="utf-8")


def test_every_setting_has_its_entry_with_type_default_and_help(settings_page: str):
    from ipyagent.kernel.configurable import SETTING_NAMES, AgentSettings

    assert len(SETTING_NAMES) > 25
    # the page split at each setting's anchor: [before, anchor, its entry, anchor, its entry, …]
    parts = re.split(r'<p class="rubric" id="setting-([a-z0-9-]+)">', settings_page)
    entries = {anchor: page_text(entry) for anchor, entry in zip(parts[1::2], parts[2::2], strict=True)}
    assert sorted(entries) == sorted(name.replace("_", "-") for name in SETTING_NAMES)
    traits = AgentSettings.class_traits(config=True)
    for name in SETTING_NAMES:
        helped = " ".join((traits[name].help or "").split())
        assert helped, f"Agent.{name} has no help string"
        entry = entries[name.replace("_", "-")]
        assert entry.startswith(f"Agent.{name} Type: "), entry
        assert helped in entry, name
    text = page_text(settings_page)
    assert "Type: one of 'ask', 'auto' (any case). Default: 'ask'" in text
    assert "Type: Int or None. Default: None" in text
    assert "You are a coding agent working inside a live Jupyter kernel" in text  # the system prompt, in full


def test_every_setting_the_pages_mention_exists():
    from ipyagent.kernel.configurable import SETTING_NAMES

    pages = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
    mentioned = {(page.name, name) for page in pages
                 for name in re.findall(r"\bAgent\.([a-z_]+)\b", page.read_text(encoding="utf-8"))}
    assert len(mentioned) > 20
    assert {(page, name) for page, name in mentioned if name not in SETTING_NAMES} == set()


def test_the_magics_page_points_to_the_settings_instead_of_listing_them():
    magics = (DOCS / "magics.md").read_text(encoding="utf-8")
    assert "[](settings.md)" in magics
    assert "(below)" not in magics  # its sections are the generated reference's, not hand-written ones
    assert not re.search(r"(?m)^\|", magics)  # no hand-written table repeating the generated reference
