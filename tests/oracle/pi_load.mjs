#!/usr/bin/env node
// How Pi's own SessionManager (the pinned npm package, see package.json) loads session files:
// which entries it indexes, its leaf and the root→leaf path. tests/session/test_pi_loading.py compares
// ipyagent's loading with it.
//
// Usage: node pi_load.mjs --batch < requests.jsonl
//   one request per line: {"file": PATH}
//   one answer per line, in order:
//   {"file": PATH, "result": {"entries": N, "ids": [...], "leaf": ID|null, "branch": [ids root→leaf],
//                             "header_id": ID|null}}  or  {"file": PATH, "error": "..."}
// Nothing is written: the SessionManager is created with persistence off.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "core");
const { SessionManager } = await import(pathToFileURL(join(dist, "session-manager.js")).href);

function piLoad(file) {
  const manager = new SessionManager(process.cwd(), "", file, false);
  const entries = manager.getEntries();
  return {
    entries: entries.length,
    ids: entries.map((e) => e.id ?? null),
    leaf: manager.getLeafId() ?? null,
    branch: manager.getBranch().map((e) => e.id),
    header_id: manager.getHeader()?.id ?? null,
  };
}

const out = [];
for (const line of readFileSync(0, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const req = JSON.parse(line);
  try {
    out.push(JSON.stringify({ file: req.file, result: piLoad(req.file) }));
  } catch (err) {
    out.push(JSON.stringify({ file: req.file, error: String(err?.stack ?? err) }));
  }
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
