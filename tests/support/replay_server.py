"""A loopback HTTP server that answers with recorded responses, byte for byte.

Each recording (``tests/providers/recordings/<api>/<name>.json``) holds one real response: its
status, its headers and its body as the public project that recorded it keeps it (text, or base64
when it is still gzip-compressed as it came over the wire). The server answers every POST with
the next queued recording, whatever the path, and keeps each request's JSON body so a test can
check what the client sent next.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).resolve().parent.parent / "providers" / "recordings"


@dataclass
class Recording:
    """One recorded exchange: where it came from, the request the recorder sent, the response."""

    name: str
    api: str  # "anthropic-messages", "openai-completions" or "openai-responses"
    provider: str  # "anthropic", "openai", "deepseek", "openrouter", "groq", "ollama", "zai"…
    source: dict[str, Any]
    request: dict[str, Any]
    status: int
    headers: dict[str, str]
    body: bytes  # exactly what goes on the wire (still compressed when content-encoding says so)
    covers: str = ""
    form: str = ""

    @property
    def streamed(self) -> bool:
        return "event-stream" in self.headers.get("content-type", "")


def load(path: Path) -> Recording:
    raw = json.loads(path.read_text(encoding="utf-8"))
    response = raw["response"]
    if "body_base64" in response:
        body = base64.b64decode(response["body_base64"])
    else:
        body = (response.get("body") or "").encode("utf-8")
    headers = {k: v if isinstance(v, str) else ", ".join(v) for k, v in response["headers"].items()}
    return Recording(raw["name"], raw["api"], raw["provider"], raw["source"], raw["request"], response["status"],
                     headers, body, raw.get("covers", ""), response.get("form", ""))


def all_recordings() -> list[Recording]:
    return [load(p) for p in sorted(RECORDINGS.glob("*/*.json"))]


def recording(name: str) -> Recording:
    found = sorted(RECORDINGS.glob(f"*/{name}.json"))
    assert len(found) == 1, f"no single recording named {name!r}"
    return load(found[0])


@dataclass
class ReplayServer:
    """``with ReplayServer() as server: server.queue(rec); provider(base_url=server.url)…``"""

    pending: deque[Recording] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)  # JSON bodies, in order
    paths: list[str] = field(default_factory=list)
    _httpd: ThreadingHTTPServer | None = None

    def queue(self, *recordings: Recording) -> ReplayServer:
        self.pending.extend(recordings)
        return self

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> ReplayServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                server.requests.append(json.loads(body or b"{}"))
                server.paths.append(self.path)
                if not server.pending:
                    self.send_error(500, "no recording queued")
                    return
                rec = server.pending.popleft()
                self.send_response(rec.status)
                for name, value in rec.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(rec.body)))
                self.end_headers()
                self.wfile.write(rec.body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name="replay-server", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
