#!/usr/bin/env node
// The Pi parity oracle: runs Pi's own `prepareCompaction` (from the pinned npm package
// @mariozechner/pi-coding-agent, see package.json) on Pi v3 session files and prints the same
// JSON object as `ipyagent compact FILE --dry-run --json`.
//
// Usage:
//   node pi_prepare.mjs [--reserve-tokens N] [--keep-recent-tokens N] FILE
//       prints one JSON object for FILE
//   node pi_prepare.mjs --batch  < requests.jsonl
//       one request per line: {"file": PATH, "reserveTokens"?: N, "keepRecentTokens"?: N}
//       one answer per line, in order: {"file": PATH, "result": {...}} or {"file": PATH, "error": "..."}
//
// The session is loaded the way Pi loads it (SessionManager: malformed lines skipped, the
// header validated, migrations applied in memory, the leaf = the last entry in file order) and
// the path is SessionManager.getBranch(), exactly what AgentSession.compact() passes.
// Nothing is written: the SessionManager is created with persistence off.

import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "core");
// prepareCompaction is not re-exported from the package's index (and the package's "exports"
// map hides deep paths), so the two modules are imported by file URL.
const { prepareCompaction, DEFAULT_COMPACTION_SETTINGS } = await import(
  pathToFileURL(join(dist, "compaction", "compaction.js")).href
);
const { computeFileLists } = await import(pathToFileURL(join(dist, "compaction", "utils.js")).href);
const { SessionManager } = await import(pathToFileURL(join(dist, "session-manager.js")).href);

// The path of the last file loaded: a batch asks for one file at several budgets in a row.
// (prepareCompaction only reads the entries.)
let cached = { file: undefined, pathEntries: undefined };

function loadPath(file) {
  if (cached.file !== file) {
    // persist=false: load only, never rewrite or create anything.
    const manager = new SessionManager(process.cwd(), "", file, false);
    cached = { file, pathEntries: manager.getBranch() };
  }
  return cached.pathEntries;
}

export function piPrepare(file, reserveTokens, keepRecentTokens) {
  const settings = {
    enabled: true,
    reserveTokens: reserveTokens ?? DEFAULT_COMPACTION_SETTINGS.reserveTokens,
    keepRecentTokens: keepRecentTokens ?? DEFAULT_COMPACTION_SETTINGS.keepRecentTokens,
  };
  const pathEntries = loadPath(file);
  const prep = prepareCompaction(pathEntries, settings);
  if (!prep) return { nothing_to_compact: true };
  const { readFiles, modifiedFiles } = computeFileLists(prep.fileOps);
  return {
    first_kept_entry_id: prep.firstKeptEntryId,
    is_split_turn: prep.isSplitTurn,
    tokens_before: prep.tokensBefore,
    messages_to_summarize: prep.messagesToSummarize.length,
    turn_prefix_messages: prep.turnPrefixMessages.length,
    read_files: readFiles,
    modified_files: modifiedFiles,
    previous_summary: prep.previousSummary !== undefined,
  };
}

function intArg(value, name) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} needs a non-negative integer, got ${value}`);
  return n;
}

function main(argv) {
  let reserve;
  let keep;
  let batch = false;
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--batch") batch = true;
    else if (a === "--reserve-tokens") reserve = intArg(argv[++i], a);
    else if (a === "--keep-recent-tokens") keep = intArg(argv[++i], a);
    else if (a === "-h" || a === "--help") {
      process.stdout.write("usage: pi_prepare.mjs [--reserve-tokens N] [--keep-recent-tokens N] FILE | --batch < requests.jsonl\n");
      return 0;
    } else files.push(a);
  }
  if (batch) {
    const out = [];
    for (const line of readFileSync(0, "utf8").split("\n")) {
      if (!line.trim()) continue;
      const req = JSON.parse(line);
      try {
        const result = piPrepare(req.file, req.reserveTokens ?? reserve, req.keepRecentTokens ?? keep);
        out.push(JSON.stringify({ file: req.file, result }));
      } catch (err) {
        out.push(JSON.stringify({ file: req.file, error: String(err?.stack ?? err) }));
      }
    }
    process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
    return 0;
  }
  if (files.length !== 1) {
    process.stderr.write("pi_prepare.mjs: give exactly one session file (or --batch)\n");
    return 2;
  }
  process.stdout.write(JSON.stringify(piPrepare(files[0], reserve, keep)) + "\n");
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  process.exitCode = main(process.argv.slice(2));
}
