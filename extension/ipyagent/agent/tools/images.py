"""Images that tools return: checked, capped, in Pi's image content shape.

A tool result carries images as Pi image blocks, ``{"type": "image", "data": <base64>,
"mimeType": "image/png"}``. They are stored in the session (the notebook's metadata) and sent to
models that accept images, so they are kept small:

* only PNG, JPEG, GIF and WebP (what the Anthropic and OpenAI APIs accept), and only when the
  data is valid base64 whose bytes start like that format;
* at most :data:`MAX_IMAGE_BYTES` (1 MB decoded) per image and :data:`MAX_RESULT_IMAGE_BYTES`
  (3 MB decoded, about 4 MB of base64) per tool result. The per-result cap keeps a result's entry
  under the loader's 5,000,000-character limit (``session/intake.py``), so a notebook holding it
  always loads again.

An image that fails a check is dropped, and a one-line notice says which and why.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

MAX_IMAGE_BYTES = 1_000_000
MAX_RESULT_IMAGE_BYTES = 3_000_000

# MIME type -> the byte signatures its data may start with
IMAGE_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
IMAGE_MIME_TYPES = tuple(IMAGE_SIGNATURES)


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n / 1000:.0f} KB"


def decode_image(mime: str, data: Any) -> bytes | None:
    """The image's bytes if ``data`` (base64 text, or raw bytes) really is a ``mime`` image."""
    signatures = IMAGE_SIGNATURES.get(mime)
    if signatures is None:
        return None
    if isinstance(data, (bytes, bytearray)):
        raw = bytes(data)
        if not raw.startswith(signatures):  # maybe base64 given as bytes
            try:
                raw = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                return None
    elif isinstance(data, str):
        try:
            raw = base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError):
            return None
    else:
        return None
    if not raw.startswith(signatures):
        return None
    if mime == "image/webp" and raw[8:12] != b"WEBP":
        return None
    return raw


def image_block(mime: str, raw: bytes) -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(raw).decode("ascii"), "mimeType": mime}


def valid_image_block(block: Any) -> bool:
    """Whether a stored block is an image of an allowed type with well-formed data (metadata is
    untrusted: the renderer checks before it builds a data URL)."""
    return (isinstance(block, dict) and block.get("type") == "image"
            and decode_image(str(block.get("mimeType", "")), block.get("data")) is not None)


@dataclass
class ImageCollector:
    """Collects a result's images in order, applying the checks and caps; ``notices`` says what
    was dropped."""

    max_image: int = MAX_IMAGE_BYTES
    max_total: int = MAX_RESULT_IMAGE_BYTES
    blocks: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    total: int = 0

    def add(self, mime: str, data: Any, label: str = "") -> bool:
        what = f"{label} ({mime})" if label else mime
        raw = decode_image(mime, data)
        if raw is None:
            self.notices.append(f"[{what} dropped: not a valid {mime} image]")
            return False
        if len(raw) > self.max_image:
            self.notices.append(f"[{what} dropped: {_size(len(raw))} is over the {_size(self.max_image)} "
                                "limit per image]")
            return False
        if self.total + len(raw) > self.max_total:
            self.notices.append(f"[{what} dropped: the images of this result would exceed "
                                f"{_size(self.max_total)}]")
            return False
        self.total += len(raw)
        self.blocks.append(image_block(mime, raw))
        return True
