"""The pages say what ipyagent does; what it did, and what changed, is in CHANGELOG.md."""

from __future__ import annotations

import re

from support.sphinx_pages import DOCS

# the words that tell a story of versions rather than what is true now
HISTORY = re.compile(r"(?i)\bused to\b|\bno longer\b|\bearlier versions?\b|\bolder versions?\b|\bnow does\b"
                     r"|\bfrom before this\b|\bformerly\b|\bany ?more\b")


def test_no_page_tells_history():
    told = [f"{page.name}:{number}: {line.strip()}"
            for page in sorted(DOCS.glob("*.md")) if page.name != "changelog.md"
            for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if HISTORY.search(line)]
    assert told == [], "history belongs in CHANGELOG.md (Unreleased)"
