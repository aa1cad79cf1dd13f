#!/usr/bin/env node
// The Pi parity oracle: Pi's own code (the npm packages pinned in package.json) run on session
// files, one node process for a whole batch. tests/test_pi_parity.py and tests/test_pi_loading.py
// compare ipyagent with it.
//
// Usage: node pi.mjs < requests.jsonl
//   one request per line: {"op": OP, "file": PATH, "pi": "1.6" | "0.73" (default "1.6"), ...}
//   one answer per line, in order: {"file": PATH, "result": {...}} or {"file": PATH, "error": "..."}
//
// OP is
//   "load"     how SessionManager loads the file: {"entries", "ids", "leaf", "branch", "header_id"},
//              or {"rejected": message} when Pi refuses the file (1.6: "not a valid pi session")
//   "prepare"  prepareCompaction(getBranch(), {enabled, reserveTokens, keepRecentTokens}) as
//              `ipyagent compact FILE --dry-run --json` prints it, or {"nothing_to_compact": true}
//   "context"  what the model is sent: convertToLlm(buildSessionContext().messages), and the
//              system prompt text and tool names the replayed system message gives
// Every SessionManager is made with persistence off, so nothing is written (but Pi 1.6 appends a
// missing final "\n" to a file it loads, as it does everywhere).

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const PACKAGES = { "1.6": ["@earendil-works", "pi-coding-agent"], "0.73": ["pi073"] };

async function importPi(version) {
  const dist = join(here, "node_modules", ...PACKAGES[version], "dist", "core");
  const url = (...p) => pathToFileURL(join(dist, ...p)).href;
  // prepareCompaction is not re-exported by the package index and the "exports" map hides deep
  // paths, so the modules are imported by file URL.
  const compaction = await import(url("compaction", "compaction.js"));
  const utils = await import(url("compaction", "utils.js"));
  const sessions = await import(url("session-manager.js"));
  const messages = await import(url("messages.js"));
  let transcript = null;
  if (version === "1.6") {
    const ai = join(here, "node_modules", "@earendil-works", "pi-ai", "dist", "utils");
    transcript = { ...(await import(pathToFileURL(join(ai, "transcript.js")).href)),
                   ...(await import(pathToFileURL(join(ai, "text.js")).href)) };
  }
  return { ...compaction, ...utils, ...sessions, ...messages, transcript };
}

const pis = {};
let cached = { key: undefined, manager: undefined };

function manager(pi, version, file) {
  // the file's manager, or the error Pi rejected it with, kept for the next requests on the file
  const key = `${version}\0${file}`;
  if (cached.key !== key) {
    try {
      cached = { key, manager: new pi.SessionManager(process.cwd(), "", file, false) };
    } catch (error) {
      cached = { key, error };
    }
  }
  if (cached.error !== undefined) throw cached.error;
  return cached.manager;
}

function load(pi, version, file) {
  let m;
  try {
    m = manager(pi, version, file);
  } catch (err) {
    return { rejected: String(err?.message ?? err) };
  }
  const entries = m.getEntries();
  return {
    entries: entries.length,
    ids: entries.map((e) => e.id ?? null),
    leaf: m.getLeafId() ?? null,
    branch: m.getBranch().map((e) => e.id),
    header_id: m.getHeader()?.id ?? null,
  };
}

function prepare(pi, version, file, req) {
  const settings = {
    enabled: true,
    reserveTokens: req.reserveTokens ?? pi.DEFAULT_COMPACTION_SETTINGS.reserveTokens,
    keepRecentTokens: req.keepRecentTokens ?? pi.DEFAULT_COMPACTION_SETTINGS.keepRecentTokens,
  };
  const prep = pi.prepareCompaction(manager(pi, version, file).getBranch(), settings);
  if (!prep) return { nothing_to_compact: true };
  const { readFiles, modifiedFiles } = pi.computeFileLists(prep.fileOps);
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

function context(pi, version, file) {
  const { messages } = manager(pi, version, file).buildSessionContext();
  const out = { messages: pi.convertToLlm(messages) };
  if (pi.transcript) {
    const system = pi.transcript.getCurrentSystemMessage(messages);
    out.system_prompt = system ? pi.transcript.getSystemMessageText(system) : "";
    out.tools = pi.transcript.getCurrentTools(messages).map((t) => t.name);
  }
  return out;
}

const OPS = { load, prepare, context };
const out = [];
for (const line of readFileSync(0, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const req = JSON.parse(line);
  const version = req.pi ?? "1.6";
  try {
    pis[version] ??= await importPi(version);
    out.push(JSON.stringify({ file: req.file, result: OPS[req.op](pis[version], version, req.file, req) }));
  } catch (err) {
    out.push(JSON.stringify({ file: req.file, error: String(err?.stack ?? err) }));
  }
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
