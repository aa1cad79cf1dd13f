"""The Python store reads each shared layout vector (tests/store/vectors, tests/support/layout_vectors.py)
as expected — the labextension's store is held to the same vectors with jest
(extension/frontend/src/__tests__/layoutVectors.spec.ts) — and the full reader and a rewrite by the command line
lose nothing of them."""

from __future__ import annotations

import copy

import pytest

from ipyagent.store.chunks import assemble, chunk_keys, layout_of, stray_keys
from ipyagent.store.ipynb import new_notebook, sessions_from_notebook, write_sessions_into_notebook
from support.layout_vectors import check, loaded, reading, vectors

VECTORS = vectors()


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_the_python_store_reads_the_vector(name):
    vector = VECTORS[name]
    metadata = copy.deepcopy(vector["metadata"])
    assert layout_of(metadata) == vector["expect"]["layout"]
    check(vector, reading(assemble(metadata)))
    assert metadata == vector["metadata"]  # reading changes nothing


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_the_full_reader_and_a_rewrite_lose_nothing(name):
    vector = VECTORS[name]
    nb = new_notebook()
    nb["metadata"].update(copy.deepcopy(vector["metadata"]))
    sessions, _ = sessions_from_notebook(nb)
    for session in vector["expect"]["sessions"]:
        assert [e["id"] for e in sessions.sessions[session].entries] == loaded(vector, session)
    write_sessions_into_notebook(nb, sessions)
    metadata = nb["metadata"]
    again, _ = sessions_from_notebook(nb)
    for session in vector["expect"]["sessions"]:
        assert [e["id"] for e in again.sessions[session].entries] == loaded(vector, session)
    if vector["expect"]["layout"] > 1:
        # what was set aside is under the index's set_aside now, and a stray key's value with it
        kept = {item.get("where") for item in metadata["ipyagent"].get("set_aside", [])}
        assert {item["where"] for item in vector["expect"]["set_aside"]} <= kept
        assert stray_keys(metadata) == []
        assert chunk_keys(metadata) == [f"ipyagent/{i:06d}" for i in range(len(chunk_keys(metadata)))]
