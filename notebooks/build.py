"""Rebuild the teaching notebooks: write their cells, run them against ipyagent's fake provider with
scripted responses, and leave each executed notebook (outputs + its recorded session in
``metadata["ipyagent"]``) next to this script.

    python notebooks/build.py                      # all notebooks
    python notebooks/build.py how-compaction-works # one (name without .ipynb)
    python notebooks/build.py --check              # build into a temp dir, change nothing
    python notebooks/build.py --out-dir DIR        # build into DIR

The notebooks' cells and the model's scripted words are in ``specs/`` (one module per notebook,
made of the cells and turns of ``nbspec.py`` and ``scripted.py``).

How it works: a :class:`~ipyagent.testing.FakeProviderServer` runs in this process with a policy
(``scripted.Scripted``) that reads each request and answers like a model would — assistant text,
``python`` / ``read`` / ``bash`` tool calls, and, for summariser requests, a structured six-section
summary built from what the request's ``<conversation>`` (and ``<previous-summary>``, and
``Additional focus:``) contain. A real kernel executes the notebook (``ipyagent.bridge.headless``,
which is what ``ipyagent run NOTEBOOK -o OUT`` does) with ``OPENAI_BASE_URL`` pointing at the fake
server, ``OPENAI_API_KEY`` set to a fake key that the server demands, and
``IPYAGENT_MODEL=openai:scripted-model``. Everything the agent does in the kernel (tools, budget,
compaction) is ipyagent's real code; only the model's words are scripted. The notebooks then
replay offline: ``ipyagent run NB --replay``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from ipyagent.testing import FakeProviderServer
from nbspec import Notebook
from scripted import Scripted
from specs import NOTEBOOKS

HERE = Path(__file__).resolve().parent
MODEL = "openai:scripted-model"
FAKE_KEY = "fake-key-ipyagent-notebooks"  # the kernel's OPENAI_API_KEY, which the fake server demands
WORK_PARENT = "/tmp"  # where each notebook runs (in a fresh directory; see build)


def build(spec: Notebook, out_dir: Path, *, timeout: int = 120) -> Path:
    from ipyagent.bridge.headless import execute_notebook, kernel_environment
    from ipyagent.store.ipynb import new_notebook, write_notebook

    nb = new_notebook(spec.cells)
    nb["metadata"]["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb["metadata"]["language_info"] = {"name": "python"}
    for cell in nb["cells"]:
        cell["source"] = cell["source"].replace("{path}", f"notebooks/{spec.name}.ipynb")
    policy = Scripted(spec.turns, spec.probe)
    # Nothing of the caller's provider settings reaches the kernels: only the fake server.
    unset = dict.fromkeys(("OPENAI_BASE_URL", "OPENAI_API_KEY", "IPYAGENT_MODEL", "JPY_SESSION_NAME",
                           "IPYAGENT_REPLAY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"))
    # The server answers only requests that carry "Authorization: Bearer <FAKE_KEY>" (others get a
    # 401). The work dir's path is in the system prompt, so its length is in every token count: the
    # same parent on every machine (whatever TMPDIR says) keeps the recorded usage and cuts the same.
    with tempfile.TemporaryDirectory(dir=WORK_PARENT) as work, \
            FakeProviderServer(policy=policy, api_key=FAKE_KEY) as server:
        for name, text in spec.files.items():
            (Path(work) / name).write_text(text, encoding="utf-8")
        with kernel_environment(**{**unset, "OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": FAKE_KEY,
                            "IPYAGENT_MODEL": MODEL}):
            outcome = execute_notebook(nb, timeout=timeout, cwd=work)
        if spec.replay_after_build and not outcome.error:
            calls = len(server.requests)
            with kernel_environment(**{**unset, "IPYAGENT_REPLAY": "on"}):
                outcome = execute_notebook(outcome.nb, timeout=timeout, cwd=work)
            assert len(server.requests) == calls, f"{spec.name}: the replay reached the provider"
        refused = [r.path for r in server.requests if r.outcome == "fault:status:401"]
        if refused:
            raise SystemExit(f"{spec.name}: {len(refused)} requests without 'Authorization: Bearer <FAKE_KEY>' "
                             f"were refused: {refused}")
        if outcome.error:
            raise SystemExit(f"{spec.name}: a cell failed:\n{outcome.error}")
        if policy.unanswered:
            raise SystemExit(f"{spec.name}: requests without a scripted answer: {policy.unanswered}")
        if spec.check:
            spec.check(outcome.nb, policy, server)
        report = [f"{r.kind}:{r.outcome}" for r in server.requests]
        out = _without_work_dir(outcome.nb, work)
    _scrub(out)
    path = out_dir / f"{spec.name}.ipynb"
    write_notebook(path, out)
    print(f"built {path.name}: {len(report)} requests ({sum(1 for r in report if r.startswith('summary'))} summaries), "
          f"{len(out['metadata']['ipyagent']['sessions'])} session(s)")
    return path


def _drop_journals(nb: dict[str, Any]) -> int:
    """Remove journal outputs, once their entries are in the metadata (the runner stored them
    there); a journal holding an entry the metadata lacks stops the build. Returns how many."""
    from ipyagent.store.journal import JOURNAL_MIME, journal_outputs

    stored = {e["id"] for s in nb["metadata"].get("ipyagent", {}).get("sessions", {}).values() for e in s["entries"]}
    for cell_index, payload in journal_outputs(nb):
        missing = [e.get("id") for e in payload.get("entries", []) if e.get("id") not in stored]
        if missing:
            raise SystemExit(f"cell {cell_index + 1}: journal entries missing from the metadata: {missing}")
    dropped = 0
    for cell in nb["cells"]:
        kept = [o for o in cell.get("outputs", []) if JOURNAL_MIME not in (o.get("data") or {})]
        dropped += len(cell.get("outputs", [])) - len(kept)
        if "outputs" in cell:
            cell["outputs"] = kept
    return dropped


def _without_work_dir(nb: dict[str, Any], work: str) -> dict[str, Any]:
    """The recorded sessions with the random name of the build's work dir (in the system prompt's
    environment section) replaced by a fixed one of the same length, so every build records the
    same prompt (and the same token counts)."""
    name = Path(work).name
    fixed = str(Path(work).with_name(("work" + "-" * len(name))[:len(name)]))
    sessions = nb["metadata"].get("ipyagent", {}).get("sessions")
    if sessions:
        nb["metadata"]["ipyagent"]["sessions"] = json.loads(json.dumps(sessions).replace(work, fixed))
    return nb


def _scrub(nb: dict[str, Any]) -> None:
    """Make the saved notebook machine-independent and readable without a kernel."""
    from ipyagent.bridge.headless import static_views

    text = json.dumps(nb)
    for needle in (FAKE_KEY, "Bearer "):
        if needle in text:
            raise SystemExit(f"{needle!r} in the notebook")
    # The session is in the metadata: a journal output ("kept in this output until `ipyagent
    # lift`") would only be noise for a reader (the runner answers the bridge, so there is none
    # unless a run went unacknowledged).
    _drop_journals(nb)
    for cell in nb["cells"]:
        cell.get("metadata", {}).pop("execution", None)
    # The live budget widget's model dies with the kernel: the runner kept the static HTML /
    # Markdown views and no widget state (what every `ipyagent run` writes), checked here.
    if static_views(nb):
        raise SystemExit("execute_notebook left a widget view in the notebook")
    for session in nb["metadata"].get("ipyagent", {}).get("sessions", {}).values():
        session.get("header", {})["cwd"] = ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="notebooks to build (default: all)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--check", action="store_true", help="build into a temporary directory only")
    where.add_argument("--out-dir", type=Path, help="write the notebooks into this directory instead")
    args = parser.parse_args(argv)
    chosen = [n for n in NOTEBOOKS if not args.names or n.name in args.names]
    if args.names and len(chosen) != len(args.names):
        known = ", ".join(n.name for n in NOTEBOOKS)
        parser.error(f"unknown notebook; known: {known}")
    out_dir = Path(tempfile.mkdtemp()) if args.check else args.out_dir or HERE
    out_dir.mkdir(parents=True, exist_ok=True)
    for spec in chosen:
        build(spec, out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
