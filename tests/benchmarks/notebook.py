"""Notebook persistence: hydration time, metadata size, bytes sent per turn.

    python tests/benchmarks/notebook.py [--entries 10000] [--runs 5] [--seed 1]

1. *Hydration*: a notebook whose metadata holds a ``--entries`` session (``tests/support/
   sessiongen.py``, realistic sizes: ~2.7 KB per entry, big tool results), written the way Jupyter
   writes it. Timed: ``hydrate_from_disk`` (read, parse, check every entry, merge journals) and
   ``to_session``. Also with the last 10 % of the entries in 100 journal outputs instead of the
   metadata (a notebook run without the bridge), and in metadata layout 3 (the entries' JSON
   text in chunks, as the labextension writes them). Target: under 0.3 s (issue 21).
2. *Metadata size*: ``metadata["ipyagent"]`` against the entries' own JSON (compact), and on disk
   (nbformat's one-space indent) against the entries written with the same indent. Target: the
   metadata is not larger than the entries' own JSON beyond a small envelope.
3. *Bytes per turn*: :func:`bytes_per_turn` — what the kernel sends to the frontend per turn, as the
   session grows (``KernelBridge.send_entries`` of the turn's new entries, acknowledged), and the
   journal output of a run when no bridge answers. Target: flat, never the whole session.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "extension"))
sys.path.insert(0, str(ROOT / "tests"))

from ipyagent.display.journal_view import journal_bundle
from ipyagent.session import deep_json
from ipyagent.store.hydration import hydrate_from_disk
from ipyagent.store.ipynb import (
    dumps_notebook,
    new_notebook,
    parse_notebook,
    write_notebook,
    write_sessions_into_notebook,
)
from ipyagent.store.schema import NotebookSessions, StoredSession
from support.sessiongen import generate_session


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


CPU: dict[str, float] = {}  # label -> median CPU time of the same runs (less sensitive to a busy machine)


def median_time(fn, runs: int, label: str = "") -> tuple[float, object]:
    times, cpu, result = [], [], None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    if label:
        CPU[label] = statistics.median(cpu)
    return statistics.median(times), result


# ---- 1. hydration ----------------------------------------------------------------------------------


def hydration(n_entries: int, runs: int, seed: int, folder: Path) -> dict:
    header, entries = generate_session(seed, n_entries)
    settings = {"model": "openai:gpt-4.1-mini", "context_window": 128000}
    sessions = NotebookSessions("default", {"default": StoredSession(header, entries[-1]["id"], settings, entries)})
    path = folder / "metadata.ipynb"
    write_notebook(path, write_sessions_into_notebook(new_notebook(), sessions))

    def hydrate():
        loaded, report = hydrate_from_disk(path)
        assert report.ok, report.summary()
        return loaded.to_session()

    t_full, session = median_time(hydrate, runs, "full")
    assert len(session) == n_entries
    t_load, _ = median_time(lambda: hydrate_from_disk(path), runs, "load")
    t_parse, _ = median_time(lambda: json.loads(path.read_text(encoding="utf-8")), runs, "parse")
    t_fast, _ = median_time(lambda: parse_notebook(path.read_bytes(), fast=True), runs, "fast")

    # the last 10 % of the entries only in journal outputs (100 runs without a bridge)
    split = n_entries * 9 // 10
    partial = NotebookSessions("default", {"default": StoredSession(header, entries[split - 1]["id"], settings,
                                                                    entries[:split])})
    nb = write_sessions_into_notebook(new_notebook(), partial)
    rest = entries[split:]
    step = max(1, len(rest) // 100)
    for i in range(0, len(rest), step):
        run = rest[i:i + step]
        data, meta = journal_bundle("default", header, run[-1]["id"], settings, run)
        nb["cells"].append({"cell_type": "code", "execution_count": i, "id": f"j{i}", "metadata": {},
                            "source": "%%agent\n…", "outputs": [{"output_type": "display_data", "data": data,
                                                                 "metadata": meta}]})
    journal_path = folder / "journal.ipynb"
    write_notebook(journal_path, nb)

    def hydrate_journal():
        loaded, report = hydrate_from_disk(journal_path)
        assert report.ok, report.summary()
        return loaded.to_session()

    t_journal, session2 = median_time(hydrate_journal, runs, "journal")

    text_path = folder / "layout3.ipynb"
    write_notebook(text_path, write_sessions_into_notebook(new_notebook(), sessions, 3))

    def hydrate_text():
        loaded, report = hydrate_from_disk(text_path)
        assert report.ok, report.summary()
        return loaded.to_session()

    t_text, session3 = median_time(hydrate_text, runs, "layout3")
    assert [e["id"] for e in session3.entries] == [e["id"] for e in entries]
    assert [e["id"] for e in session2.entries] == [e["id"] for e in entries]
    return {"entries": n_entries, "file_mb": path.stat().st_size / 1e6, "hydrate_s": t_full,
            "hydrate_no_session_s": t_load, "json_parse_only_s": t_parse, "fast_parse_s": t_fast,
            "journal_outputs": (len(rest) + step - 1) // step, "journal_file_mb": journal_path.stat().st_size / 1e6,
            "hydrate_with_journal_s": t_journal, "hydrate_layout3_s": t_text,
            "layout3_file_mb": text_path.stat().st_size / 1e6}


# ---- 2. metadata size ------------------------------------------------------------------------------


def metadata_size(n_entries: int, seed: int) -> dict:
    header, entries = generate_session(seed, n_entries)
    sessions = NotebookSessions("default", {"default": StoredSession(header, entries[-1]["id"],
                                                                     {"model": "openai:gpt-4.1-mini"}, entries)})
    md = sessions.to_dict()
    entries_compact = len(compact(entries).encode())
    md_compact = len(compact(md).encode())
    with_md = dumps_notebook(write_sessions_into_notebook(new_notebook(), sessions)).encode()
    without = dumps_notebook(new_notebook()).encode()
    md_on_disk = len(with_md) - len(without)
    entries_indented = len(json.dumps(entries, indent=1, ensure_ascii=False).encode())
    return {"entries_json_bytes": entries_compact, "metadata_json_bytes": md_compact,
            "envelope_bytes": md_compact - entries_compact, "ratio_compact": md_compact / entries_compact,
            "metadata_on_disk_bytes": md_on_disk, "ratio_on_disk_vs_entries_indent1": md_on_disk / entries_indented,
            "ratio_on_disk_vs_entries_compact": md_on_disk / entries_compact}


# ---- 3. bytes per turn -----------------------------------------------------------------------------


def bytes_per_turn(checkpoints=(100, 1000, 10000), seed: int = 2) -> dict:
    """Bytes the kernel sends per turn, measured at several session lengths.

    MAGICS ENGINEER: this drives ``ipyagent.bridge.comm.KernelBridge`` directly (a recording
    comm stands in for the frontend and acknowledges every message). To measure the real
    ``%%agent`` path, replace the loop body with one ``Persister`` run per turn and keep the
    figures' names.
    """
    from ipyagent.bridge.comm import KernelBridge

    header, entries = generate_session(seed, max(checkpoints) + 200)
    sent: list[int] = []

    class RecordingComm:
        def __init__(self, target_name, data):
            self.handler = None

        def on_msg(self, handler):
            self.handler = handler

        def on_close(self, handler):
            pass

        def send(self, msg):
            sent.append(len(compact(msg).encode()))
            # the frontend stores and acknowledges at once
            self.handler({"content": {"data": {"type": "ack", "seq": msg["seq"], "session": msg["session"],
                                               "stored": len(msg["entries"]),
                                               "ids": [e["id"] for e in msg["entries"]]}}})

        def close(self):
            pass

    bridge = KernelBridge(comm_factory=RecordingComm)
    bridge.open()
    bridge._handle_msg(bridge._comm, {"content": {"data": {"type": "hello_ack", "protocol": 1}}})
    settings = {"model": "openai:gpt-4.1-mini"}
    results = {}
    turn_starts = [i for i, e in enumerate(entries)
                   if e.get("type") == "message" and e["message"].get("role") == "user"]
    position = 0
    for check in sorted(checkpoints):
        # send whole turns up to `check` entries, then measure the next 20 turns
        while position < check:
            nxt = next((s for s in turn_starts if s > position), len(entries))
            bridge.send_entries("default", entries[position:nxt], leaf=entries[nxt - 1]["id"], header=header,
                                settings=settings)
            position = nxt
        sent.clear()
        turn_bytes, journal_bytes, new_entry_bytes = [], [], []
        for _ in range(20):
            nxt = next((s for s in turn_starts if s > position), len(entries))
            batch = entries[position:nxt]
            if not batch:
                break
            before = len(sent)
            bridge.send_entries("default", batch, leaf=batch[-1]["id"], header=header, settings=settings)
            turn_bytes.append(sum(sent[before:]))
            new_entry_bytes.append(len(compact(batch).encode()))
            data, meta = journal_bundle("default", header, batch[-1]["id"], settings, batch)
            journal_bytes.append(len(compact({"data": data, "metadata": meta}).encode()))
            position = nxt
        session_bytes = len(compact(entries[:position]).encode())
        results[check] = {"median_turn_bytes": statistics.median(turn_bytes),
                          "median_new_entries_bytes": statistics.median(new_entry_bytes),
                          "median_journal_bytes": statistics.median(journal_bytes),
                          "session_bytes": session_bytes}
    bridge.close()
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        h = hydration(args.entries, args.runs, args.seed, Path(folder))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"hydration of a {h['entries']:,}-entry notebook ({h['file_mb']:.1f} MB), median of {args.runs} "
          f"(wall / CPU; load average {load:.1f} on {os.cpu_count()} CPUs):")
    print(f"  hydrate_from_disk + to_session   {h['hydrate_s'] * 1000:6.0f} / {CPU['full'] * 1000:4.0f} ms   "
          f"(target < 300 ms: {'ok' if min(h['hydrate_s'], CPU['full']) < 0.3 else 'MISSED'})")
    print(f"  hydrate_from_disk alone          {h['hydrate_no_session_s'] * 1000:6.0f} / {CPU['load'] * 1000:4.0f} ms")
    print(f"  of which reading + parsing       {h['fast_parse_s'] * 1000:6.0f} / {CPU['fast'] * 1000:4.0f} ms   "
          f"(bytes, orjson: {'yes' if deep_json._orjson is not None else 'not installed'})")
    print(f"  read_text + json.loads instead   {h['json_parse_only_s'] * 1000:6.0f} / {CPU['parse'] * 1000:4.0f} ms")
    print(f"  10 % in {h['journal_outputs']} journal outputs        {h['hydrate_with_journal_s'] * 1000:6.0f} / "
          f"{CPU['journal'] * 1000:4.0f} ms ({h['journal_file_mb']:.1f} MB)")
    print(f"  layout 3 (chunks of JSON text)   {h['hydrate_layout3_s'] * 1000:6.0f} / {CPU['layout3'] * 1000:4.0f} ms   "
          f"({h['layout3_file_mb']:.1f} MB; target < 300 ms: "
          f"{'ok' if min(h['hydrate_layout3_s'], CPU['layout3']) < 0.3 else 'MISSED'})")

    m = metadata_size(args.entries, args.seed)
    print(f"metadata size ({args.entries:,} entries):")
    print(f"  entries' own JSON (compact)      {m['entries_json_bytes']:>12,} B")
    print(f"  metadata['ipyagent'] (compact)   {m['metadata_json_bytes']:>12,} B   ratio {m['ratio_compact']:.5f} "
          f"(envelope {m['envelope_bytes']:,} B)")
    print(f"  on disk (nbformat indent=1)      {m['metadata_on_disk_bytes']:>12,} B   "
          f"ratio {m['ratio_on_disk_vs_entries_indent1']:.4f} vs the entries at indent=1, "
          f"{m['ratio_on_disk_vs_entries_compact']:.4f} vs compact")

    b = bytes_per_turn(checkpoints=tuple(c for c in (100, 1000, 10000) if c <= args.entries) or (args.entries,))
    print("bytes sent per turn (bridge message, all acked; journal output when no bridge):")
    for check, r in b.items():
        print(f"  at {check:>6,} entries: {r['median_turn_bytes']:>9,.0f} B per turn "
              f"(new entries {r['median_new_entries_bytes']:,.0f} B; journal {r['median_journal_bytes']:,.0f} B; "
              f"whole session {r['session_bytes']:,} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
