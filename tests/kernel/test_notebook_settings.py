"""What a notebook's saved session settings do in a REAL kernel (a page pushes the notebook's
sessions into it, as JupyterLab does at every kernel start):

* the model it was recorded with is never adopted where a provider would charge the user for it:
  named before the first request, with ``%agent use-recorded-model`` to switch (issue 35, item 1);
* a window it says an overflow revealed applies to that session only, named with its day, and is
  ignored below 1,024 tokens or above the model table's window (item 2);
* the settings that shape the session's budget or narrow a run come back for that session after a
  restart, said in one line; those that would spend money or widen access do not (issue 37, item 4).
"""

from __future__ import annotations

import pytest

from ipyagent.store.schema import NotebookSessions, StoredSession
from kernel_support import LiveKernel, fake_provider
from support.builders import assistant, new_session, user
from support.outputs import outputs_text

pytestmark = pytest.mark.kernel

PAGE = "jupyterlab-test"


def stored(settings: dict, name: str = "default") -> dict:
    """Notebook metadata holding one short session saved with ``settings``."""
    session = new_session(user("What is in the data?"), assistant("Three columns of measurements."))
    return NotebookSessions(name, {name: StoredSession(dict(session.header), session.leaf_id, settings,
                                                       list(session.entries))}).to_dict()


def opened(k: LiveKernel, settings: dict) -> str:
    """The page pushes the notebook's sessions, then the user loads the extension: its output."""
    k.frontend.metadata = stored(settings)
    k.push()
    loaded = k.run("%load_ext ipyagent", "load")
    assert loaded.status == "ok", outputs_text(loaded.outputs)
    return outputs_text(loaded.outputs)


def chats(server) -> list:
    return [r for r in server.requests if r.kind == "chat"]


def test_a_notebook_never_chooses_a_paid_model_where_the_user_has_none(tmp_path):
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE) as k:
        shown = opened(k, {"model": "openai:o1-pro"})
        print(shown)  # the message as the user sees it (the report quotes it)
        assert ("ipyagent: this notebook was recorded with openai:o1-pro; your settings name no model, and a "
                "notebook does not choose what you pay for — `%agent use-recorded-model` to use it, or "
                '%config Agent.model = "provider:model"') in shown.splitlines()
        refused = outputs_text(k.run("%%agent\nhi", "c1").outputs)  # IPython's UsageError, on stderr
        assert "UsageError: No model configured." in refused and \
            "This notebook was recorded with openai:o1-pro: `%agent use-recorded-model` uses it" in refused, refused
        assert not chats(server)  # nothing was sent, nothing paid

        switched = outputs_text(k.run("%agent use-recorded-model", "switch").outputs)
        assert switched.startswith("model: openai:o1-pro (recorded in this notebook")
        server.enqueue_text("Hello.")
        assert k.run("%%agent\nhi", "c2").status == "ok"
        assert chats(server)[-1].body["model"] == "o1-pro"  # the user's choice now


def test_the_users_model_wins_and_the_recorded_one_is_named_before_the_first_request(tmp_path):
    env = {"IPYAGENT_MODEL": "openai:fake-model"}
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE, env=env) as k:
        # JupyterLab: the extension may load before the page's push reaches the kernel
        assert k.run("%load_ext ipyagent", "load").status == "ok"
        k.frontend.metadata = stored({"model": "openai:o1-pro"})
        k.push()
        server.enqueue_text("Hello.")
        cell = k.run("%%agent\nhi", "c1")
        assert cell.status == "ok"
        lines = outputs_text(cell.outputs).splitlines()
        note = ("ipyagent: this notebook was recorded with openai:o1-pro; using openai:fake-model from your "
                "settings — `%agent use-recorded-model` to switch")
        assert note in lines and lines.index(note) < lines.index("Hello."), lines  # before the reply
        assert [r.body["model"] for r in chats(server)] == ["fake-model"]
        server.enqueue_text("Again.")
        again = outputs_text(k.run("%%agent\nand again", "c2").outputs)
        assert "recorded with" not in again  # said once
        # the session now saves the model it runs with
        assert k.metadata["sessions"]["default"]["settings"]["model"] == "openai:fake-model"


def test_a_window_learned_in_a_notebook_stays_in_its_session_named_and_bounded(tmp_path):
    env = {"IPYAGENT_MODEL": "openai:gpt-4.1-mini"}
    learned = {"model": "openai:gpt-4.1-mini", "window": 2500, "source": "error",
               "detail": "an overflow error named it", "learned": "2026-11-30"}
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE, env=env) as k:
        shown = opened(k, {"model": "openai:gpt-4.1-mini", "learned_window": learned})
        assert ("ipyagent: session 'default': restored from this notebook: learned window 2,500 (learned in "
                "this notebook on 2026-11-30)") in shown, shown
        status = outputs_text(k.run("%agent status", "s1").outputs)
        assert "2,500" in status and "window learned in this notebook on 2026-11-30" in status, status
        assert "overflow error" not in status

        # a new session of the user's own: the model table's window, and nothing of the notebook's saved
        k.run("%agent new mine", "new")
        status = outputs_text(k.run("%agent status", "s2").outputs)
        assert "1,047,576" in status and "window from the model table" in status, status
        server.enqueue_text("Fine.")
        assert k.run("%%agent\nhello", "c1").status == "ok"
        assert "learned_window" not in k.metadata["sessions"]["mine"]["settings"]
        assert k.metadata["sessions"]["default"]["settings"]["learned_window"]["window"] == 2500  # its own stays


@pytest.mark.parametrize("window", [1, 2_000_000])
def test_a_learned_window_below_the_floor_or_above_the_table_is_ignored(window, tmp_path):
    env = {"IPYAGENT_MODEL": "openai:gpt-4.1-mini"}
    learned = {"model": "openai:gpt-4.1-mini", "window": window, "source": "error"}
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE, env=env) as k:
        shown = opened(k, {"model": "openai:gpt-4.1-mini", "learned_window": learned})
        assert "learned window" not in shown
        status = outputs_text(k.run("%agent status", "s1").outputs)
        assert "1,047,576" in status and "window from the model table" in status, status
        server.enqueue_text("It runs.")
        cell = k.run("%%agent\nhello", "c1")
        assert cell.status == "ok" and "It runs." in outputs_text(cell.outputs)


def test_saved_settings_come_back_after_a_restart_within_their_bounds(tmp_path):
    """Issue 37, item 4: a local model (no window anywhere) run with a window and a cap set in the
    notebook; after a restart they come back for that session, said in one line; a setting that
    would widen access (tool approval) or spend more (a larger cap than the user's) does not."""
    env = {"IPYAGENT_MODEL": "openai:fake-model"}
    with fake_provider() as server, LiveKernel(cwd=str(tmp_path), frontend=PAGE, env=env) as k:
        assert k.run("%load_ext ipyagent\n%config Agent.context_window = 4096\n"
                     "%config Agent.max_tool_rounds = 4", "setup").status == "ok"
        server.enqueue_text("Noted.")
        assert k.run("%%agent\nRemember the data.", "c1").status == "ok"
        saved = k.metadata["sessions"]["default"]["settings"]
        assert saved["context_window"] == 4096 and saved["max_tool_rounds"] == 4
        saved["tool_approval"] = "auto"  # as if a shared notebook said so

        k.restart()  # the page pushes what it stored
        loaded = outputs_text(k.run("%load_ext ipyagent", "load-again").outputs)
        assert ("ipyagent: session 'default': restored from this notebook: context_window 4,096, "
                "max_tool_rounds 4; not restored (your settings win: it would spend money or widen access): "
                "tool_approval 'auto'") in loaded.splitlines(), loaded
        status = outputs_text(k.run("%agent status", "status").outputs)
        assert "/ 4,096 tokens" in status and "window restored from this notebook" in status, status
        assert "context window unknown" not in status

        for i in range(6):  # a model that would go on calling tools: the cap stops it at 4 rounds
            server.enqueue_tool_call("ls", {"path": "."}, id=f"call-{i}")
        cell = k.run("%%agent\nList the folder.", "c2")
        assert "4 tool rounds" in outputs_text(cell.outputs), outputs_text(cell.outputs)
        assert len(chats(server)) == 1 + 4
