"""HTTP plumbing shared by the providers: clients, turning error responses into ProviderErrors,
Retry-After parsing, and keeping secrets out of messages."""

from __future__ import annotations

import base64
import email.utils
import functools
import json
import re
import socket
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ipyagent.providers.errors import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    MalformedStreamError,
    ModelNotFoundError,
    NetworkError,
    ProviderError,
    RateLimitError,
    ServerError,
)
from ipyagent.providers.overflow import is_overflow_error, window_from_error
from ipyagent.providers.transport.sse import loads as sse_loads

DEFAULT_TIMEOUT = httpx.Timeout(connect=15.0, read=300.0, write=60.0, pool=15.0)
_MAX_BODY_IN_MESSAGE = 500


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()  # loading the CA bundle costs ~0.2 s: do it once per process


def new_client(timeout: httpx.Timeout | float | None = None) -> httpx.Client:
    timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
    if urllib.request.getproxies():
        # a custom transport would switch off httpx's HTTP(S)_PROXY handling: keep the default one
        return httpx.Client(timeout=timeout, verify=_ssl_context())
    # httpx writes headers and body separately; without TCP_NODELAY, Nagle plus the server's delayed
    # ACK can add ~40 ms to every request
    transport = httpx.HTTPTransport(verify=_ssl_context(),
                                    socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    return httpx.Client(timeout=timeout, transport=transport)


# scheme://user:password@ — the userinfo ends at the authority's last "@" (a raw "@" in a password
# is common enough), and never spans a "/", "?", "#", a quote, whitespace or a backslash (in JSON
# text a line break is "\n": the userinfo must not run on into the next line).
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/?#\s'\"<>\\]*)@")


def strip_url_credentials(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it replaced by ``***@``."""
    return _strip_counted(text)[0]


def _strip_counted(text: str) -> tuple[str, int]:
    if not text or "@" not in text:
        return text, 0
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        count += match.group(2) != "***"  # already scrubbed: no new replacement
        return f"{match.group(1)}***@"

    return _URL_USERINFO.sub(replace, text), count


def url_credentials(url: str | None) -> list[str]:
    """The user name and password in ``url`` (and both together): as written, percent-decoded and
    percent-encoded (as they appear when the whole URL is encoded), and the Basic authorization
    token made of them; empty if none."""
    if not url or "@" not in url:
        return []
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    userinfo = parts.netloc.rpartition("@")[0]
    for raw in (userinfo, *userinfo.split(":", 1)):
        plain = urllib.parse.unquote(raw)
        for form in (raw, plain, urllib.parse.quote(plain, safe=""), urllib.parse.quote(raw, safe="")):
            if form and form not in found:
                found.append(form)
    token = _basic_token(userinfo)
    if token and token not in found:
        found.append(token)
    return found


def _basic_token(userinfo: str) -> str:
    if not userinfo:
        return ""
    user, _, password = userinfo.partition(":")
    plain = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    return base64.b64encode(plain.encode("utf-8")).decode("ascii")


def split_url_credentials(url: str) -> tuple[str, str | None]:
    """(``url`` without its ``user:password@``, the ``Basic …`` authorization they make, or None).

    httpx would turn URL credentials into Basic auth on its own, replacing any ``Authorization``
    header, so an OpenAI-compatible base URL with credentials could never carry the API key: the
    providers send the URL without them and decide which authorization goes out."""
    if "@" not in url:
        return url, None
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url, None
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    clean = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return clean, (f"Basic {_basic_token(userinfo)}" if userinfo else None)


def scrub(text: str, secret: str | Iterable[str | None] | None) -> str:
    """Remove secrets from text that may echo them (some servers quote the key they rejected;
    URLs may carry ``user:password@``): each secret of 4 characters or more becomes ``***``, and
    the credentials of every URL in the text are removed."""
    return scrub_counted(text, secret)[0]


def scrub_counted(text: str, secret: str | Iterable[str | None] | None) -> tuple[str, int]:
    """:func:`scrub`'s text, and how many values it replaced (URL credentials and secrets)."""
    if not text:
        return text, 0
    secrets = [secret] if isinstance(secret, str) or secret is None else list(secret)
    text, count = _strip_counted(text)
    for value in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        if value in text:
            count += text.count(value)
            text = text.replace(value, "***")
    return text, count


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait, from ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):  # since Python 3.10 it raises instead of returning None
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class ErrorContext:
    """What an error message should name so the user can act on it. ``url`` is kept without its
    credentials; they and the key are only kept to scrub them from messages."""

    label: str  # "OpenAI", "Anthropic", "ollama"…
    url: str
    model: str
    key_env: str | None = None
    secret: str | None = field(default=None, repr=False)
    secrets: tuple[str, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        self.secrets = tuple(s for s in (self.secret, *url_credentials(self.url)) if s)
        self.url = strip_url_credentials(self.url)

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)


def _parse_error_body(body: str) -> tuple[dict[str, Any] | None, str, str | None, str | None]:
    """(parsed JSON, message, code, type) from any of the error body shapes in the wild."""
    try:
        parsed = json.loads(body) if body.strip() else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return None, body.strip()[:_MAX_BODY_IN_MESSAGE], None, None
    err = parsed.get("error", parsed)
    if isinstance(err, str):
        return parsed, err, None, None
    if not isinstance(err, dict):
        return parsed, str(err), None, None
    message = err.get("message") or parsed.get("message") or parsed.get("detail") or ""
    if not isinstance(message, str):
        message = json.dumps(message)
    code = err.get("code")
    return parsed, message, (str(code) if code is not None else None), err.get("type")


# One classification of provider errors for HTTP statuses and in-stream events alike. Kinds:
# overflow (the prompt did not fit), quota (credit or quota used up: waiting will not help),
# rate_limit (wait and retry), auth, not_found, server (overloaded, 5xx: worth another try),
# bad_request (anything else the server rejected).
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "insufficient_credits",
                          "billing_not_active", "credits_exhausted"})
_QUOTA_TEXT = re.compile(r"exceeded your current quota|credit balance is too low|insufficient credits|"
                         r"requires more credits|out of credits", re.IGNORECASE)
_RATE_TYPES = frozenset({"rate_limit_error", "rate_limit_exceeded", "too_many_requests", "rate_limit"})
_AUTH_TYPES = frozenset({"authentication_error", "permission_error", "invalid_api_key", "unauthorized",
                         "permission_denied", "forbidden"})
_NOT_FOUND_TYPES = frozenset({"not_found_error", "model_not_found", "not_found"})
_SERVER_TYPES = frozenset({"overloaded_error", "api_error", "server_error", "internal_server_error",
                           "service_unavailable", "timeout", "internal_error", "overloaded"})
_TRANSIENT_STATUSES = frozenset({408, 409, 425, 529})


def error_kind(status: int | None, words: set[str], message: str, body: str | None = None) -> str:
    """The kind of a provider error from its HTTP status (None inside a stream), its ``code`` and
    ``type`` words, and its text."""
    numeric = next((int(w) for w in words if w.isdigit() and len(w) == 3), None)
    status = status if status is not None else numeric  # OpenRouter's in-stream {"code": 400}
    if status not in (401, 403, 429) and any(is_overflow_error(status, message, w or None, body) for w in words | {""}):
        return "overflow"
    if words & _QUOTA_CODES or status == 402 or _QUOTA_TEXT.search(message):
        return "quota"
    if status == 429 or words & _RATE_TYPES:
        return "rate_limit"
    if status in (401, 403) or words & _AUTH_TYPES:
        return "auth"
    if status == 404 or words & _NOT_FOUND_TYPES:
        return "not_found"
    if (status is not None and (status >= 500 or status in _TRANSIENT_STATUSES)) or words & _SERVER_TYPES:
        return "server"
    if status is not None or any(w.startswith("invalid") for w in words):
        return "bad_request"
    return "server"  # an in-stream error of a kind nobody documented: worth another try


def provider_error(kind: str, ctx: ErrorContext, where: str, detail: str, *, status: int | None, body: str,
                   parsed: dict[str, Any] | None = None, retry_after: float | None = None) -> ProviderError:
    """The ProviderError for an error of ``kind`` (see :func:`error_kind`)."""
    if kind == "overflow":
        return ContextOverflowError(f"{where}: the request does not fit the context window of {ctx.model!r}: {detail}",
                                    status=status, body=body, context_window=window_from_error(detail, parsed))
    if kind == "quota":
        err = RateLimitError(f"{where}: out of credit or quota (waiting will not help): {detail}", status=status,
                             body=body)
        err.retryable = False
        return err
    if kind == "rate_limit":
        return RateLimitError(f"{where}: rate limited: {detail}", status=status, body=body, retry_after=retry_after)
    if kind == "auth":
        hint = f"check {ctx.key_env} or pass api_key=" if ctx.key_env else "check the API key"
        return AuthenticationError(f"{where}: authentication failed: {detail}; {hint}", status=status, body=body)
    if kind == "not_found":
        return ModelNotFoundError(f"{where}: not found: {detail}; check the model name {ctx.model!r} and the base URL",
                                  status=status, body=body)
    if kind == "server":
        return ServerError(f"{where}: server error: {detail}", status=status, body=body)
    return BadRequestError(f"{where}: request rejected: {detail}", status=status, body=body)


def _words(*values: Any) -> set[str]:
    return {str(v) for v in values if v is not None and str(v)}


def error_from_response(ctx: ErrorContext, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
    body = ctx.scrub(body)
    parsed, message, code, kind = _parse_error_body(body)
    detail = message or body.strip()[:_MAX_BODY_IN_MESSAGE] or "(no body)"
    where = f"{ctx.label} (HTTP {status} from {ctx.url})"
    overflow_text = f"{status} (no body)" if not body.strip() else detail
    found = error_kind(status, _words(code, kind), overflow_text, body)
    return provider_error(found, ctx, where, detail, status=status, body=body, parsed=parsed,
                          retry_after=parse_retry_after(headers) if found == "rate_limit" else None)


def stream_object(ctx: ErrorContext, data: bytes) -> dict[str, Any]:
    """One stream event's JSON object (OpenAI Chat and Responses); anything else is a clear
    :class:`MalformedStreamError` quoting the start of the data."""
    try:
        value = sse_loads(data)
    except ValueError:
        raise MalformedStreamError(f"{ctx.label}: the stream from {ctx.url} sent data that is not JSON: "
                                   f"{data[:200]!r}") from None
    if not isinstance(value, dict):
        raise MalformedStreamError(f"{ctx.label}: unexpected stream data from {ctx.url}: {data[:200]!r}")
    return value


def error_from_event(ctx: ErrorContext, error: Any) -> ProviderError:
    """An error that arrived inside the stream (Anthropic ``error`` event, OpenAI ``{"error":…}``,
    a Responses ``error`` or ``response.failed``), classified like an HTTP error."""
    body = ctx.scrub(json.dumps(error))
    parsed = error if isinstance(error, dict) else {"message": str(error)}
    message = ctx.scrub(str(parsed.get("message") or body))
    where = f"{ctx.label} (error event in the stream from {ctx.url})"
    found = error_kind(None, _words(parsed.get("code"), parsed.get("type")), message)
    named = parsed.get("code") or parsed.get("type")
    detail = f"{named}: {message}" if named and str(named) not in message else message
    return provider_error(found, ctx, where, detail, status=None, body=body, parsed=parsed)


def network_error(ctx: ErrorContext, exc: BaseException) -> NetworkError:
    return NetworkError(f"{ctx.label}: connection problem with {ctx.url}: {type(exc).__name__}: "
                        f"{ctx.scrub(str(exc)) or 'no details'}")
