"""Build some of the documentation's pages as the site builds them, in seconds: the real
``docs/conf.py`` (copied byte for byte) and ``docs/_ext`` (linked), the named pages, and an index
whose toctree lists them — without the teaching notebooks, which take most of a full build.

Other pages the built ones link to are not there, so only myst's missing-reference warning is
allowed; every other warning fails the build (``-W``), as in ``.ci/run``.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def build_pages(tmp: Path, pages: list[str], builder: str = "html", index: str | None = None) -> Path:
    """Build ``docs/<page>.md`` for each page into ``tmp/out`` with ``builder``; returns that folder.
    ``index`` replaces the generated index page (its text)."""
    src = tmp / "src"
    src.mkdir()
    (src / "conf.py").write_bytes((DOCS / "conf.py").read_bytes())
    (src / "_ext").symlink_to(DOCS / "_ext", target_is_directory=True)
    for page in pages:
        (src / f"{page}.md").write_text((DOCS / f"{page}.md").read_text(encoding="utf-8"), encoding="utf-8")
    if index is None:
        index = "# test\n\n```{toctree}\n" + "\n".join(pages) + "\n```\n"
    (src / "index.md").write_text(index, encoding="utf-8")
    out = tmp / "out"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder,
                             "-D", "suppress_warnings=mystnb.unknown_mime_type,myst.xref_missing",
                             str(src), str(out)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return out


def toctree_entries(page: str) -> list[str]:
    """The documents the toctrees of ``docs/<page>.md`` list, in order."""
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    out = []
    for body in re.findall(r"(?s)```\{toctree\}\n(.*?)```", text):
        out += [line.strip() for line in body.splitlines() if line.strip() and not line.startswith(":")]
    return out


class _Ids(HTMLParser):
    """The ids of the objects autodoc rendered (``<dt class="sig sig-object py" id=…>``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "dt" and "sig-object" in (found.get("class") or "").split() and found.get("id"):
            self.ids.append(str(found["id"]))


def rendered_objects(html: str) -> list[str]:
    """The full names of the Python objects a built HTML page documents."""
    parser = _Ids()
    parser.feed(html)
    return parser.ids


def page_text(page: str) -> str:
    """The text of a built HTML page's article (markup, scripts and styles dropped)."""
    body = page.split('<article class="bd-article">', 1)[-1].split("</article>", 1)[0]
    body = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", body)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))).strip()
