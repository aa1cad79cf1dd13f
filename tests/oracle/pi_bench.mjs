#!/usr/bin/env node
// Pi's own timings on a session file, for tests/benchmarks/core.py to print beside ipyagent's.
//
// Usage: node pi_bench.mjs FILE [--pi 1.6|0.73] [--repeats N] [--turns N]
// Prints one JSON object: {"version", "load_ms", "prepare_ms" (median of repeated
// prepareCompaction(getBranch()) with the default settings), "turn_ms" (median of appendMessage +
// buildSessionContext + the context tokens, one entry per turn, as the agent does before a request)}.
// The SessionManager is in memory (persistence off): nothing is written.

import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
};
const file = argv[0];
const version = opt("--pi", "1.6");
const repeats = Number(opt("--repeats", "15"));
const turns = Number(opt("--turns", "200"));
const root = version === "1.6" ? ["@earendil-works", "pi-coding-agent"] : ["pi073"];
const dist = join(here, "node_modules", ...root, "dist", "core");
const { SessionManager } = await import(pathToFileURL(join(dist, "session-manager.js")).href);
const compaction = await import(pathToFileURL(join(dist, "compaction", "compaction.js")).href);

const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const now = () => Number(process.hrtime.bigint()) / 1e6;

let t0 = now();
const sm = new SessionManager(process.cwd(), "", file, false);
const loadMs = now() - t0;
const settings = { ...compaction.DEFAULT_COMPACTION_SETTINGS };
compaction.prepareCompaction(sm.getBranch(), settings); // warm up the JIT
const prepare = [];
for (let i = 0; i < repeats; i++) {
  t0 = now();
  compaction.prepareCompaction(sm.getBranch(), settings);
  prepare.push(now() - t0);
}
const turn = [];
for (let k = 0; k < turns; k++) {
  const message = k % 2
    ? { role: "assistant", content: [{ type: "text", text: "One test still fails; fixing it." }], api: "anthropic-messages",
        provider: "anthropic", model: "claude-sonnet-4-5", usage: { input: 1200 + k, output: 60, cacheRead: 51000, cacheWrite: 0,
        totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop", timestamp: k }
    : { role: "user", content: `step ${k}: run the tests again and fix what fails`, timestamp: k };
  t0 = now();
  sm.appendMessage(message);
  const { messages } = sm.buildSessionContext();
  compaction.estimateContextTokens(messages);
  turn.push(now() - t0);
}
process.stdout.write(JSON.stringify({ version, load_ms: loadMs, prepare_ms: median(prepare), turn_ms: median(turn) }) + "\n");
