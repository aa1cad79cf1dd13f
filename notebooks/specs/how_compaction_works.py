"""The guided tour of compaction (``how-compaction-works``): a 4,900-token window that a handful
of prompts fill, an automatic compaction, the cut point, the summary, an update of it, a split
turn, ``recall`` and the prompt cache. The figures in the scripted answers are computed here from
the toy data the notebook defines, so what the "model" says matches what its tool calls printed."""

from __future__ import annotations

import json
import re
import statistics
from typing import Any

from ipyagent.testing import FakeProviderServer
from nbspec import Notebook, agent, code, md, provenance
from scripted import Scripted, Step, Turn

# ---- toy data (plain lists and dicts; no pandas) --------------------------------------------------

READINGS_CODE = """
# Ten days of readings from four weather stations (plain Python: a list of dicts).
stations = ["Bergen", "Oslo", "Tromsø", "Stavanger"]
readings = []
for day in range(1, 11):
    for i, station in enumerate(stations):
        temp = round(6.0 + (2.5, 4.0, -1.5, 3.0)[i] + ((day * 7 + i * 3) % 5) * 0.6 - day * 0.2, 1)
        rain = round(((day * 5 + i * 11) % 9) * (2.4 if station == "Bergen" else 1.1), 1)
        readings.append({"station": station, "day": day, "temp_c": temp, "rain_mm": rain})
readings[26]["temp_c"] = 19.5   # Tromsø, day 7: a sensor glitch
readings[9]["rain_mm"] = 85.0   # Oslo, day 3: a cloudburst
print(len(readings), "readings, e.g.", readings[0])
"""

_ns: dict[str, Any] = {}
# the notebook's own cell, run here too (without its print): the figures below are the kernel's
exec(READINGS_CODE.replace("print(", "(lambda *a, **k: None)("), _ns)  # noqa: S102
STATIONS: list[str] = _ns["stations"]
READINGS: list[dict[str, Any]] = _ns["readings"]


def _of(station: str, key: str) -> list[float]:
    return [r[key] for r in READINGS if r["station"] == station]


MEAN = {s: round(statistics.mean(_of(s, "temp_c")), 2) for s in STATIONS}
RAIN = {s: round(sum(_of(s, "rain_mm")), 1) for s in STATIONS}
SD = {s: round(statistics.stdev(_of(s, "temp_c")), 2) for s in STATIONS}
CLEAN_TROMSO = round(statistics.mean([t for t in _of("Tromsø", "temp_c") if t != 19.5]), 2)
COLDEST = min(READINGS, key=lambda r: r["temp_c"])

PRINT_STATION = "for r in readings:\n    if r['station'] == {s!r}:\n        print(r)"
OSLO_RAIN = sorted(_of("Oslo", "rain_mm"))

# ---- what the model says in each %%agent cell -----------------------------------------------------


def _recall_oslo(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What a model reading the summary's ledger would do: recall the entry that made ``oslo``."""
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        found = re.search(r"\boslo: [^\n]*\[entry ([0-9a-f]{8})\]", text)
        if found:
            return {"entry_id": found.group(1)}
    return {"query": "oslo rain_mm sorted"}


TURNS = {
    "tour-a1": Turn(
        "Have a look at `readings`: what is in it?",
        [Step("Let me inspect it.", [("python", {"code": (
            "print(type(readings).__name__, len(readings))\n"
            "for r in readings:\n"
            "    print(r)\n"
            "sorted({r['station'] for r in readings}), sorted({r['day'] for r in readings})")})]),
         Step(f"`readings` is a list of {len(READINGS)} dicts with keys `station`, `day`, `temp_c` and `rain_mm`: "
              f"{len(STATIONS)} stations ({', '.join(STATIONS)}) × 10 days.")],
        goal="Explore the weather readings in `readings` (4 stations × 10 days).",
        done=["Inspected `readings`: 40 dicts with station, day, temp_c, rain_mm"],
        context=["`readings`: list of dicts {station, day, temp_c, rain_mm}; stations Bergen, Oslo, Tromsø, Stavanger"]),
    "tour-a2": Turn(
        "Average temperature and total rain per station, please.",
        [Step("Computing per-station statistics.", [("python", {"code": (
            "import statistics\n"
            "for s in stations:\n"
            "    temps = [r['temp_c'] for r in readings if r['station'] == s]\n"
            "    rain = [r['rain_mm'] for r in readings if r['station'] == s]\n"
            "    print(f'{s:10} mean {statistics.mean(temps):5.2f} °C  sd {statistics.stdev(temps):4.2f}  "
            "rain {sum(rain):6.1f} mm')")})]),
         Step("| station | mean °C | total rain (mm) |\n|---|---:|---:|\n"
              + "\n".join(f"| {s} | {MEAN[s]:.2f} | {RAIN[s]:.1f} |" for s in STATIONS)
              + f"\n\nTromsø's spread is unusually large (sd {SD['Tromsø']:.2f} °C against about 1 °C elsewhere) — "
                "worth a closer look.")],
        goal="Summarise temperature and rain per station.",
        done=["Per-station mean temperature and total rain: " + ", ".join(
            f"{s} {MEAN[s]:.2f} °C / {RAIN[s]:.1f} mm" for s in STATIONS)],
        context=[f"Tromsø temperature sd {SD['Tromsø']:.2f} °C vs ~1 °C at the other stations"],
        details=["Standard deviations: " + ", ".join(f"{s} {SD[s]:.2f}" for s in STATIONS)]),
    "tour-a3": Turn(
        "Show me all ten Tromsø readings.",
        [Step("", [("python", {"code": PRINT_STATION.format(s="Tromsø")})]),
         Step("Day 7 stands out: **19.5 °C**, while every other Tromsø day is between 3 and 7 °C. "
              "That looks like a sensor glitch rather than weather.")],
        done=["Listed the Tromsø readings; day 7 reads 19.5 °C (others 3–7 °C)"],
        decisions=["**Tromsø day 7 (19.5 °C) is suspect**: far outside the station's other days"],
        context=["Suspect value: Tromsø day 7, temp_c 19.5 (readings[26])"],
        details=["Tromsø temp_c by day 1–10: " + ", ".join(str(t) for t in _of("Tromsø", "temp_c"))]),
    "tour-a4": Turn(
        "Check every station for outliers: readings more than 2 standard deviations from that station's mean, "
        "for temperature and for rain.",
        [Step("I'll apply the 2-sd rule per station and per measure.", [("python", {"code": (
            "import statistics\n"
            "flagged = []\n"
            "for s in stations:\n"
            "    rows = [r for r in readings if r['station'] == s]\n"
            "    for key in ('temp_c', 'rain_mm'):\n"
            "        values = [r[key] for r in rows]\n"
            "        mean, sd = statistics.mean(values), statistics.stdev(values)\n"
            "        for r in rows:\n"
            "            if abs(r[key] - mean) > 2 * sd:\n"
            "                flagged.append((s, r['day'], key, r[key], round(mean, 2), round(sd, 2)))\n"
            "for f in flagged:\n"
            "    print(f)")})]),
         Step("Two readings break the 2-sd rule:\n\n"
              "* **Tromsø, day 7, temp_c = 19.5** (station mean 6.24, sd 4.75)\n"
              "* **Oslo, day 3, rain_mm = 85.0** (a cloudburst, or a stuck gauge)\n\n"
              "Everything else is within 2 sd. The list is in `flagged`.")],
        goal="Find outliers with a 2-standard-deviation rule per station.",
        constraints=["Outlier rule: more than 2 sd from the station's own mean, per measure (temp_c, rain_mm)"],
        done=["Ran the 2-sd outlier check: flagged Tromsø day 7 temp_c 19.5 and Oslo day 3 rain_mm 85.0"],
        decisions=["**2-sd rule per station and per measure**: stations have very different climates"],
        context=["`flagged` holds (station, day, key, value, mean, sd) tuples"],
        details=["Tromsø day 7 flagged with mean 6.24, sd 4.75 (the outlier inflates the sd)"],
        next=["Decide what to do with the two flagged readings."]),
    "tour-a5": Turn(
        "Is Oslo's 85 mm of rain on day 3 plausible?",
        [Step("Let me compare it with Oslo's other days.", [("python", {"code": (
            "oslo = sorted(r['rain_mm'] for r in readings if r['station'] == 'Oslo')\n"
            "print(oslo)\n"
            "print('without day 3:', round(sum(oslo[:-1]) / 9, 1), 'mm/day on average')")})]),
         Step("It is possible but extreme: the other nine Oslo days have at most 8.8 mm. 85 mm in a day happens "
              "in a cloudburst, so I would **keep it but mark it**, unlike the Tromsø temperature, which is "
              "physically implausible next to its neighbours.")],
        done=["Checked Oslo day 3 rain (85 mm vs ≤ 8.8 mm on other days)"],
        decisions=["**Keep Oslo day 3 (85 mm) but mark it**: extreme but physically possible"],
        next=["Remove the Tromsø day-7 reading and recompute Tromsø's mean."]),
    "tour-a6": Turn(
        "Remove the Tromsø day-7 reading and recompute Tromsø's mean temperature.",
        [Step("", [("python", {"code": (
            "clean = [r for r in readings if not (r['station'] == 'Tromsø' and r['day'] == 7)]\n"
            "t = [r['temp_c'] for r in clean if r['station'] == 'Tromsø']\n"
            "len(clean), round(sum(t) / len(t), 2)")})]),
         Step(f"Done: `clean` has {len(READINGS) - 1} readings. Without the glitch, Tromsø's mean temperature is "
              f"**{CLEAN_TROMSO:.2f} °C** (it was {MEAN['Tromsø']:.2f} °C with it).")],
        done=[(f"Built `clean` (39 readings, without Tromsø day 7); Tromsø mean {CLEAN_TROMSO:.2f} °C "
               f"(was {MEAN['Tromsø']:.2f})")],
        decisions=["**Drop Tromsø day 7**: a sensor glitch"],
        context=["`clean` = readings without Tromsø day 7 (39 rows)"],
        details=[f"Tromsø mean without day 7: {CLEAN_TROMSO:.2f} °C"],
        next=["Report the cleaned per-station statistics."]),
    "tour-a7": Turn(
        "Go through the stations one at a time: for each, print its clean readings sorted by temperature. "
        "Then tell me the coldest reading overall.",
        [Step("Starting with Bergen.", [("python", {"code": (
            "for r in sorted((r for r in clean if r['station'] == 'Bergen'), key=lambda r: r['temp_c']):\n"
            "    print(r)")})]),
         Step("Now Oslo.", [("python", {"code": (
             "for r in sorted((r for r in clean if r['station'] == 'Oslo'), key=lambda r: r['temp_c']):\n"
             "    print(r)")})]),
         Step("Now Tromsø.", [("python", {"code": (
             "for r in sorted((r for r in clean if r['station'] == 'Tromsø'), key=lambda r: r['temp_c']):\n"
             "    print(r)")})]),
         Step("And Stavanger.", [("python", {"code": (
             "for r in sorted((r for r in clean if r['station'] == 'Stavanger'), key=lambda r: r['temp_c']):\n"
             "    print(r)")})]),
         Step(f"The coldest reading overall is **{COLDEST['station']}, day {COLDEST['day']}: "
              f"{COLDEST['temp_c']} °C**. Each station's list is above, coldest first.")],
        goal="List each station's clean readings and find the coldest one.",
        done=["Printed each station's clean readings sorted by temperature"],
        context=[f"Coldest clean reading: {COLDEST['station']} day {COLDEST['day']}, {COLDEST['temp_c']} °C"],
        next=["Wait for the user's next request."]),
    "tour-a8": Turn(
        "What were Oslo's ten daily rain amounts, exactly? Sorted is fine.",
        [Step("The summary only keeps Oslo's day 3. The exact list was printed by an earlier tool call that was "
              "summarised away; the summary's ledger says `oslo` was made in that entry, so I'll recall it.",
              [("recall", _recall_oslo)]),
         Step(f"Oslo's ten days, sorted (mm): {', '.join(str(v) for v in OSLO_RAIN)}. Without day 3 they average "
              f"{round(sum(OSLO_RAIN[:-1]) / 9, 1)} mm a day, so day 3's 85 mm stands alone.")],
        done=["Recalled Oslo's exact daily rain (sorted): " + ", ".join(str(v) for v in OSLO_RAIN)]),
}


def _check(nb: dict[str, Any], policy: Scripted, server: FakeProviderServer) -> None:
    session = nb["metadata"]["ipyagent"]["sessions"]["default"]
    compactions = [e for e in session["entries"] if e["type"] == "compaction"]
    assert len(compactions) >= 3, f"expected 3 compactions, got {len(compactions)}: {policy.summary_kinds}"
    assert "update" in policy.summary_kinds and "turn_prefix" in policy.summary_kinds, policy.summary_kinds
    assert any("Turn Context (split turn)" in c["summary"] for c in compactions)
    recalled = [e["message"] for e in session["entries"] if e["type"] == "message"
                and e["message"].get("role") == "toolResult" and e["message"].get("toolName") == "recall"]
    assert recalled and "oslo = sorted" in recalled[-1]["content"][0]["text"], recalled
    assert str(OSLO_RAIN)[1:-1] in recalled[-1]["content"][0]["text"], recalled[-1]["content"][0]["text"]
    # the explorer's static views, and the %compact after them cutting where the explorer said
    shown = {c["id"]: "".join(o["data"]["text/plain"]) for c in nb["cells"]
             if c["cell_type"] == "code" and c["id"].startswith("tour-explore") for o in c["outputs"]
             if 'class="ipyagent-explore"' in "".join((o.get("data") or {}).get("text/html", ""))}
    assert set(shown) == {"tour-explore", "tour-explore-api"}, shown
    manual = next(e for e in compactions if e.get("cellId") == "tour-compact")
    assert f"id {manual['firstKeptEntryId']})" in shown["tour-explore"].splitlines()[1], shown["tour-explore"]
    assert "it splits the turn" in shown["tour-explore-api"], shown["tour-explore-api"]
    # the figures agree: "after" is the last compaction note's "→ N", and the mask masks something
    texts = {c["id"]: "".join("".join((o.get("data") or {}).get("text/plain", "")) + "".join(o.get("text", ""))
                              for o in c.get("outputs", [])) for c in nb["cells"] if c["cell_type"] == "code"}
    order = [c["id"] for c in nb["cells"] if c["cell_type"] == "code"]
    notes = [n for cid in order[:order.index("tour-before-after")] for n in re.findall(r"→ ([\d,]+)", texts[cid])]
    after = re.search(r"after: +([\d,]+) tokens", texts["tour-before-after"])
    assert after and notes and after.group(1) == notes[-1], (notes[-1:], texts["tour-before-after"])
    masked = re.search(r"masked (\d+) tool results? .*context ([\d,]+) → ([\d,]+)", texts["tour-forget"])
    assert masked and int(masked.group(1)) > 0 and masked.group(2) != masked.group(3), texts["tour-forget"]


NOTEBOOK = Notebook("how-compaction-works", [
    md("tour-intro", provenance("How compaction works — a guided tour", """
        A model's context window is finite. When a session outgrows it, ipyagent **compacts** it the
        way the [Pi coding agent](https://github.com/badlogic/pi-mono) does: the older part of the
        conversation is replaced, *for the model*, by a structured summary, while the most recent
        work is kept word for word. The visible cells never change; only the session in the
        notebook's metadata gets a new `compaction` entry.

        To watch it happen, this notebook gives the agent a tiny window — 4,900 tokens — so that
        a handful of prompts fill it. You will see the budget fill up, an automatic compaction,
        where the cut falls, the summary, a second compaction that *updates* the first summary,
        a compaction in the middle of a long turn (a *split turn*), and what all this does to the
        provider's prompt cache.""")),
    md("tour-settings-md", """
        ## The three numbers

        * `Agent.context_window` — the model's window (normally from the bundled model table).
        * `Agent.reserve_tokens` — room kept free for the reply. Compaction starts when the context
          exceeds **window − reserve** (here 4,900 − 1,400 = 3,500 tokens).
        * `Agent.keep_recent_tokens` — roughly how much recent conversation a compaction keeps
          verbatim (here 460 tokens). Everything older is summarised.

        These three numbers are chosen by hand for this lesson: small enough that a handful of
        prompts fill the window, and placed so that every kind of cut shows up below. Left unset,
        ipyagent derives the reserve and the kept tail from the window: Pi's 16,384 and 20,000 for
        windows of 65,536 tokens and more, and below that a quarter of the window and about 30 % of
        it (this 4,900-token window would get a reserve of 1,225 and keep 1,495)."""),
    code("tour-setup", """
        %load_ext ipyagent
        %config Agent.context_window = 4900
        %config Agent.reserve_tokens = 1400
        %config Agent.keep_recent_tokens = 460
        %config Agent.tool_approval = "auto"
        # What ran in the notebook since the previous prompt goes before each prompt (up to ~2,000
        # tokens); in this tiny window that would crowd out the conversation, so the tour leaves it out.
        %config Agent.notebook_context = False

        from ipyagent.kernel.teaching import (CompactionSpy, context_preview, context_tokens, current_session,
                                              overhead_tokens, timeline, usage_table)

        spy = CompactionSpy().install()   # a hook that only watches: it records each compaction's plan"""),
    code("tour-data", READINGS_CODE),
    md("tour-fill-md", """
        ## The budget fills up

        Watch the widget under each run. Even before the first word, about 1,600 tokens are taken by
        the system prompt and the ten tool definitions (grey); that part stays the same from run to
        run until the system prompt itself changes (a pin, below, adds to it). Each prompt, reply and tool result
        adds to the history."""),
    agent("tour-a1", TURNS),
    agent("tour-a2", TURNS),
    md("tour-fill-md2", """
        The numbers in the widget are the provider's own count from the last reply (its `usage`),
        plus an estimate (characters / 4) for anything added since. Blue is history that a
        compaction would summarise; green is the recent tail it would keep."""),
    agent("tour-a3", TURNS),
    agent("tour-a4", TURNS),
    md("tour-auto-md", """
        ## Automatic compaction

        That run pushed the context past the threshold (window − reserve), so at the end of the run
        ipyagent compacted automatically — see the *Compacted (threshold)* line at the end of the
        cell's output, and the purple *summary* segment in its widget (the widget sits at the top of
        the output and is updated in place while the run streams). (ipyagent also checks the budget before
        **every** model call, so a long tool loop cannot overflow the window in the middle of a run.)

        ### Where was the cut?

        `timeline()` draws every entry of the session's path as a box (width ∝ tokens). Entries
        before the **cut point** (red bar) were summarised (dashed purple); entries after it are
        kept verbatim (green outline). A cut never falls on a tool result, so a tool call and its
        result always stay together."""),
    code("tour-timeline1", "timeline(current_session())"),
    md("tour-summary-md", """
        ### The summary

        The summariser model was sent the summarised messages as a transcript inside
        `<conversation>` tags, with instructions asking for six sections: Goal, Constraints &
        Preferences, Progress (Done / In Progress / Blocked), Key Decisions, Next Steps, Critical
        Context. ipyagent appends, without a model, the files read and modified and an *artifact
        ledger* (the kernel variables the agent created, shell commands, tool errors, the notebook
        cells the work came from). `%agent summary` shows what it wrote:"""),
    code("tour-summary1", "%agent summary"),
    md("tour-before-after-md", """
        ### Tokens before and after

        The compaction entry records the context size it started from (`tokensBefore`). After it,
        the context is the summary plus the kept tail:"""),
    code("tour-before-after", """
        c = current_session().compactions()[-1]
        fixed, now = overhead_tokens(), context_tokens()   # the widget's figures
        print(f"before: {c['tokensBefore']:,} tokens (the entry's tokensBefore: Pi's count of the context)")
        print(f"after:  {now:,} tokens, as the widget counts them: {fixed:,} system prompt and tools "
              f"(compaction does not touch them) + {now - fixed:,} summary and kept messages (estimated)")"""),
    md("tour-context-md", """
        ### What the model sees now

        The next request starts with the summary, wrapped in a **user** message, followed by the kept
        messages (system prompt and tools not shown):"""),
    code("tour-context", "context_preview(current_session(), limit=300)"),
    md("tour-untouched-md", """
        ### What compaction never touches

        The system prompt is sent whole with every request and is never part of the summarised
        history. Besides the base prompt it holds the environment (the notebook's path, the working
        directory, the Python version), any `AGENTS.md` / `CLAUDE.md` found from the notebook's folder
        up to the repository root or your home folder, and the **pinned instructions**. A pin made now
        is in the system prompt of every later request, through the two compactions still to come:"""),
    code("tour-pins", """
        %agent pin Give temperatures in °C with two decimals.
        %agent pins"""),
    md("tour-activity-md", """
        Notebook activity is different. Normally each `%%agent` prompt carries a record of what ran in
        the notebook since the previous prompt (sources, values, errors, printed output, new
        variables), in the **same user message**, before the prompt text. It is history like any
        other message: a compaction summarises it with the rest of the older turns, and only the kept
        recent part still holds it word for word. (This tour turned it off in the setup cell, so that
        the tiny window holds the conversation.)

        A pin is a session entry of its own, so the summariser never sees it; what the user typed is
        summarised, what they pinned stays in force."""),
    md("tour-second-md", """
        ## A second compaction updates the first summary

        Two more prompts, then a manual compaction with `%compact`. Anything after `%compact` is a
        *focus*: it is added to the summariser's instructions as `Additional focus: …`.

        Because the session already has a summary, the summariser now gets the **update** prompt:
        the new messages in `<conversation>`, the previous summary in `<previous-summary>`, and the
        rule to preserve what it already says while adding the new progress. The new messages start
        at the previous compaction's first kept entry, so nothing the first compaction kept is lost."""),
    agent("tour-a5", TURNS),
    agent("tour-a6", TURNS),
    md("tour-explorer-md", """
        ### Before it runs: the compaction explorer

        `%agent explore` shows what a compaction would do **now**, without calling any model, and
        lets you change the numbers: sliders for the window, the reserve and keep-recent, and a
        choice of token estimator. The timeline draws every entry of the session's path as a box
        sized by its tokens: **blue** would be summarised, **green** kept verbatim, **orange** the
        prefix of a turn the cut splits, **purple** the latest summary (the next compaction updates
        it), **grey** what is already inside earlier summaries. The red bar is the cut point. Below:
        the tokens before and after, the threshold, and (collapsed) the exact text the summariser
        would receive, tool results cut to their head and tail as they are sent.

        It plans with `prepare_compaction` and builds the summariser's requests with the code
        compaction itself runs, so with the session's settings it shows what the `%compact` below
        will do. With a provider configured, a *Compact now with these settings…* button compacts
        with the settings on screen, after asking. (A saved notebook shows the explorer's static
        view; run the cell for the sliders.)"""),
    code("tour-explore", "%agent explore"),
    md("tour-explore-api-md", """
        `ipyagent.explore(...)` opens the same explorer on any saved notebook or Pi session file
        (`ipyagent.explore("how-compaction-works.ipynb")`), offline, or on a `Session`, with the
        controls' starting values as arguments. A smaller keep-recent moves the cut forward, here into
        the middle of a turn: a **split turn**, whose prefix (orange) gets a summary of its own."""),
    code("tour-explore-api", """
        import ipyagent

        ipyagent.explore(current_session(), window=4900, reserve=1400, keep_recent=300)"""),
    code("tour-compact", "%compact the outlier rule and the exact Tromsø numbers"),
    code("tour-spy", """
        spy.report()   # previous_summary=True: the second compaction was an update of the first"""),
    md("tour-second-summary-md", """
        The updated summary keeps the first one's goals, decisions and context and adds the new ones.
        Because of the focus, it also keeps the exact Tromsø numbers:"""),
    code("tour-summary2", "%agent summary"),
    code("tour-timeline2", "timeline(current_session())  # faded: already in the earlier summary"),
    md("tour-split-md", """
        ## A split turn

        Some single prompts produce a long turn: many tool calls, each with a sizeable result. Here
        the agent prints each station's readings, one call at a time. The budget is checked before
        every model call, and partway through this turn it crosses the threshold. The recent part
        of the turn is larger than what we keep, so the cut falls **inside the turn**, after its
        prompt: a *split turn*.

        Then the summariser is asked twice: the history before this turn updates the previous summary,
        and the *prefix* of this turn (its prompt and first calls) gets a short summary of its own,
        appended under **Turn Context (split turn)** so the model still knows what it was asked."""),
    agent("tour-a7", TURNS),
    code("tour-timeline3", "timeline(current_session())  # dashed orange: the turn prefix"),
    code("tour-split-summary", """
        summary = current_session().latest_summary()
        print(summary[summary.index("---"):])   # the turn-prefix part of the latest summary"""),
    code("tour-spy2", "spy.report()"),
    md("tour-recall-md", """
        ## A summarised detail comes back: `recall`

        Summaries keep what the work needs to go on, not every number. Oslo's ten daily rain amounts
        were printed by a tool call back in the fifth cell; the summary only mentions day 3's 85 mm.
        The exact list is no longer in the model's context. It is not lost either: the session in
        the notebook's metadata keeps every entry a summary replaced.

        Below its six sections, every summary carries an **artifact ledger**, made without a model
        and carried from one compaction to the next: the kernel variables the agent's python calls
        created (with their type and size when the compaction ran), shell commands, the last lines
        of tool errors, and the notebook cells the work came from, each with the id of the entry it
        came from:"""),
    code("tour-ledger", """
        summary = current_session().latest_summary()
        print(summary[summary.index("<kernel-variables>"):])"""),
    md("tour-recall-md2", """
        The agent's `recall` tool searches the summarised entries word for word (`recall(query)`:
        words or a regular expression) or returns one in full (`recall(entry_id)`: a tool call
        comes back with its result). It only ever returns what is no longer in the context. Asked
        for the exact list, the agent looks up the entry that made `oslo`:"""),
    agent("tour-a8", TURNS),
    md("tour-recall-after", """
        The tool block shows what `recall` returned: the code and its printed output, word for word,
        from an entry that was summarised several compactions ago."""),
    md("tour-cache-md", """
        ## What compaction does to the prompt cache

        Providers cache the longest prefix a request shares with earlier ones and bill those
        *cache-read* tokens at a fraction of the price. Each reply in a session extends the previous
        request, so normally almost the whole prompt is a cache read. A compaction rewrites the
        start of the conversation (the summary replaces the history), so the next request shares
        only the system prompt and tools with the cache — then caching recovers.

        Every reply's `usage` is stored in the session; the table below shows the cached share
        dropping right after each compaction:"""),
    code("tour-cache", "usage_table(current_session())"),
    md("tour-forget-md", """
        ## Two ways to forget

        Compaction is one way to make room: the older turns become a summary, which costs a model
        call and loses detail (`recall` brings it back). The other, cheaper way is **masking**: keep
        every tool *call* but hide its bulky *result* behind a one-line placeholder that names the
        entry. No model is called, and `recall(entry_id)` returns the result in full. (Studies of
        coding agents find that masking old tool outputs halves the cost at equal success; JetBrains,
        *The Complexity Trap*, 2025.)

        A mask is one of Pi's own `context_edit` entries, so Pi reads the exported session the same
        way. `%agent mask ENTRY` hides one result, `--tool-results-before N` every result before the
        last N turns; `%agent unmask` puts them back. `%config Agent.auto_mask_turns = N` masks
        automatically before a summary would be asked for, and compacts only when that is not
        enough (off by default, as in Pi). Side by side, with the tokens before and after each:"""),
    code("tour-forget", """
        s = current_session()
        c = s.compactions()[-1]
        print(f"compaction (a summary, one model call): the context was {c['tokensBefore']:,} tokens; "
              f"the summary is {len(c['summary']) // 4:,}")
        %agent mask --tool-results-before 1"""),
    md("tour-forget-list-md", "With no argument, `%agent mask` lists what is masked, as the model sees it:"),
    code("tour-forget-list", "%agent mask"),
    md("tour-end", """
        ## Try it yourself

        * `%agent tree` shows the session as a tree of entries; `%agent context` the exact next
          request.
        * `%agent explore` moves the cut without calling a model; change the three numbers in the
          setup cell and *Restart & Run All* with a live provider to see a whole session compact
          differently.
        * `ipyagent compact NOTEBOOK --dry-run` plans a compaction of a saved notebook from the command
          line without calling any model."""),
], TURNS, check=_check)
