"""Streaming overhead: raw httpx line iteration vs. the providers' parse + dispatch of the same stream.

    python tests/benchmarks/streaming.py [--chunks 10000] [--runs 9] [--pace-us 200] [--stdlib-json]

A separate process serves SSE bodies of 10,000 text chunks, rendered by the fake server's own
OpenAI / Anthropic stream writers, over loopback, so the server costs the client nothing. Each
run reads the same stream twice on a warm connection: once with ``httpx.Response.iter_lines()``
doing nothing with the lines (the floor), once through ``provider.stream()`` (SSE parsing, JSON
decoding, building the message, one event object per chunk, the final MessageDone). Runs
alternate; medians are compared.

Two scenarios:
- *burst*: the whole body is written at once, so the client is CPU-bound. This is the worst case
  and shows the provider's cost per chunk (JSON decoding alone costs more than line iteration).
- *paced*: one write per event, ``--pace-us`` apart (200 us = 5,000 chunks/s, far faster than
  any model streams), which is what a real server does. Target: overhead under 10 %.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "extension"))

import httpx

from ipyagent.providers import (
    AnthropicProvider,
    MessageDone,
    ModelRequest,
    OpenAIChatProvider,
)
from ipyagent.providers.transport import sse
from ipyagent.testing.specs import Reply, anthropic_stream, openai_stream

USAGE = {"input": 1000, "output": 10000, "cacheRead": 0, "cacheWrite": 0}


def render(protocol: str, chunks: int) -> bytes:
    reply = Reply(text="word " * (chunks * 2 // 5), chunk_size=2)  # 2 characters per chunk
    writer = anthropic_stream if protocol == "anthropic" else openai_stream
    return b"".join(writer(reply, "bench-model", USAGE, 2))


def events_of(body: bytes) -> list[bytes]:
    return [event + b"\n\n" for event in body.split(b"\n\n") if event]


def serve(port_queue: multiprocessing.Queue, chunks: int, pace: float) -> None:
    bodies = {"/v1/chat/completions": render("openai", chunks), "/v1/messages": render("anthropic", chunks)}
    paced = {path: events_of(body) for path, body in bodies.items()}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            paced_run = self.path.startswith("/paced/")
            path = self.path.removeprefix("/paced")
            body = bodies[path]
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if not paced_run:
                self.wfile.write(body)
                return
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            due = time.perf_counter()
            for event in paced[path]:
                due += pace
                while time.perf_counter() < due:  # busy-wait: sleep() is too coarse at this rate
                    pass
                self.wfile.write(event)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_queue.put(httpd.server_address[1])
    httpd.serve_forever()


def raw_lines(client: httpx.Client, url: str, body: dict) -> tuple[float, float, int]:
    start, cpu = time.perf_counter(), time.process_time()
    n = 0
    with client.stream("POST", url, json=body) as response:
        for _line in response.iter_lines():
            n += 1
    return time.perf_counter() - start, time.process_time() - cpu, n


def provider_events(provider, request: ModelRequest) -> tuple[float, float, int, dict]:
    start, cpu = time.perf_counter(), time.process_time()
    n = 0
    last = None
    for event in provider.stream(request):
        n += 1
        last = event
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert isinstance(last, MessageDone)
    return elapsed, cpu, n, last.message


def bench(name: str, provider, url: str, runs: int, chunks: int, paced: bool = False) -> float:
    request = ModelRequest(model="bench-model", messages=[{"role": "user", "content": "go"}])
    body = provider.payload(request)
    client = provider.client  # same connection pool, same keep-alive connection for both
    raw_times, parsed_times, raw_cpu, parsed_cpu = [], [], [], []
    for i in range(runs + 1):
        raw, raw_c, lines = raw_lines(client, url, body)
        parsed, parsed_c, events, message = provider_events(provider, request)
        if i:  # the first round warms up connections and caches
            raw_times.append(raw)
            parsed_times.append(parsed)
            raw_cpu.append(raw_c)
            parsed_cpu.append(parsed_c)
    text = message["content"][0]["text"]
    assert len(text) == chunks * 2 // 5 * 5, len(text)
    raw_med, parsed_med = statistics.median(raw_times), statistics.median(parsed_times)
    overhead = (parsed_med - raw_med) / raw_med * 100
    print(f"{name:9s} {'paced' if paced else 'burst':5s} {lines:6d} lines -> {events:6d} events | "
          f"raw iter_lines {raw_med * 1e3:7.2f} ms "
          f"({raw_med / chunks * 1e6:5.2f} us/chunk) | provider {parsed_med * 1e3:7.2f} ms "
          f"({parsed_med / chunks * 1e6:5.2f} us/chunk) | overhead {overhead:+6.1f} % "
          f"(best-of: raw {min(raw_times) * 1e3:.2f} ms, provider {min(parsed_times) * 1e3:.2f} ms)")
    if paced:
        extra = statistics.median(parsed_cpu) - statistics.median(raw_cpu)
        raw_c = statistics.median(raw_cpu)
        print(f"{'':15s} client CPU: raw {raw_c * 1e3:.1f} ms, provider {statistics.median(parsed_cpu) * 1e3:.1f} ms"
              f" -> CPU overhead {extra / raw_c * 100:+.1f} %; {extra * 1e3:+.1f} ms is "
              f"{extra / raw_med * 100:+.2f} % of the stream's duration")
    return overhead


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--paced-runs", type=int, default=3)
    parser.add_argument("--pace-us", type=float, default=200.0)
    parser.add_argument("--stdlib-json", action="store_true", help="do not use orjson even if installed")
    args = parser.parse_args()
    if args.stdlib_json:
        sse._orjson = None
    ports: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(ports, args.chunks, args.pace_us / 1e6), daemon=True)
    server.start()
    try:
        base = f"http://127.0.0.1:{ports.get(timeout=30)}"
        print(f"streaming benchmark: {args.chunks} text chunks per stream, Python {sys.version.split()[0]}, "
              f"httpx {httpx.__version__}, JSON: {'orjson' if sse._orjson else 'stdlib scanner'}")
        print(f"burst: whole body at once, median of {args.runs} runs (CPU-bound worst case)")
        for name, paced, runs in (("burst", False, args.runs), ("paced", True, args.paced_runs)):
            if paced:
                print(f"paced: one write per event every {args.pace_us:g} us "
                      f"({1e6 / args.pace_us:,.0f} chunks/s), median of {runs} runs")
            prefix = "/paced" if paced else ""
            results = [
                bench("openai", OpenAIChatProvider(base_url=f"{base}{prefix}/v1", api_key="bench"),
                      f"{base}{prefix}/v1/chat/completions", runs, args.chunks, paced),
                bench("anthropic", AnthropicProvider(base_url=f"{base}{prefix}", api_key="bench"),
                      f"{base}{prefix}/v1/messages", runs, args.chunks, paced),
            ]
            print(f"  {name}: wall-clock overhead under 10 % ->", "met" if max(results) < 10 else "NOT met")
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
