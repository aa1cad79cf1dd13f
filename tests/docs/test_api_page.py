"""docs/api.md: autodoc of the public API only. Every name the page lists exists, the built page
documents exactly those names (a listed member without a docstring, or one that is not listed,
fails), and nothing private — a name with a leading underscore — shows in a signature or a
parameter list."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from support.sphinx_pages import DOCS, rendered_objects

DIRECTIVE = re.compile(r"^\.\. auto(?:class|function|data):: (\S+)\n((?:   :\w[\w-]*:.*\n)*)", re.M)
PRIVATE = re.compile(r"(?<![\w.])_[A-Za-z]\w*|\._[A-Za-z]\w*")


def listed() -> dict[str, list[str]]:
    """Each object api.md documents, with the members its ``:members:`` option names."""
    out = {}
    for name, options in DIRECTIVE.findall((DOCS / "api.md").read_text(encoding="utf-8")):
        members = re.search(r":members:(.*)", options)
        out[name] = [m.strip() for m in members.group(1).split(",") if m.strip()] if members else []
    return out


def resolve(dotted: str) -> object:
    """The object at ``dotted`` (a module's attribute, as autodoc imports it)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(dotted)


@pytest.fixture(scope="module")
def api_page(reference_section: Path) -> str:
    return (reference_section / "api.html").read_text(encoding="utf-8")


def test_every_name_the_page_lists_exists_and_is_public():
    names = listed()
    assert len(names) > 10 and sum(map(len, names.values())) > 20
    for name, members in names.items():
        obj = resolve(name)
        assert not any(part.startswith("_") for part in name.split(".")), name
        for member in members:
            assert not member.startswith("_"), f"{name}.{member}"
            assert hasattr(obj, member), f"docs/api.md lists {name}.{member}, which does not exist"
    assert {"ipyagent.Session", "ipyagent.AgentLoop", "ipyagent.CompactionSettings"} <= set(names)


def test_the_built_page_documents_exactly_the_listed_names(api_page: str):
    expected = {name for name in listed()} | {f"{name}.{m}" for name, ms in listed().items() for m in ms}
    rendered = rendered_objects(api_page)
    assert len(rendered) == len(set(rendered))
    assert set(rendered) - expected == set(), "rendered, not listed in docs/api.md"
    assert expected - set(rendered) == set(), "listed in docs/api.md, not rendered (a docstring missing?)"


def test_nothing_private_shows_in_a_signature_or_a_parameter_list(api_page: str):
    parts = re.findall(r'(?s)<dt class="sig[^"]*"[^>]*>.*?</dt>|<dl class="field-list[^"]*">.*?</dl>', api_page)
    assert len(parts) > 20
    text = re.sub(r"<[^>]+>", "", "\n".join(parts))
    assert PRIVATE.findall(text) == []
