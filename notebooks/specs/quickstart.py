"""The quickstart notebook: a provider, a first prompt, the ``python`` tool on a small dataset,
asking about a cell that failed, ``{In[n]}`` in a prompt, pins, the budget widget and
``%agent context``. The figures in the scripted answers are computed here from the toy data the
notebook defines, so what the "model" says matches what its tool calls really printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ipyagent.testing import FakeProviderServer
from nbspec import Notebook, agent, code, md, provenance, raises
from scripted import Scripted, Step, Turn

# ---- toy data (plain lists and dicts; no pandas) --------------------------------------------------


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
# the notebook's own cell, run here too: the figures below are the ones the kernel prints
exec(ORDERS_CODE, _ons)  # noqa: S102
ORDERS = _ons["orders"]
SPENT: dict[str, float] = {}
for _o in ORDERS:
    SPENT[_o["customer"]] = round(SPENT.get(_o["customer"], 0) + _o["total"], 2)
TOP = max(SPENT, key=lambda customer: SPENT[customer])
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
RANKED = sorted(SPENT.items(), key=lambda item: -item[1])
COUNTS = {c: sum(1 for o in ORDERS if o["customer"] == c) for c in SPENT}
FX_SERVER = (Path(__file__).resolve().parents[1] / "fx_server.py").read_text(encoding="utf-8")
EUR_RATE = 1.15  # fx_server.py's made-up rate
SKILL_CODE = """
# A skill is a folder with a SKILL.md: its front matter says what it is for, its body how to do it.
from pathlib import Path

skill = Path(".agents/skills/spending-report")
skill.mkdir(parents=True, exist_ok=True)
(skill / "SKILL.md").write_text(\"\"\"---
name: spending-report
description: Writes a customer spending report the way our team does.
---
One line per customer, the largest total first: the name in bold, the total in pounds with two
decimals, then the number of orders in brackets. No other text.
\"\"\")
%agent skills
"""

# ---- what the model says in each %%agent cell -----------------------------------------------------

TURNS = {
    "qs-hello": Turn(
        "Hello! In one sentence: what can you do in this notebook?",
        [Step("I can read your notebook's variables and run Python in this kernel, read and edit files, and "
              "run shell commands — ask me to explore data, write or fix code, or explain what something does.")],
        goal="Get to know the agent."),
    "qs-orders": Turn(
        "`orders` is a list of dicts. Which customer spent the most, and what is the average order value?",
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
    "qs-email": Turn(
        "Now put that in two lines I can paste into an email.",
        [Step(f"{TOP} is our best customer this week, with {SPENT[TOP]:.2f} across "
              f"{sum(1 for o in ORDERS if o['customer'] == TOP)} orders.\n"
              f"Across all {len(ORDERS)} orders the average order value was {AVG:.2f}.")],
        goal="Write the result up for an email."),
    "qs-why": Turn(
        "Why did the cell above fail?",
        [Step("It divides by `len(v)` for every customer, and **Margaret** has no orders yet: her list is "
              "empty, so `sum(v) / len(v)` is `0 / 0`, which raises `ZeroDivisionError` (the last frame of "
              "the traceback, in the dict comprehension). Give customers without orders `None` instead:\n\n"
              "```python\n" + FIXED_CODE.splitlines()[0] + "\n```")],
        goal="Understand why the per-customer average failed."),
    "qs-fix": Turn(
        f"Apply that fix to {{In[{AVERAGE_COUNT}]}} and run it.",
        [Step("Running the fixed comprehension.", [("python", {"code": FIXED_CODE})]),
         Step("Fixed: " + ", ".join(f"{c} {v:.2f}" if v is not None else f"{c} `None` (no orders yet)"
                                    for c, v in AVERAGE.items()) + ". The result is in `average`.")],
        goal="Fix the per-customer average.", match="Apply that fix to \n```python\n# Average order value"),
    "qs-ada": Turn(
        "What did Ada spend in total?",
        [Step(f"Ada spent **£{sum(ADA):.2f}** in total, over {len(ADA)} orders "
              f"({' + '.join(f'£{t:.2f}' for t in ADA)}).")],
        goal="Ada's total spend."),
    "qs-skill-use": Turn(
        "Write the spending report.",
        [Step("", [("skill", {"name": "spending-report"})]),
         Step("\n".join(f"**{c}** £{t:.2f} ({COUNTS[c]} orders)" for c, t in RANKED))],
        goal="The spending report, the team's way."),
    "qs-fx": Turn(
        "What did Ada spend, in euros?",
        [Step("", [("mcp__fx__convert", {"amount": round(sum(ADA), 2), "currency": "EUR"})]),
         Step(f"Ada spent £{sum(ADA):.2f}, which is **€{sum(ADA) * EUR_RATE:.2f}** at the fx server's rate.")],
        goal="Ada's spend in euros."),
}


def _check(nb: dict[str, Any], policy: Scripted, server: FakeProviderServer) -> None:
    assert server.summary_calls == 0
    chats = [json.dumps(r.body["messages"]) for r in server.requests if r.kind == "chat"]
    why = next(c for c in chats if TURNS["qs-why"].prompt in c)
    assert "ZeroDivisionError: division by zero" in why and "per_customer = {c:" in why, why[-2000:]
    fix = next(c for c in chats if "Apply that fix to" in c)
    assert "customers = [" in fix.split("Apply that fix to")[-1], "In[n] was not the failing cell's source"
    ada = [r for r in server.requests if r.kind == "chat" and TURNS["qs-ada"].prompt in json.dumps(r.body["messages"])]
    assert ada and "two decimals, like £12.50" in ada[0].body["messages"][0]["content"]


NOTEBOOK = Notebook("quickstart", [
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
    agent("qs-hello", TURNS),
    md("qs-tool-md", """
        ## 3. The agent uses your kernel

        The agent sees what you define. Here is a small dataset — plain Python lists and dicts:"""),
    code("qs-data", ORDERS_CODE),
    agent("qs-orders", TURNS),
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
    agent("qs-email", TURNS),
    md("qs-activity-md", """
        ## 5. The agent sees what you ran

        Each `%%agent` prompt carries a short record of what happened in the notebook since the
        previous prompt: the cells that ran (execution count, source, value, printed output, and
        errors with the last frames of the traceback) and which variables appeared, changed or went
        away. So you can simply ask about "the cell above". This one fails:"""),
    raises(code("qs-average", AVERAGE_CODE)),
    agent("qs-why", TURNS),
    md("qs-interpolate-md", f"""
        The record is capped (`Agent.notebook_context_tokens`, about 2,000 tokens; the newest cells
        come first, older ones are shortened, and it says so). `%%agent --no-context` leaves it out
        for one prompt, `%config Agent.notebook_context = False` for good, and `%agent context`
        shows the one the next prompt would carry.

        You can also point at a cell or a variable: `{{In[{AVERAGE_COUNT}]}}` is the source of the
        cell that ran as `[{AVERAGE_COUNT}]`, `{{Out[n]}}` its value, `{{Err[n]}}` its error, and
        `{{name}}` a variable's repr. Anything else in braces is left alone, and `{{{{In[n]}}}}` writes
        the braces literally. The note under the cell says what was filled in:"""),
    agent("qs-fix", TURNS),
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
    agent("qs-ada", TURNS),
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
    md("qs-skills-md", """
        ## 9. Skills and MCP servers

        A **skill** ([agentskills.io](https://agentskills.io)) is a folder `<name>/SKILL.md` in
        `.agents/skills/` (or `.claude/skills/`, `.pi/skills/`) of the notebook's folder or its
        parents up to the repository root, or in your `~/.agents/skills/`. The system prompt lists
        only each skill's name and description; the agent loads the body with the `skill` tool when
        a task matches. This cell writes one:"""),
    code("qs-skill", SKILL_CODE),
    agent("qs-skill-use", TURNS),
    md("qs-mcp-md", """
        An **MCP server** brings its own tools (`pip install "ipyagent[mcp]"` for the client).
        `fx_server.py`, next to this notebook, is a toy one with a `convert` tool; a real one is
        configured the same way, e.g. `{"time": {"command": "uvx", "args": ["mcp-server-time"]}}`,
        or `{"url": "http://…/mcp", "headers": {...}}` over HTTP. Its tools are offered as
        `mcp__<server>__<tool>`, ask before each call like `python` (not here: `tool_approval` is
        `"auto"`), and count in the budget; `%agent mcp` lists them with their tokens. The values of
        `env` and `headers` are never saved in the notebook.

        When this notebook **replays** its recording (as `ipyagent run` does without a key), the
        server is not started and the call below gets its recorded result: the replay works without
        the server, or even without the `mcp` package."""),
    code("qs-mcp", """
        import sys

        %config Agent.mcp_servers = {"fx": {"command": sys.executable, "args": ["fx_server.py"]}}
        # The next prompt starts it in the background and waits for it, 5 s at most by default (its
        # tools then join a later prompt); a first start can take longer, so wait up to a minute:
        %config Agent.mcp_start_wait = 60"""),
    agent("qs-fx", TURNS),
    code("qs-mcp-list", "%agent mcp"),
    md("qs-next", """
        ## Where next

        * `how-compaction-works.ipynb` — what happens when the window fills up.
        * `custom-compaction.ipynb` — hooks: a cheaper summary model, your own summary, cancelling.
        * `reproducible-session.ipynb` — export to Pi's JSONL, import, replay.
        * `%agent help` lists every command; `%agent config` every setting."""),
], TURNS, check=_check, files={"fx_server.py": FX_SERVER})
