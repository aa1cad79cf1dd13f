"""Hydration from disk: finding the kernel's notebook, reading its sessions, the reset notice."""

from __future__ import annotations

import json

from ipyagent.core import Session
from ipyagent.display.journal_view import journal_bundle
from ipyagent.session.intake import MAX_ENTRY_CHARS
from ipyagent.store import hydration
from ipyagent.store.hydration import (
    RESET_CUSTOM_TYPE,
    RESET_NOTICE,
    find_notebook_path,
    hydrate_from_disk,
    kernel_reset_entry,
)
from ipyagent.store.ipynb import new_notebook, write_notebook, write_sessions_into_notebook
from ipyagent.store.schema import NotebookSessions, StoredSession
from support.builders import chain

HEADER = {"type": "session", "version": 3, "id": "3f0c2b9e-0000-4000-a000-000000000002",
          "timestamp": "2026-01-01T00:00:00.000Z", "cwd": ""}


def notebook(tmp_path, name="nb.ipynb", entries=None, journal=None):
    nb = new_notebook()
    if entries is not None:
        sessions = NotebookSessions("default", {"default": StoredSession(HEADER, entries[-1]["id"], {}, entries)})
        write_sessions_into_notebook(nb, sessions)
    if journal is not None:
        data, meta = journal_bundle("default", HEADER, journal[-1]["id"], {}, journal)
        nb["cells"][0]["outputs"] = [{"output_type": "display_data", "data": data, "metadata": meta}]
    path = tmp_path / name
    write_notebook(path, nb)
    return path


# ---- where is the notebook -----------------------------------------------------------------------


def test_discovery_order(tmp_path):
    explicit, session, env, vsc = (notebook(tmp_path, f"{n}.ipynb") for n in ("explicit", "session", "env", "vsc"))
    ns = {"__session__": str(session), "__vsc_ipynb_file__": str(vsc)}
    environ = {"JPY_SESSION_NAME": str(env)}
    assert find_notebook_path(ns, environ, explicit=str(explicit)) == (explicit, "explicit")
    assert find_notebook_path(ns, environ) == (session, "__session__")
    assert find_notebook_path({"__vsc_ipynb_file__": str(vsc)}, environ) == (env, "JPY_SESSION_NAME")
    assert find_notebook_path({"__vsc_ipynb_file__": str(vsc)}, {}) == (vsc, "__vsc_ipynb_file__")
    assert find_notebook_path({}, {}) == (None, "none")
    assert find_notebook_path(None, {}) == (None, "none")


def test_discovery_skips_consoles_and_missing_files(tmp_path):
    real = notebook(tmp_path, "real.ipynb")
    ns = {"__session__": str(tmp_path / "console-1-8d3c"), "__vsc_ipynb_file__": str(real)}
    environ = {"JPY_SESSION_NAME": str(tmp_path / "renamed-away.ipynb")}  # stale after a rename
    assert find_notebook_path(ns, environ) == (real, "__vsc_ipynb_file__")
    assert find_notebook_path({"__session__": 42}, {"JPY_SESSION_NAME": ""}) == (None, "none")


def test_a_server_relative_path_is_found_in_the_kernels_folder(tmp_path, monkeypatch):
    notebook(tmp_path, "nb.ipynb")
    monkeypatch.chdir(tmp_path)
    path, source = find_notebook_path({}, {"JPY_SESSION_NAME": "projects/sub/nb.ipynb"})
    assert source == "JPY_SESSION_NAME" and path.resolve() == (tmp_path / "nb.ipynb").resolve()


def test_an_explicit_path_is_taken_as_given(tmp_path):
    target = tmp_path / "not-yet.ipynb"
    assert find_notebook_path({"__session__": str(notebook(tmp_path))}, {}, explicit=target) == (target, "explicit")
    assert find_notebook_path({}, {}, explicit="  ")[1] == "none"


def test_in_jupyterlite_the_notebook_holding_the_running_cell_is_found(tmp_path, monkeypatch):
    """JupyterLite's Pyodide kernel sets no ``__session__`` and runs in the notebook's folder under
    ``/drive``: the notebook there that holds the running cell is the kernel's (issue 36)."""
    monkeypatch.setattr(hydration, "DRIVE", str(tmp_path))  # the drive's mount point, here
    folder = tmp_path / "lessons"
    folder.mkdir()
    tour, other = notebook(folder, "tour.ipynb"), notebook(folder, "other.ipynb")
    running = json.loads(tour.read_text())["cells"][0]["id"]
    assert running != json.loads(other.read_text())["cells"][0]["id"]
    (folder / "broken.ipynb").write_text("{not json")
    assert find_notebook_path({}, {}, cell_id=running, cwd=str(folder)) == (tour, "/drive")
    assert find_notebook_path({}, {}, cell_id="no-such-cell", cwd=str(folder)) == (None, "none")
    assert find_notebook_path({}, {}, cwd=str(folder)) == (None, "none")  # no cell id: nothing to go by
    # outside the drive (a CPython kernel's folder) the cell id alone is never used
    monkeypatch.setattr(hydration, "DRIVE", str(tmp_path / "elsewhere"))
    assert find_notebook_path({}, {}, cell_id=running, cwd=str(folder)) == (None, "none")


# ---- reading it ----------------------------------------------------------------------------------


def test_hydrate_merges_metadata_and_journal(tmp_path):
    path = notebook(tmp_path, entries=chain(3), journal=chain(2, 3, "00000002"))
    sessions, report = hydrate_from_disk(path)
    assert report.ok, report.summary()
    stored = sessions.sessions["default"]
    assert [e["id"] for e in stored.entries] == [f"{i:08x}" for i in range(5)]
    assert stored.leaf == "00000004"
    session = sessions.to_session()
    assert session.load_report is report and len(session.path()) == 5


def test_hydrate_reports_missing_and_broken_files_without_raising(tmp_path):
    sessions, report = hydrate_from_disk(tmp_path / "gone.ipynb")
    assert sessions.sessions == {} and "no such notebook" in report.summary()
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [], "metadata": {"ipyagent": ')
    sessions, report = hydrate_from_disk(bad)
    assert sessions.sessions == {} and "not valid JSON" in report.summary()
    binary = tmp_path / "bin.ipynb"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    sessions, report = hydrate_from_disk(binary)
    assert sessions.sessions == {} and "cannot read" in report.summary()


def test_hydrate_sets_aside_an_enormous_entry_in_a_big_file(tmp_path):
    entries = chain(3)
    entries[2]["message"]["content"] = "y" * (MAX_ENTRY_CHARS + 10)
    path = notebook(tmp_path, entries=entries)
    sessions, report = hydrate_from_disk(path)
    assert "over the 5,000,000 limit" in report.summary()
    assert [e["id"] for e in sessions.sessions["default"].entries] == ["00000000", "00000001"]
    assert sessions.set_aside[0]["raw"]["id"] == "00000002"
    assert sessions.sessions["default"].leaf == "00000001"  # the stored leaf was set aside: reported
    assert "leaf '00000002' is not among the loaded entries" in report.summary()


def test_hydrate_never_executes_hostile_metadata(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.ipynb"
    nb = new_notebook()
    nb["metadata"]["ipyagent"] = f"__import__('os').system('touch {marker}')"
    path.write_text(json.dumps(nb))
    sessions, report = hydrate_from_disk(path)
    assert not marker.exists()
    assert sessions.sessions == {} and "must be a JSON object, not str" in report.summary()


# ---- the reset notice ----------------------------------------------------------------------------


def test_kernel_reset_entry_reaches_the_model_but_not_the_display():
    entry = kernel_reset_entry()
    assert entry == {"type": "custom_message", "customType": RESET_CUSTOM_TYPE, "content": RESET_NOTICE,
                     "display": False}
    assert "namespace was reset" in RESET_NOTICE
    session = Session(dict(HEADER), chain(2))
    appended = session.append(kernel_reset_entry())
    assert appended["parentId"] == "00000001"
    last = session.build_context()[-1]
    assert last["role"] == "user" and RESET_NOTICE in json.dumps(last)
    assert kernel_reset_entry() is not kernel_reset_entry()  # a fresh dict each time
