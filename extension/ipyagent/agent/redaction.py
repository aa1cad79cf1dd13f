"""Keys out of everything ipyagent keeps, shows, sends to the frontend or exports.

A model that runs ``print(os.environ['OPENAI_API_KEY'])`` or ``env | grep OPENAI``, or a prompt
with ``{environ}``, would otherwise put the key into the session, and so into the notebook's
metadata (which "Clear all outputs" does not touch), the outputs and every export. So before an
entry is stored, and before anything is shown, sent to the bridge or exported, each configured
secret in it becomes ``***`` and every URL loses its ``user:password@`` — with the scrubber the
providers' error messages use (:func:`ipyagent.providers.transport.http.scrub`), the one there is.

The configured secrets (:func:`configured_secrets`): the values of environment variables whose
name says key, token, secret, password, pass, passphrase or credential (``OPENAI_API_KEY``,
``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``, ``DB_PASS``, ``API_KEYS``…, also written together:
``PGPASSWORD``, ``OPENAIKEY``; and ``…_PWD`` as in ``MYSQL_PWD``, but not ``PWD``, the working
folder); the credentials of URLs in the environment (``OPENAI_BASE_URL``, a ``DATABASE_URL``…);
and in ``Agent.provider_options`` every value whose name says so too (``api_key``, an
``Authorization`` or ``x-api-key`` header — ``Bearer …`` and the token alone) and the credentials
of every URL (``base_url``). Values shorter than 8 characters are left alone (they would match
ordinary text).

What a scrub replaced can be counted (:meth:`Redactor.data_counted`, :class:`Replacements`): an
import or export says how many values it replaced, and in which entries.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ipyagent.compaction.summarizer import SummaryRequest, SummaryResponse
from ipyagent.providers.transport.http import scrub_counted, url_credentials

__all__ = ["MARKER", "Redactor", "RedactedSummaries", "Replacements", "assigned_secrets", "configured_secrets"]

MARKER = "***"  # what scrub puts in a secret's place
MIN_SECRET_CHARS = 8
# the words of a name (an environment variable's, an option's, a header's) that make its value a secret
_SECRET_WORDS = frozenset({"KEY", "KEYS", "APIKEY", "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS",
                           "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "AUTHORIZATION", "PAT"})
# ... and the endings that do so in a word written together (PGPASSWORD, OPENAIKEY, HFTOKEN)
_SECRET_ENDINGS = ("PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "TOKEN", "SECRET")
# a word that is a secret only after another one: MYSQL_PWD, DB_PWD (PWD alone is the working folder)
_QUALIFIED_WORDS = frozenset({"PWD"})
_AUTH_SCHEME = re.compile(r"^\s*(bearer|basic|token|digest)\s+(\S+)\s*$", re.IGNORECASE)

T = TypeVar("T")


def _secret_name(name: str) -> bool:
    words = [word for word in re.split(r"[_\-.]+", name.upper()) if word]
    return any(word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS)
               or (word in _QUALIFIED_WORDS and len(words) > 1) for word in words)


def _auth_forms(value: str) -> Iterable[str]:
    """A secret value, and the credential alone when it is ``Bearer …`` / ``Basic …``."""
    yield value.strip()
    scheme = _AUTH_SCHEME.match(value)
    if scheme:
        yield scheme.group(2)


def _option_secrets(value: Any, secret: bool = False) -> Iterable[str]:
    """The secrets in provider options: values under a secret-looking name (nested mappings and
    lists walked), and the credentials of every URL."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _option_secrets(item, secret or _secret_name(str(key)))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _option_secrets(item, secret)
    elif isinstance(value, str):
        if secret:
            yield from _auth_forms(value)
        if "@" in value and "://" in value:
            yield from url_credentials(value)


def configured_secrets(provider_options: Mapping[str, Any] | None = None,
                       environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Every configured key, token, authorization value and URL credential (see the module's
    docstring), longest first, each once."""
    environ = os.environ if environ is None else environ
    found: set[str] = set()
    for name, value in environ.items():
        if _secret_name(name):
            found.update(_auth_forms(value))
        if "@" in value and "://" in value:
            found.update(url_credentials(value))
    found.update(_option_secrets(provider_options or {}))
    found.update(form for value in extra for form in _auth_forms(value))  # e.g. MCP servers' env and headers
    found = {s for s in found if len(s) >= MIN_SECRET_CHARS}
    # as they appear in HTML outputs and in JSON (a password with "&" or a quote in it)
    found |= {html.escape(s) for s in found} | {json.dumps(s)[1:-1] for s in found} | \
        {json.dumps(s, ensure_ascii=False)[1:-1] for s in found}
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


# a secret a notebook's own cell sets: `%env NAME=VALUE` / `%env NAME VALUE` / `%set_env NAME VALUE`,
# `os.environ["NAME"] = "VALUE"`, a shell's `export NAME=VALUE` (in `!` or %%bash)
_ASSIGNED = (
    re.compile(r"^[ \t]*%(?:env|set_env)[ \t]+(?P<name>[A-Za-z_][\w.-]*)(?:[ \t]*=[ \t]*|[ \t]+)"
               r"(?P<value>[^\r\n]+?)[ \t]*$", re.MULTILINE),
    re.compile(r"""environ\[\s*(?P<q>['"])(?P<name>[^'"]+)(?P=q)\s*\]\s*=\s*[rbuRBU]{0,2}"""
               r"""(?P<q2>['"])(?P<value>[^'"\r\n]+)(?P=q2)"""),
    re.compile(r"""(?:^|[\s;!])export[ \t]+(?P<name>[A-Za-z_]\w*)=(?P<q>['"]?)(?P<value>[^'"\s;]+)(?P=q)""",
               re.MULTILINE),
)


def assigned_secrets(text: str) -> list[str]:
    """The values ``text`` (a notebook's code) assigns to environment variables whose name says
    they are secrets: ``%env OPENAI_API_KEY=sk-…`` in a cell makes a key the environment of the
    process reading the notebook may not hold (``ipyagent run`` echoes cells and tracebacks)."""
    found = []
    for pattern in _ASSIGNED:
        for match in pattern.finditer(text):
            value = match.group("value").strip().strip("'\"")
            if _secret_name(match.group("name")) and value:
                found.append(value)
    return found


@dataclass(frozen=True)
class Redactor:
    """Scrubs the secrets it was made with from text, bytes and JSON-like data."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def configured(cls, provider_options: Mapping[str, Any] | None = None,
                   environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> Redactor:
        """The redactor for what is configured now (the environment, ``provider_options`` and
        ``extra`` secrets)."""
        return cls(configured_secrets(provider_options, environ, extra))

    def text(self, text: str) -> str:
        return self.text_counted(text)[0]

    def text_counted(self, text: str) -> tuple[str, int]:
        """The scrubbed text, and how many values were replaced in it."""
        return scrub_counted(text, self.secrets) if text else (text, 0)

    def bytes(self, data: bytes) -> bytes:
        """``data`` scrubbed as UTF-8 text; bytes that are not UTF-8 pass through unchanged."""
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def data(self, value: T) -> T:
        """A copy of ``value`` (dicts, lists, tuples, strings) with every string scrubbed, dict keys
        too (an MCP server's ``structuredContent`` may key a mapping by a secret)."""
        return self.data_counted(value)[0]

    def data_counted(self, value: T) -> tuple[T, int]:
        """:meth:`data`'s copy, and how many values were replaced in it."""
        counter = [0]
        scrubbed: T = self._data(value, 0, counter)
        return scrubbed, counter[0]

    def _data(self, value: Any, depth: int, counter: list[int]) -> Any:
        if isinstance(value, str):
            text, replaced = self.text_counted(value)
            counter[0] += replaced
            return text
        if depth > 200:  # deeper than any entry: left as it is rather than recursing on
            return value
        if isinstance(value, dict):
            return {self._data(key, depth + 1, counter) if isinstance(key, str) else key:
                    self._data(item, depth + 1, counter) for key, item in value.items()}
        if isinstance(value, list):
            return [self._data(item, depth + 1, counter) for item in value]
        if isinstance(value, tuple):
            return tuple(self._data(item, depth + 1, counter) for item in value)
        return value


@dataclass
class Replacements:
    """What a scrub replaced: how many values, and where (entry ids, or other labels)."""

    count: int = 0
    where: list[str] = field(default_factory=list)

    def add(self, count: int, where: str) -> None:
        if count:
            self.count += count
            self.where.append(where)

    def places(self, limit: int = 20) -> str:
        """The places, at most ``limit`` of them named (for one line of output)."""
        shown = ", ".join(self.where[:limit])
        return shown + (f" and {len(self.where) - limit:,} more" if len(self.where) > limit else "")


class RedactedSummaries:
    """A summariser whose summaries are scrubbed before they become a compaction entry."""

    def __init__(self, inner: Any, redactor: Redactor):
        self.inner = inner
        self.redactor = redactor

    def summarize(self, request: SummaryRequest) -> SummaryResponse:
        response: SummaryResponse = self.inner.summarize(request)
        return replace(response, text=self.redactor.text(response.text))
