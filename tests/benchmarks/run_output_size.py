"""The size of a long session's notebook as ``ipyagent run`` writes it: with the live widget views
and nbclient's saved widget state (what it wrote before issue 33, item 6), and with static views
and no widget state (what it writes now).

    python tests/benchmarks/run_output_size.py [--entries 5239] [--turns 40] [--layout 1|4] [--seed 3]

The notebook: a stored session (``tests/support/sessiongen.py``, ~2.7 KB an entry), then the
setup cell, ``--turns`` ``%%agent`` cells answered by the loopback fake provider and the
compaction explorer; the run adds its turns, so the session written holds ``--entries`` entries.
nbclient keeps the state of every widget a run ever showed (each cell's budget widget, with the
latest summary), closed or not, so the state grows with the cells. The same run is made twice in real kernels; the first keeps what
``static_views`` drops. Printed for each: the file's bytes, the widget state's, the session's
(the ``ipyagent`` metadata keys as written) and the widget views left in outputs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "extension"))
sys.path.insert(0, str(ROOT / "tests"))

import ipyagent.bridge.headless as headless
from ipyagent.store.ipynb import new_notebook, read_notebook, write_notebook, write_sessions_into_notebook
from ipyagent.store.schema import NotebookSessions
from kernel_support import SETUP, fake_provider
from support.sessiongen import generate_session

ANSWER = "It is a long scripted session; its largest results are file listings. " * 20


def cells(turns: int) -> list[str]:
    """The setup cell, ``turns`` %%agent cells, the compaction explorer."""
    return [SETUP, *(f"%%agent\nStep {i}: what does the session hold now?" for i in range(turns)),
            "%agent explore --window 200000"]


def notebook_with_session(entries: int, seed: int, layout: int, turns: int) -> dict:
    # the run adds its system message, the kernel-reset notice (the session is an earlier kernel's) and its turns
    header, stored = generate_session(seed, entries - 2 - 2 * turns)
    nb = new_notebook([{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": source} for i, source in enumerate(cells(turns))])
    sessions = NotebookSessions.from_session("default", _session(header, stored), {"model": "openai:fake-model"})
    return write_sessions_into_notebook(nb, sessions, layout)


def _session(header: dict, entries: list[dict]):
    from ipyagent.core import Session

    return Session(header, entries, entries[-1]["id"])


def measure(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    metadata = nb["metadata"]
    session = sum(len(json.dumps({k: v}, indent=1)) for k, v in metadata.items()
                  if k == "ipyagent" or k.startswith("ipyagent/"))
    views = sum(1 for c in nb["cells"] for o in c.get("outputs", [])
                if "application/vnd.jupyter.widget-view+json" in (o.get("data") or {}))
    entries = sum(1 for _ in _entries(path))
    return {"file": len(text.encode("utf-8")), "widget_state": len(json.dumps(metadata.get("widgets", {}), indent=1)),
            "session": session, "views": views, "entries": entries}


def _entries(path: Path):
    from ipyagent.store.ipynb import sessions_from_notebook

    sessions, _ = sessions_from_notebook(read_notebook(path))
    yield from sessions.sessions["default"].entries


def run(src: Path, out: Path, *, keep_widgets: bool) -> dict:
    kept = headless.static_views
    if keep_widgets:  # what the runner wrote before: the live views, nbclient's widget state
        headless.static_views = lambda nb: 0
    try:
        with fake_provider(policy=lambda body: ANSWER) as server:
            outcome = headless.run_notebook(src, out, timeout=600)
            assert server.requests
    finally:
        headless.static_views = kept
    if outcome.error:
        raise SystemExit(f"the run failed: {outcome.error}")
    return measure(out)


def mb(n: int) -> str:
    return f"{n / 1e6:6.2f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5239)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--layout", type=int, default=1, choices=[1, 4])
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "long.ipynb"
        write_notebook(src, notebook_with_session(args.entries, args.seed, args.layout, args.turns))
        rows = [("before (live views, widget state)", run(src, Path(tmp) / "before.ipynb", keep_widgets=True)),
                ("after (static views, no state)", run(src, Path(tmp) / "after.ipynb", keep_widgets=False))]
    print(f"ipyagent run of a notebook of {args.turns} %%agent cells whose session it writes in layout {args.layout}")
    print(f"{'':36} {'file':>10} {'widget state':>13} {'session':>10} {'views':>6} {'entries':>8}")
    for name, m in rows:
        print(f"{name:36} {mb(m['file'])} {mb(m['widget_state']):>13} {mb(m['session'])} {m['views']:>6} "
              f"{m['entries']:>8,}")


if __name__ == "__main__":
    main()
