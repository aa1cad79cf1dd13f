"""The ``recall`` tool: searching what compactions summarised away, never what is in context.

The needle test runs the real agent loop against the fake provider (real HTTP): 8 needles over 40
turns, at least 4 automatic compactions, then a scripted model is asked for each needle; it
answers from its context when the needle is there and calls ``recall`` when it is not.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ipyagent.agent import run_events as ev
from ipyagent.agent.loop import AgentLoop
from ipyagent.agent.run_config import RunConfig
from ipyagent.agent.tools import ToolContext, default_tools, get_tool
from ipyagent.agent.tools.builtin.recall import EXCERPT_CHARS, MAX_EXCERPTS
from ipyagent.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer
from ipyagent.core import Session
from ipyagent.hooks import HookRegistry
from ipyagent.session.messages import COMPACTION_SUMMARY_PREFIX
from ipyagent.testing import FakeProviderServer, Reply, ToolCallSpec
from ipyagent.testing.accounting import default_summary_detector
from support.builders import assistant, call, new_session, tool_result
from support.builders import user as _user

RECALL = get_tool("recall")
KEEP = CompactionSettings(keep_recent_tokens=60)


def user(text: str, **extra: Any) -> dict:
    return {**_user(text), **extra}


def recall(session: Session, **arguments: Any):
    return RECALL.run(arguments, ToolContext(history=session))


def summarizer() -> ScriptedSummarizer:
    return ScriptedSummarizer(fn=lambda request: "## Goal\nwork" if request.kind == "history" else "prefix")


def compacted_session() -> Session:
    s = new_session()
    s.append_message(user("Load the sales table and tell me the region totals.", executionCount=4))
    s.append_message(assistant("Loading.", call("c1", "python", code="sales = load('sales.csv')\nsales.shape")))
    s.append_message(tool_result("c1", "(1200, 7)\n" + "row data\n" * 40 + "TOTAL north=4410 south=3920", name="python"))
    s.append_message(assistant("North sold 4410 units and south 3920."))
    s.append_message(user("Which file did the config come from?", executionCount=5))
    s.append_message(assistant("", call("c2", "bash", command="cat settings/prod.toml")))
    s.append_message(tool_result("c2", "cat: settings/prod.toml: No such file or directory", name="bash", is_error=True))
    s.append_message(assistant("The config file settings/prod.toml does not exist. " + "x" * 300))
    s.append_message(user("Now the weekly chart please.", executionCount=6))
    s.append_message(assistant("Here is the weekly chart. " + "y" * 300))
    s.compact(summarizer(), KEEP)
    return s


# ---- what it returns ---------------------------------------------------------------------------


def test_recall_is_a_read_only_builtin_with_a_description_that_promises_exact_details():
    assert "recall" in [t.name for t in default_tools()] and RECALL.read_only
    assert "word for word" in RECALL.description and "summary" in RECALL.description
    # the summary the model reads keeps Pi's wrapper text
    assert COMPACTION_SUMMARY_PREFIX.startswith("The conversation history before this point was compacted")


def test_before_any_compaction_there_is_nothing_to_recall():
    s = new_session(user("hello"), assistant("hi"))
    out = recall(s, query="hello")
    assert not out.is_error and "Nothing has been summarised away" in out.text


def test_query_returns_excerpts_with_entry_id_role_and_cell():
    s = compacted_session()
    hidden = {e["id"] for e in s.summarized_entries()}
    assert hidden and not hidden & set(s.context_state().entry_ids)
    out = recall(s, query="north 4410")
    assert not out.is_error
    [first, *_] = out.details["entryIds"]
    assert first in hidden
    header = out.text.splitlines()[0]
    assert re.fullmatch(r"\[entry [0-9a-f]{8} · (assistant|toolResult python) · cell 4\]", header), header
    assert "4410" in out.text
    # the words may come in any order; a regex works too; both only hit summarised entries
    assert set(recall(s, query="4410 NORTH").details["entryIds"]) <= hidden
    regex = recall(s, query=r"south=\d+")
    assert "south=3920" in regex.text and set(regex.details["entryIds"]) <= hidden
    error = recall(s, query="prod.toml")
    assert "toolResult bash (error)" in error.text and "cell 5" in error.text


def test_excerpts_are_short_and_at_most_a_handful():
    s = new_session()
    for i in range(12):
        s.append_message(user(f"marker {i} " + "filler " * 200))
        s.append_message(assistant(f"seen marker {i} " + "z" * 900))
    s.compact(summarizer(), KEEP)
    out = recall(s, query="marker")
    assert len(out.details["entryIds"]) == MAX_EXCERPTS and out.details["matches"] > MAX_EXCERPTS
    assert "more matching entries" in out.text
    for block in out.text.split("\n\n(")[0].split("\n\n[entry ")[1:]:
        body = block.split("\n", 1)[1]
        assert len(body) <= EXCERPT_CHARS + 2  # plus the two ellipses


def test_entry_id_returns_one_entry_in_full_and_refuses_what_is_in_context():
    s = compacted_session()
    hidden = s.summarized_entries()
    result = next(e for e in hidden if e["type"] == "message" and e["message"]["role"] == "toolResult")
    out = recall(s, entry_id=result["id"])
    assert not out.is_error and "TOTAL north=4410 south=3920" in out.text and out.text.count("row data") == 40
    assert recall(s, query=result["id"]).text == out.text  # an id as the query works the same
    # a tool call comes back with its result: the code that made a variable, and what it printed
    call_entry = next(e for e in hidden if e["type"] == "message" and e["message"]["role"] == "assistant")
    with_result = recall(s, entry_id=call_entry["id"])
    assert "sales = load('sales.csv')" in with_result.text and "TOTAL north=4410" in with_result.text
    assert f"[entry {result['id']} · toolResult python · cell 4]" in with_result.text
    assert with_result.details["entryIds"] == [call_entry["id"], result["id"]]
    kept = s.context_state().entry_ids[-1]
    refused = recall(s, entry_id=kept)
    assert refused.is_error and "in your context already" in refused.text
    assert recall(s, entry_id="00000000").is_error
    assert recall(s).is_error  # neither query nor entry_id


def test_a_huge_entry_stays_within_the_tool_limits_and_continues_with_offset():
    s = new_session()
    s.append_message(user("dump it"))
    s.append_message(assistant("", call("c1", "python", code="print(big)")))
    s.append_message(tool_result("c1", "\n".join(f"line {i} " + "w" * 60 for i in range(5000)), name="python"))
    s.append_message(assistant("done " + "x" * 400))
    s.append_message(user("next " + "y" * 400))
    s.append_message(assistant("ok " + "z" * 400))
    s.compact(summarizer(), KEEP)
    entry_id = s.summarized_entries()[2]["id"]
    first = recall(s, entry_id=entry_id)
    assert len(first.text.encode()) <= DEFAULT_MAX_BYTES and len(first.text.splitlines()) <= DEFAULT_MAX_LINES
    offset = int(re.search(r"Use offset=(\d+) to continue", first.text).group(1))
    second = recall(s, entry_id=entry_id, offset=offset)
    assert second.text.splitlines()[1].startswith(f"line {offset - 1} ")  # the entry's lines count from 1
    assert len(second.text.encode()) <= DEFAULT_MAX_BYTES


def test_other_branches_are_never_searched():
    s = compacted_session()
    s.branch(s.path()[2]["id"])
    s.append_message(assistant("a branch that says ELEPHANT " + "q" * 500))
    assert "ELEPHANT" not in recall(s, query="ELEPHANT").text  # no compaction on this path
    assert "Nothing has been summarised away" in recall(s, query="ELEPHANT").text


# ---- needles -----------------------------------------------------------------------------------

NEEDLES = {k: f"{word}-{4000 + 37 * k}" for k, word in
           enumerate(["ZEBRA", "KIWI", "MAPLE", "OTTER", "QUARTZ", "FJORD", "ORBIT", "TULIP"])}
PLANT_TURNS = {2 + 5 * k: k for k in range(8)}  # turn index -> needle
NEEDLE_RE = re.compile(r"\b[A-Z]{4,6}-\d{4}\b")


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [b.get("text", "") for b in content if isinstance(b, dict)]
        for c in m.get("tool_calls") or []:
            out.append(c["function"]["arguments"])
    return out


class NeedleModel:
    """The scripted model. Work turns: plant needles (in the prompt, or with a python call that
    binds ``vault_K``), pad the conversation. Questions: answer from the context if the needle is
    there; otherwise recall it (by the ledger's entry id for a variable, by words otherwise)."""

    def __init__(self) -> None:
        self.recalled: list[int] = []
        self.answered_from_context: list[int] = []

    def __call__(self, body: dict[str, Any]) -> Reply | None:
        if default_summary_detector(body):
            return None  # the server's stock summary: it knows nothing of the needles
        messages = body["messages"]
        last_user = next(m for m in reversed(messages) if m["role"] == "user")
        prompt = last_user["content"] if isinstance(last_user["content"], str) else _texts([last_user])[0]
        asked = re.match(r"What is the code of vault (\d)\?", prompt)
        if not asked:
            return self._work(prompt, messages)
        k = int(asked.group(1))
        after = messages[messages.index(last_user) + 1:]
        recalled = " ".join(m["content"] for m in after if m["role"] == "tool")
        if recalled:
            found = [n for n in NEEDLE_RE.findall(recalled) if n.startswith(NEEDLES[k].split("-")[0])]
            return Reply(text=f"The code of vault {k} is {found[0] if found else 'unknown'}.")
        before = " ".join(_texts(messages[:messages.index(last_user)]))
        if NEEDLES[k] in before:
            self.answered_from_context.append(k)
            return Reply(text=f"The code of vault {k} is {NEEDLES[k]}.")
        self.recalled.append(k)
        entry = re.search(rf"vault_{k}\b[^\n]*\[entry ([0-9a-f]{{8}})\]", before)
        arguments = {"entry_id": entry.group(1)} if entry else {"query": f"vault {k} code"}
        return Reply(tool_calls=[ToolCallSpec("recall", arguments, f"recall_{k}_{len(messages)}")])

    @staticmethod
    def _work(prompt: str, messages: list[dict[str, Any]]) -> Reply:
        if messages[-1]["role"] == "tool":
            return Reply(text="Stored. " + "Noted the details of this step. " * 6)
        match = re.search(r"Store vault (\d) as a variable", prompt)
        if match:
            k = int(match.group(1))
            return Reply(tool_calls=[ToolCallSpec("python", {"code": f"vault_{k} = {NEEDLES[k]!r}"}, f"py_{k}")])
        return Reply(text="Understood. " + "I have looked at this step carefully and noted it. " * 5)


def _prompt(turn: int) -> str:
    k = PLANT_TURNS.get(turn)
    if k is None:
        return f"Step {turn}: carry on with the analysis. " + "Some more context about the data. " * 4
    if k % 2:
        return f"Step {turn}: Store vault {k} as a variable, please."
    return f"Step {turn}: for later, the code of vault {k} is {NEEDLES[k]}. " + "Keep it safe. " * 3


def test_needles_come_back_through_recall_after_many_compactions():
    model = NeedleModel()
    with FakeProviderServer(policy=model) as server:
        server.register("fake")
        session = Session(hooks=HookRegistry())
        config = RunConfig(model="fake:needle-model", context_window=3200,
                           compaction=CompactionSettings(reserve_tokens=800, keep_recent_tokens=300),
                           tool_approval="auto")
        namespace: dict[str, Any] = {}
        agent = AgentLoop(session, config=config, namespace=namespace, sleep=lambda s: None, providers=server.providers)
        in_context_at_call: dict[str, set[str]] = {}
        results: list[dict[str, Any]] = []

        def watch(event: Any) -> None:
            if isinstance(event, ev.ToolExecutionStart) and event.name == "recall":
                in_context_at_call[event.call_id] = set(session.context_state().entry_ids)
            if isinstance(event, ev.ToolExecutionEnd) and event.name == "recall":
                results.append(event.result)

        agent.subscribe(watch)
        for turn in range(40):
            result = agent.prompt(_prompt(turn))
            assert result.error is None, result.error
        assert len(session.compactions()) >= 4, len(session.compactions())
        assert [r for r in server.requests if r.outcome != "reply"] == []
        answers = {}
        for k in range(8):
            result = agent.prompt(f"What is the code of vault {k}?")
            assert result.error is None, result.error
            answers[k] = result.text
    correct = [k for k, text in answers.items() if NEEDLES[k] in text]
    assert correct == list(range(8)), answers
    assert model.recalled, "every needle was still in context: the test proves nothing"
    assert sorted(model.recalled + model.answered_from_context) == list(range(8))
    assert any(k % 2 for k in model.recalled) and any(k % 2 == 0 for k in model.recalled)  # both ways
    assert len(results) == len(model.recalled)
    for message in results:
        text = message["content"][0]["text"]
        assert not message["isError"], text
        assert len(text.encode()) <= DEFAULT_MAX_BYTES and len(text.splitlines()) <= DEFAULT_MAX_LINES
        returned = set(message["details"]["entryIds"])  # excerpts' entries, or an entry with its calls' results
        assert returned and not returned & in_context_at_call[message["toolCallId"]], "recall returned an entry in context"
        assert all(session.get(i) is not None for i in returned)
    assert json.dumps(session.entries).count("vault_1") >= 1
