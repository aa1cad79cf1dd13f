"""Every file a documentation page names in backticks (``agent/budget.py``, ``src/store/layout3.ts``)
exists in the repository, so a moved or renamed module cannot leave a page pointing at nothing."""

from __future__ import annotations

import re
import subprocess

from support.sphinx_pages import DOCS, ROOT

# files that are not the repository's: the user's IPython configuration, another project's module
NOT_OURS = {"ipython_config.py", "vllm/entrypoints/openai/protocol.py"}


def test_every_file_a_page_names_exists():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files = set(tracked) | {str(p.relative_to(ROOT)) for p in (ROOT / "extension").rglob("*.py")}
    missing = []
    pages = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
    for page in pages:
        for named in set(re.findall(r"`([\w./-]+\.(?:py|ts|tsx))`", page.read_text(encoding="utf-8"))) - NOT_OURS:
            if not any(f == named or f.endswith("/" + named) for f in files):
                missing.append(f"{page.name}: {named}")
    assert missing == []
