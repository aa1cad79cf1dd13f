"""Installing from source on a machine without Node.js: the package builds without the JupyterLab
bridge and says so in one warning line (no traceback); the journal outputs keep the sessions.
With Node.js the build is unchanged (``.ci/run``'s ``pip install -e .`` builds the bridge, and the
browser tests use it)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NODE_TOOLS = {"node", "nodejs", "npm", "npx", "corepack", "yarn", "yarnpkg"}


def _path_without_node(tmp_path: Path) -> str:
    """A PATH with every program of the current one except Node.js and its package managers."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            target = os.path.join(directory, name)
            if name in NODE_TOOLS or (bin_dir / name).exists() or not os.access(target, os.X_OK):
                continue
            (bin_dir / name).symlink_to(target)
    return str(bin_dir)


def _bridge_build():
    spec = importlib.util.spec_from_file_location("bridge_build", ROOT / "extension" / "frontend" / "bridge_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_node_the_build_step_warns_in_one_line_and_builds_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", _path_without_node(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert shutil.which("node") is None
    _bridge_build().build("wheel", "standard", path="extension/frontend", build_dir="out", source_dir="src")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Node.js not found" in err and "without" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # pip sets up an isolated build environment (hatchling and the builder) first
def test_pip_wheel_without_node_builds_a_wheel_without_the_bridge(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "extension", src / "extension", ignore=shutil.ignore_patterns(
        "node_modules", "lib", "labextension", "__pycache__", ".yarn", "tsconfig.tsbuildinfo"))
    env = dict(os.environ, PATH=_path_without_node(tmp_path), PIP_DISABLE_PIP_VERSION_CHECK="1")
    log = tmp_path / "pip.log"
    with log.open("w") as sink:
        result = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path / "dist"),
                                 str(src)], env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=600)
    text = log.read_text()
    assert result.returncode == 0, text[-3000:]
    assert "Traceback" not in text
    warnings = [line for line in text.splitlines() if "Node.js not found" in line]
    assert len(warnings) == 1, warnings
    wheel = next((tmp_path / "dist").glob("ipyagent-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "ipyagent/store/journal.py" in names
    assert not [n for n in names if n.endswith("labextensions/ipyagent-bridge/package.json")]


def test_what_the_readme_says_about_httpx2_is_true():
    """genai-prices imports httpx2 with its price data: the README and docs must not give keeping httpx2 out
    of the kernel as what the MCP extra's pin buys (issue 28, item 11)."""
    loaded = subprocess.run(
        [sys.executable, "-c", ("import sys\nfrom ipyagent.providers import pricing\n"
                                "pricing.calculate('openai', 'gpt-4o', {'input': 10, 'output': 5})\n"
                                "print('httpx2' in sys.modules)")],
        capture_output=True, text=True, check=True).stdout.strip()
    readme = " ".join(" ".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
                      .split())
    assert loaded == "True"  # if this changes, so must the README
    assert "a second HTTP stack in every kernel" not in readme
    assert "genai-prices (every release since 0.0.6x) depends on `httpx2` and imports it" in readme


def test_a_virtual_environment_in_the_checkout_is_ignored():
    lines = (ROOT / ".gitignore").read_text().splitlines()
    assert ".venv/" in lines


# ---- the markers for the browser (issue 36) ------------------------------------------------------

BROWSER_LESS = {"ipykernel", "nbclient", "nbformat", "nh3", "orjson", "regex"}  # no WebAssembly wheel on PyPI


def _requirements():
    import tomllib
    from packaging.requirements import Requirement

    return [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]


def _environment(platform: str) -> dict[str, str]:
    from packaging.markers import default_environment

    return {**default_environment(), "sys_platform": platform, "platform_system": platform.capitalize()}


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_off_the_browser_every_dependency_is_installed_as_before(platform):
    kept = {r.name for r in _requirements() if r.marker is None or r.marker.evaluate(_environment(platform))}
    assert kept == {r.name for r in _requirements()}
    assert BROWSER_LESS <= kept


def test_in_the_browser_what_has_no_webassembly_wheel_is_left_out():
    left_out = {r.name for r in _requirements() if r.marker is not None and not r.marker.evaluate(_environment("emscripten"))}
    assert left_out == BROWSER_LESS


def test_the_lab_extra_has_notebook_7():
    # issue 37, item 12: the README's `pip install "ipyagent[lab]"` opened notebooks in JupyterLab
    # only, though the bridge works in Notebook 7 too
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(spec.startswith("notebook>=7") for spec in extras["lab"]), extras["lab"]
