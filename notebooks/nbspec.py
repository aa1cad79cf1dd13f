"""What a teaching notebook's spec is made of: cells (:func:`md`, :func:`code`, :func:`agent`),
the provenance note every notebook opens with, and :class:`Notebook`, one notebook with the
scripted turn of each of its ``%%agent`` cells and what the build checks once it has run.
``notebooks/specs/`` holds one spec per notebook; ``build.py`` builds them."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ipyagent.testing import FakeProviderServer
from scripted import Scripted, Turn

Cell = dict[str, Any]
# called with the executed notebook, the policy and the fake server once a build ran; raises if wrong
Check = Callable[[dict[str, Any], Scripted, FakeProviderServer], None]

AGENT_MAGIC = "%%agent"

# ---- cells -------------------------------------------------------------------------------------


def md(cell_id: str, text: str) -> Cell:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": textwrap.dedent(text).strip("\n")}


def code(cell_id: str, text: str) -> Cell:
    return {"cell_type": "code", "id": cell_id, "metadata": {}, "execution_count": None, "outputs": [],
            "source": textwrap.dedent(text).strip("\n")}


def agent(cell_id: str, turns: Mapping[str, Turn]) -> Cell:
    """The ``%%agent`` cell ``cell_id``; its prompt is that of ``turns[cell_id]``."""
    return code(cell_id, f"{AGENT_MAGIC}\n{turns[cell_id].prompt}")


def raises(cell: Cell) -> Cell:
    """A cell whose error is part of the lesson (nbclient's ``raises-exception`` tag)."""
    cell["metadata"]["tags"] = ["raises-exception"]
    return cell


_RECORDED_NOTE = textwrap.dedent("""\
    > **About the recorded responses.** The model responses stored in this notebook were produced
    > by ipyagent itself running against its fake provider (`ipyagent.testing.FakeProviderServer`)
    > with **scripted responses** (`notebooks/build.py`): the agent loop, the tools, the budget and
    > every compaction decision are ipyagent's real code, only the model's words were written in
    > advance. Without a provider configured, re-running the notebook **replays** those responses
    > offline, with no key (`ipyagent run {path} --replay`, or simply *Run All*), and recorded tool
    > calls are not run again.
    >
    > **To run it live**, configure a real provider before `%load_ext ipyagent` — e.g.
    > `export OPENAI_API_KEY=…` and `export IPYAGENT_MODEL=openai:gpt-4.1-mini`, or
    > `ANTHROPIC_API_KEY` with `anthropic:claude-sonnet-4-5`, or a local OpenAI-compatible server with
    > `OPENAI_BASE_URL=http://localhost:11434/v1` and `IPYAGENT_MODEL=openai:qwen2.5-coder` — then
    > *Restart & Run All*. A real model will say different things (and compact at different
    > moments) than the recording.""")


def provenance(title: str, intro: str) -> str:
    """The first cell's text: the title, the introduction, and how the recorded responses were made.

    Each part is dedented on its own and joined at the margin: an indented line in Markdown is a
    code block, so a template indented around an already-dedented text would show as code."""
    return f"# {title}\n\n{textwrap.dedent(intro).strip()}\n\n{_RECORDED_NOTE}"


# ---- a notebook --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Notebook:
    """One teaching notebook, written to ``notebooks/<name>.ipynb``.

    ``turns`` maps the id of each ``%%agent`` cell, in cell order, to what the model says there.
    ``files`` are written next to the notebook before it runs; ``probe`` scripts ``%agent probe``
    (an :class:`ipyagent.testing.ProbeScript`'s questions); with ``replay_after_build`` the built
    notebook is run once more without a provider (replaying), e.g. to execute the cells the agent
    inserted; ``check`` then looks at the result."""

    name: str
    cells: list[Cell]
    turns: dict[str, Turn]
    check: Check | None = None
    files: dict[str, str] = field(default_factory=dict)
    probe: list[dict[str, Any]] = field(default_factory=list)
    replay_after_build: bool = False

    def __post_init__(self) -> None:
        ids = [cell["id"] for cell in self.cells]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: cell ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
        prompted = [cell["id"] for cell in self.cells if cell["source"].startswith(AGENT_MAGIC)]
        if prompted != list(self.turns):
            raise ValueError(f"{self.name}: the %%agent cells {prompted} are not the cells of the turns "
                             f"{list(self.turns)} (in the same order)")
