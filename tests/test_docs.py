"""The front door and the documentation: the README stays short and starts with what a newcomer
needs, the generated reference pages list every command and option the parsers accept, the
diagrams are what their script draws, and the command line's help fits one screen. The generated
reference pages are checked in tests/docs.

The whole site is built by ``.ci/run`` (``python -m sphinx -W --keep-going -b html docs …``)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import ipyagent

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = ["getting-started", "models", "magics", "settings", "architecture", "compaction", "memory", "mcp-skills", "storage", "replay",
         "security", "cli", "api", "performance", "pi-differences", "extending", "contributing"]


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 220
    first = "\n".join(lines[:100])
    for needed in ("pip install ipyagent", "IPYAGENT_MODEL=", "OPENAI_BASE_URL=", "%load_ext ipyagent", "%%agent",
                   "%compact", "bash .ci/run",
                   "pip install . && ipyagent run notebooks/how-compaction-works.ipynb -o how-compaction-works.run.ipynb"):
        assert needed in first, needed
    readme = "\n".join(lines)
    # JupyterLab, to open the tour's output, is one extra away (pip install . does not bring it)
    assert 'pip install ".[lab]"' in readme and "jupyter lab how-compaction-works.run.ipynb" in readme
    assert re.search(r'(?m)^lab = \["jupyterlab>=4', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", "\n".join(lines)):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_every_page_exists():
    """(Which toctree lists each page: tests/docs/test_doc_sections.py.)"""
    for page in PAGES:
        assert (DOCS / f"{page}.md").is_file(), page


def test_the_diagrams_are_what_their_script_draws():
    figures = _module(DOCS / "images" / "make_figures.py", "make_figures")
    assert set(figures.FIGURES) == {"budget-cut.svg", "cell-path.svg", "entry-flow.svg"}
    for name, draw in figures.FIGURES.items():
        committed = (DOCS / "images" / name).read_text(encoding="utf-8")
        assert committed == draw(), f"docs/images/{name} is stale: python docs/images/make_figures.py"
    reserve, keep = 8_000, 9_765  # the 32,000-token window's scaled budgets
    assert f"reserve {reserve:,}, kept tail {keep:,}" in (DOCS / "images" / "budget-cut.svg").read_text()


def test_the_version_comes_from_one_place():
    package = json.loads((ROOT / "extension" / "frontend" / "package.json").read_text(encoding="utf-8"))
    assert package["version"] == ipyagent.__version__
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and not re.search(r'(?m)^version = "', pyproject)
    assert f"## {ipyagent.__version__}" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_python_m_ipyagent_and_ipyagent_agree_and_the_help_fits_one_screen():
    env = dict(os.environ, COLUMNS="80")
    by_module = subprocess.run([sys.executable, "-m", "ipyagent", "--help"], capture_output=True, text=True, env=env,
                               timeout=60)
    script = Path(sys.executable).with_name("ipyagent")
    by_script = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert by_module.returncode == by_script.returncode == 0, by_module.stderr + by_script.stderr
    assert by_module.stdout == by_script.stdout
    lines = by_module.stdout.splitlines()
    assert len(lines) <= 24 and max(map(len, lines)) <= 80, by_module.stdout
    assert lines[0].startswith("usage: ipyagent ")
    version = subprocess.run([sys.executable, "-m", "ipyagent", "--version"], capture_output=True, text=True,
                             timeout=60)
    assert version.stdout.strip() == f"ipyagent {ipyagent.__version__}"
