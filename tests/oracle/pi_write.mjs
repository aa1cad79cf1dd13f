#!/usr/bin/env node
// Sessions written by Pi 1.6.0's own SessionManager (persisted, as Pi writes them), using every
// entry type 1.6 added: system messages (a full one, then section and tool patches), usage
// entries, context edits (omit, replace, a string replacement of a tool result), compactions with
// their systemMessage checkpoint and usage, a retain-none compaction, a branch summary with usage,
// assistant messages with 1.6's new fields, tool results with usage and codemode nestedCalls,
// role "custom" messages, Pi's own custom entries.
//
// Usage: node pi_write.mjs DIR SEED COUNT  -> writes COUNT files into DIR, prints their paths.
// The content is a function of SEED (a small PRNG); ids and timestamps are Pi's own (random
// ids, the clock), so the files differ between runs but say the same things.

import { mkdirSync, readdirSync, renameSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "core");
const { SessionManager } = await import(pathToFileURL(join(dist, "session-manager.js")).href);

function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = "the a function class return value import data file path test error result token context window summary session entry message tool call read write edit bash grep cut point kept history turn split prefix model usage cache 😀 naïve 日本語".split(" ");
const TOOLS = [
  { name: "read", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } },
  { name: "bash", description: "Run a command", parameters: { type: "object", properties: { command: { type: "string" } } } },
  { name: "edit", description: "Edit a file", parameters: { type: "object", properties: { path: { type: "string" }, oldText: { type: "string" }, newText: { type: "string" } } } },
  { name: "write", description: "Write a file", parameters: { type: "object", properties: { path: { type: "string" }, content: { type: "string" } } } },
];
const PATHS = ["src/app.py", "README.md", "tests/test_app.py", "notes/😀.md", "docs/日本語.md"];

function writeOne(dir, seed) {
  const rnd = prng(seed);
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
  const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
  const text = (lo, hi) => Array.from({ length: int(lo, hi) }, () => pick(WORDS)).join(" ");
  const usage = (input, output) => {
    const cacheRead = rnd() < 0.5 ? int(0, input) : 0;
    return { input, output, cacheRead, cacheWrite: 0, totalTokens: input + output + cacheRead,
             cost: { input: input * 3e-6, output: output * 15e-6, cacheRead: 0, cacheWrite: 0, total: input * 3e-6 + output * 15e-6 } };
  };
  const sm = SessionManager.create("/tmp/pi-written", dir);
  let ctx = 800;
  let call = 0;
  const visible = [];  // ids a context edit may target: {id, role}
  sm.appendModelChange("anthropic", "claude-sonnet-4-5");
  sm.appendThinkingLevelChange(pick(["off", "low", "high"]));
  sm.appendMessage({ role: "system", content: "", sections: {
    preamble: "You are a coding assistant. " + text(5, 30),
    tools: "<tools>\n- read: Read a file\n- bash: Run a command\n</tools>",
    rules: "<rules>\n" + text(5, 40) + "\n</rules>",
    cwd: "<cwd>\n/tmp/pi-written\n</cwd>",
  }, toolsAdded: TOOLS.slice(0, int(2, 4)), timestamp: 1 });
  const turns = int(3, 14);
  for (let t = 0; t < turns; t++) {
    const r = rnd();
    if (r < 0.08) {
      sm.appendMessage({ role: "custom", customType: "reminder", content: text(3, 60), display: true, timestamp: 2 });
    } else if (r < 0.16) {
      const id = sm.appendCustomMessageEntry("todo", rnd() < 0.5 ? text(3, 80) : [{ type: "text", text: text(3, 80) }], true);
      visible.push({ id, role: "custom" });
    } else if (r < 0.2) {
      sm.appendMessage({ role: "bashExecution", command: "ls", output: text(0, 200), exitCode: 0, cancelled: false, truncated: false, timestamp: 3 });
    }
    const userContent = rnd() < 0.2
      ? [{ type: "text", text: text(3, 200) }, { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }]
      : text(3, 300);
    visible.push({ id: sm.appendMessage({ role: "user", content: userContent, timestamp: 4 }), role: "user" });
    ctx += 100;
    const steps = int(0, 4);
    for (let s = 0; s <= steps; s++) {
      const last = s === steps;
      const content = [];
      if (rnd() < 0.4) content.push({ type: "thinking", thinking: text(5, 100), thinkingSignature: "sig" });
      content.push({ type: "text", text: text(2, 150) });
      const calls = [];
      if (!last) {
        for (let k = int(1, 2); k > 0; k--) {
          const name = pick(["read", "bash", "edit", "write"]);
          const args = name === "bash" ? { command: "pytest -q" } : { path: pick(PATHS) };
          const id = `call_${++call}`;
          content.push({ type: "toolCall", id, name, arguments: args });
          calls.push({ id, name });
        }
      }
      const out = int(10, 400);
      ctx += out;
      const assistant = { role: "assistant", content, api: "anthropic-messages", provider: "anthropic",
        model: "claude-sonnet-4-5", usage: rnd() < 0.05 ? { input: ctx, output: out } : usage(ctx, out),
        stopReason: calls.length ? "toolUse" : pick(["stop", "stop", "stop", "length"]), timestamp: 5 };
      if (rnd() < 0.5) Object.assign(assistant, { responseModel: "claude-sonnet-4-5-20250929", responseId: `msg_${seed}_${t}_${s}`, thinkingLevel: "low" });
      if (rnd() < 0.03) { assistant.stopReason = "error"; assistant.errorMessage = "Overloaded"; assistant.usage = usage(0, 0); }
      visible.push({ id: sm.appendMessage(assistant), role: "assistant" });
      for (const c of calls) {
        const result = { role: "toolResult", toolCallId: c.id, toolName: c.name,
          content: [{ type: "text", text: text(5, rnd() < 0.2 ? 2500 : 300) }], isError: rnd() < 0.1, timestamp: 6 };
        if (rnd() < 0.15) result.usage = usage(int(100, 2000), int(10, 200));
        if (rnd() < 0.15) result.nestedCalls = { calls: [{ id: "n1", name: pick(["read", "write", "edit"]), arguments: { path: pick(PATHS) }, status: "done", durationMs: 3 }], complete: true };
        visible.push({ id: sm.appendMessage(result), role: "toolResult" });
        ctx += 80;
      }
      if (rnd() < 0.1) sm.appendUsage("cache_warm", "anthropic", "claude-sonnet-4-5", usage(int(100, 5000), 0), rnd() < 0.5 ? "warmed" : undefined);
    }
    const e = rnd();
    if (e < 0.25 && visible.length) {
      const target = pick(visible);
      const replacement = rnd() < 0.5 ? null : { content: rnd() < 0.5 ? `[hidden: ${text(1, 5)}]` : [{ type: "text", text: text(1, 20) }] };
      sm.appendContextEdit(target.id, replacement);
    }
    if (rnd() < 0.15) {
      sm.appendMessage({ role: "system", content: "", sections: rnd() < 0.5 ? { rules: "<rules>\n" + text(5, 40) + "\n</rules>" } : { addendum: text(3, 30), cwd: null },
        ...(rnd() < 0.5 ? { toolsRemoved: [{ name: "bash" }] } : { toolsAdded: [TOOLS[int(0, 3)]] }), timestamp: 7 });
    }
    const c = rnd();
    const branch = sm.getBranch();
    if (c < 0.15 && branch.length > 6) {
      const kept = branch[int(Math.floor(branch.length / 2), branch.length - 1)];
      if (kept.type !== "compaction") {
        sm.appendCompaction("## Goal\n" + text(10, 80), kept.id, ctx, { readFiles: [pick(PATHS)], modifiedFiles: [] }, false, rnd() < 0.7 ? usage(ctx, 300) : undefined);
        visible.length = 0;
      }
    } else if (c < 0.2) {
      sm.appendCompaction("## Goal\n" + text(10, 80), null, ctx, undefined, rnd() < 0.5, usage(ctx, 200));  // retain-none
      visible.length = 0;
    } else if (c < 0.27 && branch.length > 4) {
      const users = branch.filter((x) => x.type === "message" && x.message.role === "user");
      if (users.length > 1) {
        const target = pick(users.slice(0, -1));
        sm.branchWithSummary(target.parentId, rnd() < 0.2 ? "" : "The user explored a branch. " + text(5, 60), { readFiles: [], modifiedFiles: [] }, false, usage(500, 100));
        visible.length = 0;
      }
    }
    if (rnd() < 0.1) sm.appendLabelChange(pick(sm.getBranch()).id, pick(["checkpoint", undefined]));
    if (rnd() < 0.05) sm.appendSessionInfo("pi written " + seed);
    if (rnd() < 0.05) sm.appendCustomEntry("pi.virtual-model-state", { provider: "anthropic", modelId: "claude-sonnet-4-5", state: { n: t } });
  }
  return sm.getSessionFile();
}

const [dir, seedArg, countArg] = process.argv.slice(2);
mkdirSync(dir, { recursive: true });
const seed = Number(seedArg ?? 1);
const count = Number(countArg ?? 1);
const files = [];
for (let i = 0; i < count; i++) {
  const sub = join(dir, `s${seed + i}`);
  mkdirSync(sub, { recursive: true });
  const written = writeOne(sub, seed + i);
  const target = join(dir, `pi16-${String(seed + i).padStart(5, "0")}.jsonl`);
  renameSync(written, target);
  files.push(target);
}
process.stdout.write(files.join("\n") + "\n");
