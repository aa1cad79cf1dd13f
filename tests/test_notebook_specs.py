"""Each committed teaching notebook is what its spec builds: ``notebooks/build.py NAME`` (a real
kernel against the scripted fake provider, as ``python notebooks/build.py`` is run) rebuilds it in
a temporary directory, and the rebuilt notebook's session (``metadata["ipyagent"]``: every entry,
compaction summaries, cut points, usage, settings, the leaf) and its cells' sources equal the
committed ones.

Not byte for byte: a build is not deterministic in its ids and clocks. Entry and session ids are
random (UUIDs), so are the ids of the tool calls the probe's scripted answers make and the fake
server's response ids; timestamps are the wall clock. Those are compared by position: each id is
replaced by the place of its first appearance, timestamps are left out. Everything else must be
equal, including every token count the provider reported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# build.py runs each notebook in a real kernel (nbclient, a grandchild the audit hook of
# support/markers.py cannot see): marked by hand
pytestmark = pytest.mark.kernel

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
RANDOM_IDS = re.compile(r"\bcall_[0-9a-f]{16,24}\b|\bchatcmpl-[0-9a-f]{12}\b")  # made by the fake server
UNTIMED = ("timestamp",)


def _build(name: str, out_dir: Path) -> Path:
    log = out_dir / "build.log"
    with log.open("w") as sink:  # a file, not a pipe: a lingering kernel would hold a pipe open
        result = subprocess.run([sys.executable, str(NOTEBOOKS_DIR / "build.py"), name, "--out-dir", str(out_dir)],
                                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600,
                                check=False)
    assert result.returncode == 0, log.read_text()
    return out_dir / f"{name}.ipynb"


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in UNTIMED}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _by_position(nb: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The session without timestamps and the cells' (type, source), each random id replaced by
    the place of its first appearance (entries in the order they were appended)."""
    meta = nb["metadata"]["ipyagent"]
    places: dict[str, str] = {}
    for name, session in meta["sessions"].items():
        places[session["header"]["id"]] = f"<session {name}>"
        for entry in session["entries"]:
            places[entry["id"]] = f"<entry {len(places)}>"
    cells = [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]
    text = json.dumps([_untimed(meta), cells], sort_keys=True, ensure_ascii=False)
    for found in RANDOM_IDS.findall(text):
        places.setdefault(found, f"<id {len(places)}>")
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, places)) + r")\b")
    session, cells = json.loads(pattern.sub(lambda m: places[m.group(1)], text))
    return session, [tuple(c) for c in cells]


def _first_difference(rebuilt: list[Any], committed: list[Any]) -> str:
    for n, (new, old) in enumerate(zip(rebuilt, committed)):
        if new != old:
            return (f"item {n} differs:\n  rebuilt:   {json.dumps(new, ensure_ascii=False)[:1500]}\n"
                    f"  committed: {json.dumps(old, ensure_ascii=False)[:1500]}")
    return f"{len(rebuilt)} items rebuilt, {len(committed)} committed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_spec_rebuilds_the_committed_notebook(path: Path, tmp_path: Path) -> None:
    committed_session, committed_cells = _by_position(json.loads(path.read_text(encoding="utf-8")))
    rebuilt_session, rebuilt_cells = _by_position(json.loads(_build(path.stem, tmp_path).read_text(encoding="utf-8")))

    assert rebuilt_cells == committed_cells, _first_difference(rebuilt_cells, committed_cells)
    assert set(rebuilt_session["sessions"]) == set(committed_session["sessions"])
    for name, committed in committed_session["sessions"].items():
        rebuilt = rebuilt_session["sessions"][name]
        assert committed["entries"], f"session {name!r} of {path.name} is empty"
        assert rebuilt["entries"] == committed["entries"], _first_difference(rebuilt["entries"], committed["entries"])
    assert rebuilt_session == committed_session  # and the rest: headers, leaves, settings
