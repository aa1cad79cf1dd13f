"""The teaching notebooks in ``notebooks/`` run offline: ``ipyagent run NB --replay`` with no
provider configured, no key and no network, in a real kernel. Each must finish without an error
output, produce every cell's outputs again, and reproduce the committed session (roles, texts,
tool calls, summaries) from its recording. The committed files must hold no API key.

Rebuild the notebooks (live, against the scripted fake provider) with ``python notebooks/build.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ipyagent.store.chunks import assemble

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
EXPECTED = {"quickstart.ipynb", "how-compaction-works.ipynb", "custom-compaction.ipynb",
            "reproducible-session.ipynb"}
PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENROUTER_API_KEY",
                "DEEPSEEK_API_KEY", "GROQ_API_KEY", "IPYAGENT_MODEL", "IPYAGENT_REPLAY", "JPY_SESSION_NAME")
BUILD_KEY = "fake-key-ipyagent-notebooks"  # the key notebooks/build.py gives the kernel
JOURNAL_MIME = "application/vnd.ipyagent.entries+json"


def _run(args: list[str], log: Path) -> subprocess.CompletedProcess:
    with log.open("w") as sink:  # a file, not a pipe: a lingering kernel would hold a pipe open
        return subprocess.run([sys.executable, "-m", "ipyagent", "run", *args, "--timeout", "60"], env=_offline_env(),
                              stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600)


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    # any attempt to reach a provider or the network fails at once instead of hanging
    env.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    return env


def _path(session: dict[str, Any]) -> list[dict[str, Any]]:
    by_id = {e["id"]: e for e in session["entries"]}
    out, entry = [], by_id.get(session.get("leaf"))
    while entry is not None:
        out.append(entry)
        entry = by_id.get(entry.get("parentId"))
    return out[::-1]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def _shape(entry: dict[str, Any]) -> tuple:
    """What replay must reproduce of an entry (not ids, timestamps or usage). Of a prompt: what
    the user typed, and whether a notebook-activity block came with it — the block itself
    describes the kernel's state, which a replay reproduces only in part (recorded tool calls are
    not run again, so the variables they made are missing)."""
    if entry["type"] == "message":
        message = entry["message"]
        calls = [(b.get("name"), json.dumps(b.get("arguments"), sort_keys=True))
                 for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
        text = _text(message.get("content"))
        if message.get("role") == "user":
            text = (message.get("cellPrompt", text), "<notebook-activity>" in text)
        return ("message", message.get("role"), text, calls, message.get("toolName"), message.get("cellId"))
    if entry["type"] == "compaction":
        # the artifact ledger names the entries it came from, and a replay makes new ids
        return ("compaction", re.sub(r"\[entry [0-9a-f]{8}\]", "[entry]", entry.get("summary", "")),
                bool(entry.get("fromHook")))
    if entry["type"] == "custom":
        data = dict(entry.get("data") or {})
        data.pop("compaction_id", None)  # a probe names the compaction it probed, and a replay makes new ids
        return ("custom", entry.get("customType"), json.dumps(data, sort_keys=True))
    if entry["type"] == "branch_summary":
        return ("branch_summary", entry.get("summary"))
    return (entry["type"],)


def _raises(cell: dict[str, Any]) -> bool:
    return "raises-exception" in (cell.get("metadata") or {}).get("tags", [])


def _sessions(nb: dict[str, Any]) -> dict[str, list[tuple]]:
    meta = assemble(nb["metadata"]) or {}  # `ipyagent run` writes layout 3; the committed ones are layout 1
    return {name: [_shape(e) for e in _path(s)] for name, s in (meta.get("sessions") or {}).items()}


def _outputs_text(cell: dict[str, Any]) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append("".join(output["text"]) if isinstance(output["text"], list) else output["text"])
        for value in (output.get("data") or {}).values():
            if isinstance(value, (str, list)):
                parts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(parts)


def test_the_teaching_notebooks_are_all_there():
    assert EXPECTED <= {p.name for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_first_markdown_cell_opens_with_the_title_and_renders_no_code_block(path):
    """An indented line in Markdown is a code block: the first page once showed its title and
    introduction as code. CommonMark (markdown-it) must see a title, then prose."""
    from markdown_it import MarkdownIt

    first = next(c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown")
    text = "".join(first["source"])
    assert text.startswith("# ")
    tokens = MarkdownIt("commonmark").parse(text)
    assert (tokens[0].type, tokens[0].tag) == ("heading_open", "h1")
    assert [t.type for t in tokens if t.type in ("code_block", "fence")] == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_executed_and_holds_no_key(path):
    raw = path.read_text(encoding="utf-8")
    assert BUILD_KEY not in raw
    for needle in ("Authorization", "authorization", "Bearer ", "x-api-key", "sk-ant-api", "127.0.0.1:"):
        assert needle not in raw, f"{needle!r} in {path.name}"
    nb = json.loads(raw)
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    sessions = nb["metadata"]["ipyagent"]["sessions"]
    assert sessions and all(s["entries"] for s in sessions.values())
    first = nb["cells"][0]
    assert first["cell_type"] == "markdown" and "scripted responses" in "".join(first["source"])
    ids = [c.get("id") for c in nb["cells"]]
    assert len(set(ids)) == len(ids) and all(ids)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["execution_count"] is not None, cell["source"]
            if not _raises(cell):
                assert not [o for o in cell["outputs"] if o["output_type"] == "error"], cell["source"]
            # the session is in the metadata: no journal output ("kept in this output until
            # `ipyagent lift`") and no widget view whose model died with the build's kernel
            for output in cell["outputs"]:
                assert JOURNAL_MIME not in output.get("data", {}), cell["source"]
                assert "application/vnd.jupyter.widget-view+json" not in output.get("data", {}), cell["source"]


@pytest.mark.kernel
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_replays_offline(path, tmp_path):
    out = tmp_path / path.name
    log = tmp_path / "run.log"
    result = _run([str(path), "--replay", "-o", str(out)], log)
    assert result.returncode == 0, log.read_text()
    committed = json.loads(path.read_text(encoding="utf-8"))
    replayed = json.loads(out.read_text(encoding="utf-8"))

    assert len(replayed["cells"]) == len(committed["cells"])
    for before, after in zip(committed["cells"], replayed["cells"]):
        assert before["id"] == after["id"]
        if after["cell_type"] != "code":
            continue
        source = "".join(after["source"])
        errors = [o for o in after["outputs"] if o["output_type"] == "error"]
        assert bool(errors) == _raises(after), source  # only a cell whose error is the lesson raises
        if before["outputs"]:
            assert after["outputs"], f"no outputs from {source!r}"
        shown = _outputs_text(after)
        for bad in ("diverged", "ipyagent failed", "Model error", "Compaction failed"):
            assert bad not in shown, f"{bad!r} in the outputs of {source!r}:\n{shown}"
        if source.startswith("%%agent"):
            assert "Replaying this cell's recorded responses" in shown, source

    recorded, reproduced = _sessions(committed), _sessions(replayed)
    assert set(reproduced) == set(recorded)
    for name, shapes in recorded.items():
        assert reproduced[name] == shapes, f"session {name!r} of {path.name} was not reproduced"
    assert BUILD_KEY not in out.read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.kernel
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_running_a_notebook_twice_leaves_its_session_byte_identical(path, tmp_path):
    """Replay is idempotent: every replayed cell reproduces its recording, so it moves along the
    recorded entries (same ids, same leaf) and the session is not copied into a second branch.
    The first run is ``--replay``; the second the README's plain command (no key: it replays)."""
    first, second = tmp_path / "first.ipynb", tmp_path / "second.ipynb"
    log = tmp_path / "run.log"
    result = _run([str(path), "--replay", "-o", str(first)], log)
    assert result.returncode == 0, log.read_text()
    result = _run([str(first), "-o", str(second)], log)
    assert result.returncode == 0, log.read_text()

    def stored(nb_path: Path) -> str:
        return json.dumps(assemble(json.loads(nb_path.read_text(encoding="utf-8"))["metadata"]), sort_keys=True)

    committed = stored(path)
    assert stored(first) == committed
    assert stored(second) == committed
