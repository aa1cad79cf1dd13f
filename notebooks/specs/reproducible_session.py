"""The reproducible-session notebook: record (with the agent's code left as cells), export to
Pi's JSONL, import, replay. It runs two of the quickstart's prompts on the quickstart's data."""

from __future__ import annotations

import json
from typing import Any

from ipyagent.testing import FakeProviderServer
from nbspec import Notebook, agent, code, md, provenance
from scripted import Scripted

from .quickstart import ORDERS_CODE
from .quickstart import TURNS as QUICKSTART_TURNS

TURNS = {"rs-a1": QUICKSTART_TURNS["qs-orders"], "rs-a2": QUICKSTART_TURNS["qs-email"]}


def _check(nb: dict[str, Any], policy: Scripted, server: FakeProviderServer) -> None:
    text = json.dumps(nb)
    assert "same path as this kernel's session: True" in text
    ids = [c["id"] for c in nb["cells"]]
    inserted = nb["cells"][ids.index("rs-a1") + 1]
    assert "".join(inserted["source"]).startswith("# from ipyagent "), inserted


NOTEBOOK = Notebook("reproducible-session", [
    md("rs-intro", provenance("A reproducible session: record, export, import, replay", """
        Everything an ipyagent session contains — prompts, replies, tool calls and their results,
        compaction summaries — is stored in this notebook's metadata (`metadata["ipyagent"]`). That
        makes the notebook a reproducible record: it can be exported to the
        [Pi](https://github.com/badlogic/pi-mono) session format (JSONL), imported back, and
        re-executed offline by *replaying* the recorded model responses.""")),
    code("rs-setup", """
        %load_ext ipyagent
        %config Agent.tool_approval = "auto"
        %config Agent.context_window = 32_000
        # Each successful python call of the agent also becomes a code cell below its %%agent cell:
        %config Agent.code_cells = "insert"

        import json, pathlib, tempfile
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="ipyagent-demo-"))   # exports go here"""),
    md("rs-record-md", """
        ## 1. Record

        Nothing special is needed: every `%%agent` run appends its entries to the session, and the
        session is saved with the notebook. With `Agent.code_cells = "insert"` (set above), the code
        the agent runs is also left in the notebook: each successful `python` call becomes a code
        cell right below its `%%agent` cell, its first line `# from ipyagent <entry id>` naming the
        tool result it reproduces."""),
    code("rs-data", ORDERS_CODE),
    agent("rs-a1", TURNS),
    agent("rs-a2", TURNS),
    md("rs-cells-md", """
        The cell between the two `%%agent` cells is the agent's `python` call. That is what makes
        *Restart & Run All* rebuild the namespace even without a provider: the `%%agent` cells
        replay their recorded responses **without** running their tool calls, and the inserted cell
        runs the code. This notebook was saved right after such a run (built live, then *Restart &
        Run All* without a provider), so its `%%agent` cells say that they replayed. `spent` was
        created by the agent:"""),
    code("rs-cells", """
        spent   # defined again by the inserted cell, also when the %%agent cells replay"""),
    md("rs-tree-md", """
        Each entry has an id and a parent: the session is a tree (re-running an earlier `%%agent`
        cell starts a branch from before that cell's prompt). The `*` marks the current path;
        `[cell N]` is the execution count of the cell that sent the prompt:"""),
    code("rs-tree", "%agent tree"),
    md("rs-export-md", """
        ## 2. Export to Pi's JSONL

        `%agent export` writes the active session as a Pi v3 session file: a header line, then one
        entry per line. Notebook facts (the cell id, the execution count) ride along in extra fields
        that Pi ignores. From a shell, the same without a kernel:
        `ipyagent export reproducible-session.ipynb --format pi -o session.jsonl`
        (or `--format markdown` for a readable transcript)."""),
    code("rs-export", """
        %agent export -o {workdir}/session.jsonl
        for line in (workdir / "session.jsonl").read_text().splitlines()[1:]:
            entry = json.loads(line)
            message = entry.get("message", {})
            print(entry["id"], entry["type"], message.get("role", ""), message.get("toolName", ""))"""),
    md("rs-inspect-md", """
        `ipyagent inspect FILE` reads a Pi session file (or a notebook) and reports what is in it. The
        command-line tool can also be called from Python, as here:"""),
    code("rs-inspect", """
        from ipyagent import cli

        cli.main(["inspect", str(workdir / "session.jsonl")])   # = ipyagent inspect …/session.jsonl"""),
    md("rs-import-md", """
        ## 3. Import

        A Pi session file becomes a session again — in Python with `Session.from_file`, in this
        kernel with `%agent import FILE --name NAME`, or into a notebook's metadata from a shell with
        `ipyagent import session.jsonl NOTEBOOK.ipynb --session NAME`. Ids and parents survive the
        round trip:"""),
    code("rs-import", """
        from ipyagent import Session
        from ipyagent.kernel.extension import get_runtime

        imported = Session.from_file(workdir / "session.jsonl")
        here = get_runtime(get_ipython()).slot().session
        print(f"imported {len(imported)} entries; same path as this kernel's session:",
              [e["id"] for e in imported.path()] == [e["id"] for e in here.path()])"""),
    code("rs-import-cli", """
        cli.main(["import", str(workdir / "session.jsonl"), str(workdir / "copy.ipynb"), "--session", "imported"])
        copy = Session.from_file(workdir / "copy.ipynb", session="imported")
        print(len(copy), "entries in copy.ipynb; last reply:", copy.path()[-1]["message"]["content"][0]["text"][:60], "…")"""),
    md("rs-replay-md", """
        ## 4. Replay

        Re-executing this notebook with no provider configured replays it: each `%%agent` cell takes
        its model responses from the entries recorded for that cell (matched by cell id), recorded
        tool calls are not run again, and everything else — the budget, the compaction trigger, the
        cut point — runs for real. The result is the same session.

        * `ipyagent run reproducible-session.ipynb --replay -o out.ipynb` — from a shell, no key needed
          (add `--replay-tools` to run the recorded tool calls again and report differences);
        * `%agent replay on|off|auto` — in a kernel; `Agent.replay = "auto"` (the default) replays only
          when no provider is configured, so with a key set the notebook runs live;
        * if a run departs from the recording (an edited prompt, another cut point), the cell says
          where, and continues live when a provider is configured."""),
    code("rs-replay", "%agent replay status"),
], TURNS, check=_check, replay_after_build=True)
