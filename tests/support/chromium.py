"""Debian's chromium for the browser tests (tests/browser, tests/lite): where it is, the flags
every launch takes, and the failure that says what to install (never a browser Playwright would
download)."""

from __future__ import annotations

import os

import pytest

CHROMIUM = os.environ.get("IPYAGENT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_or_fail() -> str:
    """The chromium to launch; the test fails (never skips) saying how to install it."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"chromium not found at {CHROMIUM}: the browser tests need Debian's chromium "
            "(apt-get update && apt-get install -y chromium; .ci/run does this), "
            "or IPYAGENT_CHROMIUM=/path/to/chromium",
            pytrace=False,
        )
    return CHROMIUM
