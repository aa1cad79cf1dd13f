"""The teaching notebooks: their cells, and the scripted model responses ``build.py`` serves while
executing them. Numbers in the scripted answers are computed here from the same toy data the
notebooks define, so what the "model" says matches what its tool calls really printed."""

from __future__ import annotations

import json
import statistics
from typing import Any

from build import Notebook, Step, Turn, agent, code, md, provenance

# ---- toy data (plain lists and dicts; no pandas) -------------------------------------------------

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
exec(READINGS_CODE.replace("print(", "(lambda *a, **k: None)("), _ns)
STATIONS: list[str] = _ns["stations"]
READINGS: list[dict[str, Any]] = _ns["readings"]


def _of(station: str, key: str) -> list[float]:
    return [r[key] for r in READINGS if r["station"] == station]


MEAN = {s: round(statistics.mean(_of(s, "temp_c")), 2) for s in STATIONS}
RAIN = {s: round(sum(_of(s, "rain_mm")), 1) for s in STATIONS}
SD = {s: round(statistics.stdev(_of(s, "temp_c")), 2) for s in STATIONS}
CLEAN_TROMSO = round(statistics.mean([t for t in _of("Tromsø", "temp_c") if t != 19.5]), 2)
COLDEST = min(READINGS, key=lambda r: r["temp_c"])

ORDERS_CODE = """
# A toy dataset: plain Python lists and dicts.
orders = [
    {"id": 1, "customer": "Ada",   "items": ["tea", "scones"],          "total": 12.50},
    {"id": 2, "customer": "Grace", "items": ["coffee"],                 "total": 3.20},
    {"id": 3, "customer": "Ada",   "items": ["coffee", "cake"],         "total": 8.90},
    {"id": 4, "customer": "Linus", "items": ["tea"],                    "total": 2.80},
    {"id": 5, "customer": "Grace", "items": ["cake", "cake", "coffee"], "total": 14.10},
    {"id": 6, "customer": "Linus", "items": ["scones", "tea"],          "total": 9.30},
]
"""
_ons: dict[str, Any] = {}
exec(ORDERS_CODE, _ons)
ORDERS = _ons["orders"]
SPENT: dict[str, float] = {}
for _o in ORDERS:
    SPENT[_o["customer"]] = round(SPENT.get(_o["customer"], 0) + _o["total"], 2)
TOP = max(SPENT, key=SPENT.get)
AVG = round(sum(o["total"] for o in ORDERS) / len(ORDERS), 2)

CUSTOMERS = ["Ada", "Grace", "Linus", "Margaret"]
AVERAGE = {c: (round(sum(v) / len(v), 2) if v else None)
           for c, v in ((c, [o["total"] for o in ORDERS if o["customer"] == c]) for c in CUSTOMERS)}
AVERAGE_CODE = """
# Average order value per customer, including Margaret, who signed up today
customers = ["Ada", "Grace", "Linus", "Margaret"]
per_customer = {c: [o["total"] for o in orders if o["customer"] == c] for c in customers}
average = {c: round(sum(v) / len(v), 2) for c, v in per_customer.items()}
"""
AVERAGE_COUNT = 8  # the execution count of that cell in the quickstart (its 8th code cell)
FIXED_CODE = ("average = {c: round(sum(v) / len(v), 2) if v else None for c, v in per_customer.items()}\n"
              "average")
ADA = [o["total"] for o in ORDERS if o["customer"] == "Ada"]

LIVE_SETUP_NOTE = ""

# ---- quickstart ----------------------------------------------------------------------------------


def raises(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell whose error is part of the lesson (nbclient's ``raises-exception`` tag)."""
    cell["metadata"]["tags"] = ["raises-exception"]
    return cell


Q_TURNS = [
    Turn("Hello! In one sentence: what can you do in this notebook?",
         [Step("I can read your notebook's variables and run Python in this kernel, read and edit files, and "
               "run shell commands — ask me to explore data, write or fix code, or explain what something does.")],
         goal="Get to know the agent."),
    Turn("`orders` is a list of dicts. Which customer spent the most, and what is the average order value?",
         [Step("Let me compute both from `orders`.", [("python", {"code": (
             "spent = {}\n"
             "for o in orders:\n"
             "    spent[o['customer']] = spent.get(o['customer'], 0) + o['total']\n"
             "print({k: round(v, 2) for k, v in spent.items()})\n"
             "round(sum(o['total'] for o in orders) / len(orders), 2)")})]),
          Step(f"**{TOP}** spent the most: {SPENT[TOP]:.2f} in total "
               f"({', '.join(f'{k} {v:.2f}' for k, v in SPENT.items() if k != TOP)}). "
               f"The average order value is **{AVG:.2f}** over {len(ORDERS)} orders.\n\n"
               "I left a `spent` dict (customer → total) in your namespace.")],
         goal="Find the top customer and the average order value in `orders`.",
         done=[f"Totals per customer: {SPENT}", f"Average order value {AVG:.2f}"]),
    Turn("Now put that in two lines I can paste into an email.",
         [Step(f"{TOP} is our best customer this week, with {SPENT[TOP]:.2f} across "
               f"{sum(1 for o in ORDERS if o['customer'] == TOP)} orders.\n"
               f"Across all {len(ORDERS)} orders the average order value was {AVG:.2f}.")],
         goal="Write the result up for an email."),
    Turn("Why did the cell above fail?",
         [Step("It divides by `len(v)` for every customer, and **Margaret** has no orders yet: her list is "
               "empty, so `sum(v) / len(v)` is `0 / 0`, which raises `ZeroDivisionError` (the last frame of "
               "the traceback, in the dict comprehension). Give customers without orders `None` instead:\n\n"
               "```python\n" + FIXED_CODE.splitlines()[0] + "\n```")],
         goal="Understand why the per-customer average failed."),
    Turn("Apply that fix to {In[%d]} and run it." % AVERAGE_COUNT,
         [Step("Running the fixed comprehension.", [("python", {"code": FIXED_CODE})]),
          Step("Fixed: " + ", ".join(f"{c} {v:.2f}" if v is not None else f"{c} `None` (no orders yet)"
                                     for c, v in AVERAGE.items()) + ". The result is in `average`.")],
         goal="Fix the per-customer average.", match="Apply that fix to \n```python\n# Average order value"),
    Turn("What did Ada spend in total?",
         [Step(f"Ada spent **£{sum(ADA):.2f}** in total, over {len(ADA)} orders "
               f"({' + '.join(f'£{t:.2f}' for t in ADA)}).")],
         goal="Ada's total spend."),
]

QUICKSTART = Notebook("quickstart", [
    md("qs-intro", provenance("ipyagent quickstart", """
        ipyagent puts a coding agent in your Jupyter kernel: a `%%agent` cell sends its body to a
        model, which can look at your variables and run Python right here. The whole conversation is
        saved in the notebook's metadata — the `.ipynb` *is* the session.

        This notebook: configure a provider, load the extension, a first prompt, a prompt that uses
        the `python` tool on a small dataset, asking about a cell that failed, `{In[n]}` in a prompt,
        pinned instructions, the context-budget widget, and `%agent context` (exactly what the model
        is sent).""")),
    md("qs-provider", """
        ## 1. Configure a provider

        ipyagent names models `provider:model` and reads keys and endpoints from the usual
        environment variables — set them in the shell that starts Jupyter, or in a cell *before*
        `%load_ext ipyagent`:

        | provider | environment | model, e.g. |
        |---|---|---|
        | OpenAI | `OPENAI_API_KEY` | `openai:gpt-4.1-mini` |
        | Anthropic | `ANTHROPIC_API_KEY` | `anthropic:claude-sonnet-4-5` |
        | a local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio…) | `OPENAI_BASE_URL=http://localhost:11434/v1` (no key needed) | `openai:qwen2.5-coder` |

        The default model comes from `IPYAGENT_MODEL`; `%config Agent.model = "…"` overrides it.
        Keys are never written into the notebook. **Leave everything commented out to replay this
        notebook's recording offline.**"""),
    code("qs-config", """
        import os

        # Pick ONE (or export these in your shell before starting Jupyter):
        # os.environ["OPENAI_API_KEY"] = "sk-…";         os.environ["IPYAGENT_MODEL"] = "openai:gpt-4.1-mini"
        # os.environ["ANTHROPIC_API_KEY"] = "sk-ant-…";  os.environ["IPYAGENT_MODEL"] = "anthropic:claude-sonnet-4-5"
        # os.environ["OPENAI_BASE_URL"] = "http://localhost:11434/v1"; os.environ["IPYAGENT_MODEL"] = "openai:qwen2.5-coder"

        print("model:", os.environ.get("IPYAGENT_MODEL") or "(none set: the recorded responses will be replayed)")"""),
    code("qs-load", """
        %load_ext ipyagent
        # Let the agent run Python without asking first (the default, "ask", asks before every
        # tool that runs code, changes files or runs commands):
        %config Agent.tool_approval = "auto"
        # Only needed for models the bundled model table does not know (local servers, or the
        # scripted model this notebook was recorded with): their context window, in tokens.
        %config Agent.context_window = 32_000"""),
    md("qs-first", """
        ## 2. A first prompt

        The cell body is the prompt. The answer streams in as Markdown, and a small widget under it
        shows how full the model's context window is."""),
    agent("qs-hello", Q_TURNS[0].prompt),
    md("qs-tool-md", """
        ## 3. The agent uses your kernel

        The agent sees what you define. Here is a small dataset — plain Python lists and dicts:"""),
    code("qs-data", ORDERS_CODE),
    agent("qs-orders", Q_TURNS[1].prompt),
    md("qs-tool-after", """
        The `✓ python(…)` block is the tool call: the code the agent ran in *this* kernel and what it
        printed (click to expand). Variables it creates stay in your namespace:"""),
    code("qs-spent", """
        # `spent` was created by the agent's python call. When this notebook replays its recording,
        # recorded tool calls are not run again, so it only exists after a live run.
        globals().get("spent", "(not defined: this run replayed the recording)")"""),
    md("qs-memory", """
        Tool calls run in the kernel while the cell runs. When this notebook *replays* its recording,
        recorded tool results are reused and the code is **not** run again (`%agent replay on --tools`
        runs them again and reports any difference).

        ## 4. The conversation continues across cells

        Each `%%agent` cell adds to the same session, so the next prompt can refer to the previous answer:"""),
    agent("qs-email", Q_TURNS[2].prompt),
    md("qs-activity-md", """
        ## 5. The agent sees what you ran

        Each `%%agent` prompt carries a short record of what happened in the notebook since the
        previous prompt: the cells that ran (execution count, source, value, printed output, and
        errors with the last frames of the traceback) and which variables appeared, changed or went
        away. So you can simply ask about "the cell above". This one fails:"""),
    raises(code("qs-average", AVERAGE_CODE)),
    agent("qs-why", Q_TURNS[3].prompt),
    md("qs-interpolate-md", f"""
        The record is capped (`Agent.notebook_context_tokens`, about 2,000 tokens; the newest cells
        come first, older ones are shortened, and it says so). `%%agent --no-context` leaves it out
        for one prompt, `%config Agent.notebook_context = False` for good, and `%agent context`
        shows the one the next prompt would carry.

        You can also point at a cell or a variable: `{{In[{AVERAGE_COUNT}]}}` is the source of the
        cell that ran as `[{AVERAGE_COUNT}]`, `{{Out[n]}}` its value, `{{Err[n]}}` its error, and
        `{{name}}` a variable's repr. Anything else in braces is left alone, and `{{{{In[n]}}}}` writes
        the braces literally. The note under the cell says what was filled in:"""),
    agent("qs-fix", Q_TURNS[4].prompt),
    md("qs-pins-md", """
        ## 6. Instructions that stay: pins and `AGENTS.md`

        `%agent pin TEXT` adds an instruction to the system prompt of every request; `%agent pins`
        lists them and `%agent unpin N` removes one. A pin is an entry of the session, so it is saved
        with the notebook and survives a kernel restart, an export and a replay. An `AGENTS.md` (or
        `CLAUDE.md`) in the notebook's folder or its parents — up to the repository root or your home
        folder — is read into the system prompt the same way, together with the notebook's path, the
        working directory and the Python version. Neither is part of the conversation, so compaction
        never summarises them away."""),
    code("qs-pin", """
        %agent pin Write money amounts in pounds with two decimals, like £12.50.
        %agent pins"""),
    agent("qs-ada", Q_TURNS[5].prompt),
    md("qs-widget", """
        ## 7. The budget widget and `%agent status`

        The bar is the context window: grey for the system prompt and tool definitions, blue for
        older history, green for the recent part a compaction would keep verbatim (purple, after a
        compaction, is the summary). The dashed red zone on the right is the reserve: once the
        context reaches it, the session is compacted (see `how-compaction-works.ipynb`).
        `%agent status` shows the same for the active session, and how it is being saved:"""),
    code("qs-status", "%agent status"),
    md("qs-context-md", """
        ## 8. Exactly what the model is sent: `%agent context`

        The next request, part by part with token estimates: the system prompt's parts (the base
        prompt, the environment, instruction files, the pins), the tool definitions, then every
        message — each prompt with its notebook-activity block — and the block the next prompt
        would carry (expand a row to read it)."""),
    code("qs-context", "%agent context"),
    md("qs-next", """
        ## Where next

        * `how-compaction-works.ipynb` — what happens when the window fills up.
        * `custom-compaction.ipynb` — hooks: a cheaper summary model, your own summary, cancelling.
        * `reproducible-session.ipynb` — export to Pi's JSONL, import, replay.
        * `%agent help` lists every command; `%agent config` every setting."""),
], Q_TURNS)


def _check_quickstart(nb: dict[str, Any], policy: Any, server: Any) -> None:
    assert server.summary_calls == 0
    chats = [json.dumps(r.body["messages"]) for r in server.requests if r.kind == "chat"]
    why = next(c for c in chats if Q_TURNS[3].prompt in c)
    assert "ZeroDivisionError: division by zero" in why and "per_customer = {c:" in why, why[-2000:]
    fix = next(c for c in chats if "Apply that fix to" in c)
    assert "customers = [" in fix.split("Apply that fix to")[-1], "In[n] was not the failing cell's source"
    ada = [r for r in server.requests if r.kind == "chat" and Q_TURNS[5].prompt in json.dumps(r.body["messages"])]
    assert ada and "two decimals, like £12.50" in ada[0].body["messages"][0]["content"]


QUICKSTART.check = _check_quickstart

# ---- how compaction works ------------------------------------------------------------------------

PRINT_STATION = "for r in readings:\n    if r['station'] == {s!r}:\n        print(r)"

T_TURNS = [
    Turn("Have a look at `readings`: what is in it?",
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
    Turn("Average temperature and total rain per station, please.",
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
         details=[f"Standard deviations: " + ", ".join(f"{s} {SD[s]:.2f}" for s in STATIONS)]),
    Turn("Show me all ten Tromsø readings.",
         [Step("", [("python", {"code": PRINT_STATION.format(s="Tromsø")})]),
          Step("Day 7 stands out: **19.5 °C**, while every other Tromsø day is between 3 and 7 °C. "
               "That looks like a sensor glitch rather than weather.")],
         done=["Listed the Tromsø readings; day 7 reads 19.5 °C (others 3–7 °C)"],
         decisions=["**Tromsø day 7 (19.5 °C) is suspect**: far outside the station's other days"],
         context=["Suspect value: Tromsø day 7, temp_c 19.5 (readings[26])"],
         details=["Tromsø temp_c by day 1–10: " + ", ".join(str(t) for t in _of("Tromsø", "temp_c"))]),
    Turn("Check every station for outliers: readings more than 2 standard deviations from that station's mean, "
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
    Turn("Is Oslo's 85 mm of rain on day 3 plausible?",
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
    Turn("Remove the Tromsø day-7 reading and recompute Tromsø's mean temperature.",
         [Step("", [("python", {"code": (
             "clean = [r for r in readings if not (r['station'] == 'Tromsø' and r['day'] == 7)]\n"
             "t = [r['temp_c'] for r in clean if r['station'] == 'Tromsø']\n"
             "len(clean), round(sum(t) / len(t), 2)")})]),
          Step(f"Done: `clean` has {len(READINGS) - 1} readings. Without the glitch, Tromsø's mean temperature is "
               f"**{CLEAN_TROMSO:.2f} °C** (it was {MEAN['Tromsø']:.2f} °C with it).")],
         done=[f"Built `clean` (39 readings, without Tromsø day 7); Tromsø mean {CLEAN_TROMSO:.2f} °C "
               f"(was {MEAN['Tromsø']:.2f})"],
         decisions=["**Drop Tromsø day 7**: a sensor glitch"],
         context=["`clean` = readings without Tromsø day 7 (39 rows)"],
         details=[f"Tromsø mean without day 7: {CLEAN_TROMSO:.2f} °C"],
         next=["Report the cleaned per-station statistics."]),
    Turn("Go through the stations one at a time: for each, print its clean readings sorted by temperature. "
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
]

OSLO_RAIN = sorted(_of("Oslo", "rain_mm"))


def _recall_oslo(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What a model reading the summary's ledger would do: recall the entry that made ``oslo``."""
    import re

    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        found = re.search(r"\boslo: [^\n]*\[entry ([0-9a-f]{8})\]", text)
        if found:
            return {"entry_id": found.group(1)}
    return {"query": "oslo rain_mm sorted"}


T_TURNS.append(
    Turn("What were Oslo's ten daily rain amounts, exactly? Sorted is fine.",
         [Step("The summary only keeps Oslo's day 3. The exact list was printed by an earlier tool call that was "
               "summarised away; the summary's ledger says `oslo` was made in that entry, so I'll recall it.",
               [("recall", _recall_oslo)]),
          Step(f"Oslo's ten days, sorted (mm): {', '.join(str(v) for v in OSLO_RAIN)}. Without day 3 they average "
               f"{round(sum(OSLO_RAIN[:-1]) / 9, 1)} mm a day, so day 3's 85 mm stands alone.")],
         done=["Recalled Oslo's exact daily rain (sorted): " + ", ".join(str(v) for v in OSLO_RAIN)]))

TOUR = Notebook("how-compaction-works", [
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

        (The defaults for real models are a 16,384-token reserve and 20,000 kept tokens.)"""),
    code("tour-setup", """
        %load_ext ipyagent
        %config Agent.context_window = 4900
        %config Agent.reserve_tokens = 1400
        %config Agent.keep_recent_tokens = 460
        %config Agent.tool_approval = "auto"
        # What ran in the notebook since the previous prompt goes before each prompt (up to ~2,000
        # tokens); in this tiny window that would crowd out the conversation, so the tour leaves it out.
        %config Agent.notebook_context = False

        from tour_helpers import CompactionSpy, context_preview, current_session, overhead_tokens, timeline, usage_table

        spy = CompactionSpy().install()   # a hook that only watches: it records each compaction's plan"""),
    code("tour-data", READINGS_CODE),
    md("tour-fill-md", """
        ## The budget fills up

        Watch the widget under each run. Even before the first word, about 1,300 tokens are taken by
        the system prompt and the nine tool definitions (grey). Each prompt, reply and tool result
        adds to the history."""),
    agent("tour-a1", T_TURNS[0].prompt),
    agent("tour-a2", T_TURNS[1].prompt),
    md("tour-fill-md2", """
        The numbers in the widget are the provider's own count from the last reply (its `usage`),
        plus an estimate (characters / 4) for anything added since. Blue is history that a
        compaction would summarise; green is the recent tail it would keep."""),
    agent("tour-a3", T_TURNS[2].prompt),
    agent("tour-a4", T_TURNS[3].prompt),
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
        s = current_session()
        c = s.compactions()[-1]
        fixed = overhead_tokens()   # system prompt + tool definitions: compaction does not touch them
        print(f"before: {c['tokensBefore']:,} tokens (the provider's count of the last request)")
        print(f"after:  {s.context_tokens() + fixed:,} tokens ≈ {fixed:,} system prompt and tools "
              f"+ {s.context_tokens():,} summary and kept messages (estimated)")"""),
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
    agent("tour-a5", T_TURNS[4].prompt),
    agent("tour-a6", T_TURNS[5].prompt),
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
    agent("tour-a7", T_TURNS[6].prompt),
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
    agent("tour-a8", T_TURNS[7].prompt),
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
    md("tour-end", """
        ## Try it yourself

        * `%agent tree` shows the session as a tree of entries; `%agent context` the exact next
          request.
        * `%agent explore` moves the cut without calling a model; change the three numbers in the
          setup cell and *Restart & Run All* with a live provider to see a whole session compact
          differently.
        * `ipyagent compact NOTEBOOK --dry-run` plans a compaction of a saved notebook from the command
          line without calling any model."""),
], T_TURNS)


def _check_tour(nb: dict[str, Any], policy: Any, server: Any) -> None:
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


TOUR.check = _check_tour

NOTEBOOKS = [QUICKSTART, TOUR]

# ---- custom compaction (hooks) -------------------------------------------------------------------

C_TURNS = T_TURNS  # the same conversation as the tour (so the same moments fill the window)

HOOK_CODE = '''
from ipyagent.compaction.hooks import hooks


def _text(content):
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def notes_summary(event):
    """No model at all: the previous summary, plus notes on the prompts and tool calls being compacted."""
    plan = event.preparation           # what the default compaction would do (a CompactionPlan)
    notes = []
    for message in plan.messages_to_summarize + plan.turn_prefix_messages:
        if message.get("role") == "user":
            notes.append(f"- User asked: {_text(message.get('content'))}")
        elif message.get("role") == "assistant":
            for block in message.get("content") or []:
                if block.get("type") == "toolCall":
                    code = " ".join(str(block["arguments"].get("code", block["arguments"])).split())
                    notes.append(f"- Ran {block['name']}: `{code[:80]}`")
    previous = plan.previous_summary or "(no earlier summary)"
    # Returning a compaction replaces the summariser; the plan's cut point and token count are kept.
    return {"compaction": {"summary": previous + "\\n\\n## Notes since then (written by a hook, no model)\\n"
                                      + "\\n".join(notes)}}


hooks.on("session_before_compact", notes_summary)
print("session_before_compact hooks:", [h.__name__ for h in hooks.handlers["session_before_compact"]])
'''

CANCEL_CODE = '''
def no_automatic_compaction(event):
    """Cancel compactions the budget triggers; a manual %compact still goes ahead."""
    if event.reason == "threshold":
        print(f"hook: automatic compaction cancelled ({event.preparation.tokens_before:,} tokens)")
        return {"cancel": True}


hooks.on("session_before_compact", no_automatic_compaction)
print("session_before_compact hooks:", [h.__name__ for h in hooks.handlers["session_before_compact"]])
'''

# %agent probe: one question of each kind, with the reference answer and what recall would search for
C_PROBE = [
    {"kind": "recall", "question": "Without day 3, how much rain did Oslo get per day on average?",
     "answer": f"{round(sum(sorted(_of('Oslo', 'rain_mm'))[:-1]) / 9, 1)} mm/day", "query": "without day 3"},
    {"kind": "artifact", "question": "Which kernel variable holds the readings without the Tromsø glitch?",
     "answer": "`clean`", "query": "clean readings"},
    {"kind": "continuation", "question": "What did the user want once each station's readings were listed?",
     "answer": "the coldest reading overall", "query": "coldest reading overall"},
    {"kind": "decision", "question": "Why was Oslo's 85 mm on day 3 kept rather than dropped?",
     "answer": "possible but extreme", "query": "possible but extreme"},
]

CUSTOM = Notebook("custom-compaction", [
    md("cc-intro", provenance("Custom compaction: hooks and a cheaper summary model", """
        Compaction calls a model to write the summary. That call does not need your best (and most
        expensive) model, and sometimes you want no model at all, or no compaction right now.
        This notebook shows three ways to take control:

        1. `Agent.summary_model` — route summaries to a cheaper model;
        2. a `session_before_compact` hook that writes the summary itself;
        3. a `session_before_compact` hook that cancels automatic compactions;

        and then `%agent probe`, which measures what a summary lost.

        It uses the same tiny 4,900-token window and conversation as `how-compaction-works.ipynb`,
        so compaction comes quickly.""")),
    code("cc-setup", """
        %load_ext ipyagent
        %config Agent.context_window = 4900
        %config Agent.reserve_tokens = 1400
        %config Agent.keep_recent_tokens = 460
        %config Agent.tool_approval = "auto"
        %config Agent.notebook_context = False  # no notebook-activity block: the window is tiny"""),
    code("cc-data", READINGS_CODE),
    md("cc-model-md", """
        ## 1. A cheaper model for summaries

        `Agent.summary_model` names the model that writes compaction summaries (default: the session
        model). Pick a cheap, fast model with a large window — e.g. `openai:gpt-4.1-mini` under an
        `openai:gpt-4.1` session. Here the recording was made with the scripted models
        `scripted-model` (session) and `scripted-mini` (summaries)."""),
    code("cc-model", """
        %config Agent.summary_model = "openai:scripted-mini"
        %agent model"""),
    agent("cc-a1", C_TURNS[0].prompt),
    agent("cc-a2", C_TURNS[1].prompt),
    agent("cc-a3", C_TURNS[2].prompt),
    agent("cc-a4", C_TURNS[3].prompt),
    md("cc-model-after", """
        The last run crossed the threshold and compacted; the summary request went to
        `scripted-mini`, not to the session model. The same can be set for every notebook in
        `ipython_config.py`: `c.Agent.summary_model = "openai:gpt-4.1-mini"`."""),
    code("cc-summary1", "%agent summary"),
    md("cc-hook-md", """
        ## 2. A hook that writes the summary itself

        Hooks are plain Python functions registered on `ipyagent.compaction.hooks.hooks`.
        A `session_before_compact` handler receives `event.preparation` — the plan the default
        compaction would follow: `messages_to_summarize`, `turn_prefix_messages`, `previous_summary`,
        `first_kept_entry_id`, `tokens_before`, `is_split_turn` — plus `event.reason` (`"threshold"`,
        `"overflow"` or `"manual"`) and `event.custom_instructions` (the `%compact` focus).

        Returning `{"compaction": {"summary": …}}` replaces the summariser. This one calls no model at
        all: it keeps the previous summary and appends notes on the prompts and tool calls being
        compacted (cheap and deterministic, but much less useful to the model than a real summary; a
        real hook might call your own summarisation service or a local model). The entry is marked
        `fromHook`. Two more prompts, then `%compact`:"""),
    code("cc-hook", HOOK_CODE),
    agent("cc-a5", C_TURNS[4].prompt),
    agent("cc-a6", C_TURNS[5].prompt),
    code("cc-compact-hook", "%compact"),
    code("cc-hook-summary", """
        %agent summary
        hooks.off("session_before_compact", notes_summary)   # back to the summary model"""),
    md("cc-cancel-md", """
        ## 3. A hook that cancels

        Returning `{"cancel": True}` stops the compaction; the session is unchanged. This handler
        cancels every compaction the budget triggers (`reason == "threshold"`) — say, while you are
        reviewing a long result and want it kept word for word — but lets a manual `%compact` through.
        The next run crosses the threshold several times; each time the hook says no:"""),
    code("cc-cancel", CANCEL_CODE),
    agent("cc-a7", C_TURNS[6].prompt),
    md("cc-cancel-after", """
        Without compaction the context is now above the threshold (see the widget). A manual
        compaction is allowed by this hook, and goes to the summary model again:"""),
    code("cc-compact-manual", "%compact"),
    code("cc-off", """
        hooks.off("session_before_compact", no_automatic_compaction)
        print([h.__name__ for h in hooks.handlers["session_before_compact"]] or "no session_before_compact hooks left")"""),
    md("cc-probe-md", """
        ## 4. How much did a summary lose? `%agent probe`

        A summary is a bet on what the rest of the work will need. `%agent probe` checks the bet on
        your own session, with your own providers. From the part of the session the latest
        compaction summarised away, the judge model (`--judge`; default: the session model) writes
        questions of four kinds, each with a reference answer: **recall** (a fact), **artifact**
        (files, variables, commands), **continuation** (what comes next) and **decision** (why).
        The session's model answers every question three ways: from the full history, from the
        compacted context, and from the compacted context with the `recall` tool. The judge grades
        each answer from 0 to 5.

        From a shell: `ipyagent probe NOTEBOOK --model M --judge M2`. With `--recompact
        --summary-model S --focus TEXT` (and the budget options) it probes a fresh compaction of the
        same history instead, so summary models, focus texts and settings can be compared on equal
        terms. Here, one question of each kind about the compaction the last `%compact` made:"""),
    code("cc-probe", "%agent probe --questions 1 --judge openai:scripted-judge"),
    md("cc-probe-after", """
        The full history is the ceiling; the compacted column is what the summary (with its file
        lists and artifact ledger) kept; the last column is what `recall` wins back. The second
        table is what each way cost in tokens, and what writing the questions and grading cost.
        *Questions and answers* lists every question, reference answer, answer and grade. The report,
        with every model response, is stored in the session as a `custom` entry (Pi keeps those out
        of the context), so this cell replays offline like the `%%agent` cells. The prompts are in
        `ipyagent/agent/probe_prompts.py`."""),
    md("cc-packages", """
        ## Shipping hooks in a package

        Besides `hooks.on(...)` in a notebook, a package can provide hooks to every session through
        the `ipyagent.hooks` entry-point group; ipyagent calls each entry point with the registry:

        ```toml
        # pyproject.toml of your package
        [project.entry-points."ipyagent.hooks"]
        my-compaction = "my_package.hooks:register"
        ```

        ```python
        # my_package/hooks.py
        def register(registry):
            registry.on("session_before_compact", my_handler)
        ```

        Other events: `session_compact` (after a compaction), `session_before_tree` / `session_tree`
        (branch navigation), `context` (rewrite the messages of a request), `before_provider_request`,
        `turn_end`, `agent_end`. A handler that raises is reported as a warning and never breaks
        the session."""),
], C_TURNS, probe=C_PROBE)


def _check_custom(nb: dict[str, Any], policy: Any, server: Any) -> None:
    assert policy.summary_models and set(policy.summary_models) == {"scripted-mini"}, policy.summary_models
    session = nb["metadata"]["ipyagent"]["sessions"]["default"]
    compactions = [e for e in session["entries"] if e["type"] == "compaction"]
    assert [bool(c.get("fromHook")) for c in compactions] == [False, True, False], compactions
    text = json.dumps(nb)
    assert "automatic compaction cancelled" in text
    [probe] = [e for e in session["entries"] if e["type"] == "custom" and e["customType"] == "ipyagent.probe"]
    items = probe["data"]["items"]
    assert [i["kind"] for i in items] == ["recall", "artifact", "continuation", "decision"]
    assert all(a["score"] is not None for i in items for a in i["answers"].values()), items
    assert all(i["answers"]["recall"]["score"] == 5 for i in items), items


CUSTOM.check = _check_custom

# ---- reproducible session ------------------------------------------------------------------------

R_TURNS = Q_TURNS[1:3]

REPRO = Notebook("reproducible-session", [
    md("rs-intro", provenance("A reproducible session: record, export, import, replay", """
        Everything an ipyagent session contains — prompts, replies, tool calls and their results,
        compaction summaries — is stored in this notebook's metadata (`metadata["ipyagent"]`). That
        makes the notebook a reproducible record: it can be exported to the
        [Pi](https://github.com/badlogic/pi-mono) session format (JSONL), imported back, and
        re-executed offline by *replaying* the recorded model responses.""")),
    code("rs-setup", """
        %load_ext ipyagent
        %config Agent.tool_approval = "auto"
        %config Agent.context_window = 32_000
        # Each successful python call of the agent also becomes a code cell below its %%agent cell:
        %config Agent.code_cells = "insert"

        import json, pathlib, tempfile
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="ipyagent-demo-"))   # exports go here"""),
    md("rs-record-md", """
        ## 1. Record

        Nothing special is needed: every `%%agent` run appends its entries to the session, and the
        session is saved with the notebook. With `Agent.code_cells = "insert"` (set above), the code
        the agent runs is also left in the notebook: each successful `python` call becomes a code
        cell right below its `%%agent` cell, its first line `# from ipyagent <entry id>` naming the
        tool result it reproduces."""),
    code("rs-data", ORDERS_CODE),
    agent("rs-a1", R_TURNS[0].prompt),
    agent("rs-a2", R_TURNS[1].prompt),
    md("rs-cells-md", """
        The cell between the two `%%agent` cells is the agent's `python` call. That is what makes
        *Restart & Run All* rebuild the namespace even without a provider: the `%%agent` cells
        replay their recorded responses **without** running their tool calls, and the inserted cell
        runs the code. This notebook was saved right after such a run (built live, then *Restart &
        Run All* without a provider), so its `%%agent` cells say that they replayed. `spent` was
        created by the agent:"""),
    code("rs-cells", """
        spent   # defined again by the inserted cell, also when the %%agent cells replay"""),
    md("rs-tree-md", """
        Each entry has an id and a parent: the session is a tree (re-running an earlier `%%agent`
        cell starts a branch from before that cell's prompt). The `*` marks the current path;
        `[cell N]` is the execution count of the cell that sent the prompt:"""),
    code("rs-tree", "%agent tree"),
    md("rs-export-md", """
        ## 2. Export to Pi's JSONL

        `%agent export` writes the active session as a Pi v3 session file: a header line, then one
        entry per line. Notebook facts (the cell id, the execution count) ride along in extra fields
        that Pi ignores. From a shell, the same without a kernel:
        `ipyagent export reproducible-session.ipynb --format pi -o session.jsonl`
        (or `--format markdown` for a readable transcript)."""),
    code("rs-export", """
        %agent export -o {workdir}/session.jsonl
        for line in (workdir / "session.jsonl").read_text().splitlines()[1:]:
            entry = json.loads(line)
            message = entry.get("message", {})
            print(entry["id"], entry["type"], message.get("role", ""), message.get("toolName", ""))"""),
    md("rs-inspect-md", """
        `ipyagent inspect FILE` reads a Pi session file (or a notebook) and reports what is in it. The
        command-line tool can also be called from Python, as here:"""),
    code("rs-inspect", """
        from ipyagent import cli

        cli.main(["inspect", str(workdir / "session.jsonl")])   # = ipyagent inspect …/session.jsonl"""),
    md("rs-import-md", """
        ## 3. Import

        A Pi session file becomes a session again — in Python with `Session.from_file`, in this
        kernel with `%agent import FILE --name NAME`, or into a notebook's metadata from a shell with
        `ipyagent import session.jsonl NOTEBOOK.ipynb --session NAME`. Ids and parents survive the
        round trip:"""),
    code("rs-import", """
        from ipyagent import Session
        from ipyagent.notebook.extension import get_runtime

        imported = Session.from_file(workdir / "session.jsonl")
        here = get_runtime(get_ipython()).slot().session
        print(f"imported {len(imported)} entries; same path as this kernel's session:",
              [e["id"] for e in imported.path()] == [e["id"] for e in here.path()])"""),
    code("rs-import-cli", """
        cli.main(["import", str(workdir / "session.jsonl"), str(workdir / "copy.ipynb"), "--session", "imported"])
        copy = Session.from_file(workdir / "copy.ipynb", session="imported")
        print(len(copy), "entries in copy.ipynb; last reply:", copy.path()[-1]["message"]["content"][0]["text"][:60], "…")"""),
    md("rs-replay-md", """
        ## 4. Replay

        Re-executing this notebook with no provider configured replays it: each `%%agent` cell takes
        its model responses from the entries recorded for that cell (matched by cell id), recorded
        tool calls are not run again, and everything else — the budget, the compaction trigger, the
        cut point — runs for real. The result is the same session.

        * `ipyagent run reproducible-session.ipynb --replay -o out.ipynb` — from a shell, no key needed
          (add `--replay-tools` to run the recorded tool calls again and report differences);
        * `%agent replay on|off|auto` — in a kernel; `Agent.replay = "auto"` (the default) replays only
          when no provider is configured, so with a key set the notebook runs live;
        * if a run departs from the recording (an edited prompt, another cut point), the cell says
          where, and continues live when a provider is configured."""),
    code("rs-replay", "%agent replay status"),
], R_TURNS)


def _check_repro(nb: dict[str, Any], policy: Any, server: Any) -> None:
    text = json.dumps(nb)
    assert "same path as this kernel's session: True" in text
    ids = [c["id"] for c in nb["cells"]]
    inserted = nb["cells"][ids.index("rs-a1") + 1]
    assert "".join(inserted["source"]).startswith("# from ipyagent "), inserted


REPRO.check = _check_repro
REPRO.replay_after_build = True

NOTEBOOKS = [QUICKSTART, TOUR, CUSTOM, REPRO]
