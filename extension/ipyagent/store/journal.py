"""The output journal: a run's new entries, saved in one ``display_data`` output.

When no frontend bridge acknowledged the entries of a ``%%agent`` / ``%compact`` run, the run's
last output carries them (``docs/protocol.md``, "Journal"): every frontend saves outputs, and a
lifter (the labextension, ``ipyagent lift``, the headless runner, hydration from disk) merges them
into ``metadata["ipyagent"]`` by entry id, in cell order.

This module is the format (the payload and finding it in a notebook); the views people read (the
journal's Markdown table, a whole transcript) are ``display/journal_view.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ipyagent.agent.run_config import SavedSettings
from ipyagent.session import deep_json
from ipyagent.shapes import Entry, Ipynb, SessionHeader
from ipyagent.store.schema import strip_secrets

__all__ = ["JOURNAL_MIME", "journal_payload", "journal_outputs"]

JOURNAL_MIME = "application/vnd.ipyagent.entries+json"
VERSION = 1


def journal_payload(session_name: str, header: SessionHeader | None, leaf: str | None,
                    settings: SavedSettings | None, entries: list[Entry]) -> dict[str, Any]:
    """The payload stored under :data:`JOURNAL_MIME`: the session's name, header, leaf, settings
    (those that look like credentials left out) and the entries."""
    return {"version": VERSION, "session": session_name, "header": header or {},
            "leaf": leaf, "settings": strip_secrets(settings or {}), "entries": list(entries)}


def journal_outputs(nb: Ipynb, *, positions: bool = False) -> Iterator[tuple[Any, ...]]:
    """Every journal payload of ``nb`` in cell order: ``(cell_index, payload)``
    (``(cell_index, output_index, payload)`` with ``positions=True``).

    A payload is yielded as stored (a JSON string is parsed); checking it is the reader's job.
    """
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return
    for cell_index, cell in enumerate(cells):
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        if not isinstance(outputs, list):
            continue
        for output_index, output in enumerate(outputs):
            data = output.get("data") if isinstance(output, dict) else None
            if not isinstance(data, dict) or JOURNAL_MIME not in data:
                continue
            payload = data[JOURNAL_MIME]
            if isinstance(payload, list) and all(isinstance(p, str) for p in payload):
                payload = "".join(payload)  # a writer that split it into lines
            if isinstance(payload, str):
                try:
                    payload = deep_json.loads(payload)
                except ValueError:
                    pass
            yield (cell_index, output_index, payload) if positions else (cell_index, payload)
