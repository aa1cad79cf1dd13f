"""Images that tools return: checked, capped, in Pi's image content shape.

A tool result carries images as Pi image blocks, ``{"type": "image", "data": <base64>,
"mimeType": "image/png"}``. They are stored in the session (the notebook's metadata) and sent to
models that accept images, so they are kept small:

* only PNG, JPEG, GIF and WebP (what the Anthropic and OpenAI APIs accept), and only when the
  data is valid base64 whose bytes are that format: its header is read (PNG's IHDR with its
  checksum, GIF's blocks to the trailer, JPEG's segments to the frame header, WebP's VP8 / VP8L /
  VP8X header), so the magic bytes followed by garbage are no image;
* at most :data:`MAX_PIXELS` (50 megapixels; a GIF's frames together): a small file can describe
  an image of billions of pixels that a model or a browser would decode;
* at most :data:`MAX_IMAGE_BYTES` (1 MB decoded) per image and :data:`MAX_RESULT_IMAGE_BYTES`
  (3 MB decoded, about 4 MB of base64) per tool result. The per-result cap keeps a result's entry
  under the loader's 5,000,000-character limit (``session/intake.py``), so a notebook holding it
  always loads again.

An image that fails a check is dropped, and a one-line notice says which and why.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from ipyagent.shapes import ContentBlock

MAX_IMAGE_BYTES = 1_000_000
MAX_RESULT_IMAGE_BYTES = 3_000_000
MAX_PIXELS = 50_000_000

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


def _raw(mime: str, data: Any) -> bytes | None:
    """The bytes of ``data`` (base64 text, or raw bytes, or base64 as bytes) if they start like
    a ``mime`` image."""
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
    return raw if raw.startswith(signatures) else None


def image_problem(mime: str, raw: bytes) -> str | None:
    """Why ``raw`` is not an image to keep ("not a valid image/png image", "80,000 × 80,000 pixels
    is over …"), or None."""
    size = _PARSERS[mime](raw) if mime in _PARSERS else None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return f"not a valid {mime} image"
    width, height, pixels = size
    if pixels > MAX_PIXELS:
        return (f"{width:,} × {height:,} pixels{' (all frames)' if pixels != width * height else ''} is over the "
                f"{MAX_PIXELS // 1_000_000} megapixel limit")
    return None


def decode_image(mime: str, data: Any) -> bytes | None:
    """The image's bytes if ``data`` (base64 text, or raw bytes) really is a ``mime`` image within
    :data:`MAX_PIXELS`."""
    raw = _raw(mime, data)
    return raw if raw is not None and image_problem(mime, raw) is None else None


# ---- headers: (width, height, pixels to decode) or None ------------------------------------------


def _png(raw: bytes) -> tuple[int, int, int] | None:
    # the first chunk is IHDR: length 13, "IHDR", width, height, depth, colour type, …, CRC
    if len(raw) < 33 or raw[8:16] != b"\x00\x00\x00\x0dIHDR":
        return None
    body = raw[16:29]
    if struct.unpack(">I", raw[29:33])[0] != zlib.crc32(b"IHDR" + body):
        return None
    width, height, depth, colour = struct.unpack(">IIBB", body[:10])
    if colour not in (0, 2, 3, 4, 6) or depth not in (1, 2, 4, 8, 16):
        return None
    return width, height, width * height


def _gif(raw: bytes) -> tuple[int, int, int] | None:
    """The logical screen, and every block walked to the trailer (the frames' pixels added up)."""
    if len(raw) < 13:
        return None
    width, height, packed = struct.unpack("<HHB", raw[6:11])
    at = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    pixels = 0
    while at < len(raw):
        kind = raw[at]
        if kind == 0x3B:  # trailer
            return width, height, max(pixels, width * height)
        if kind == 0x21:  # extension: label, then sub-blocks
            at = _sub_blocks(raw, at + 2)
        elif kind == 0x2C:  # image descriptor: left, top, width, height, packed; then LZW data
            if at + 10 > len(raw):
                return None
            w, h, flags = struct.unpack("<HHB", raw[at + 5:at + 10])
            pixels += w * h
            at += 10 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
            at = _sub_blocks(raw, at + 1)  # after the LZW minimum code size
        else:
            return None
        if at < 0:
            return None
    return None  # no trailer: cut short, or not a GIF


def _sub_blocks(raw: bytes, at: int) -> int:
    """The index after a run of GIF sub-blocks starting at ``at``; -1 if it runs off the end."""
    while at < len(raw):
        size = raw[at]
        at += 1 + size
        if size == 0:
            return at
    return -1


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_NO_LENGTH = {0x01, *range(0xD0, 0xD8)}


def _jpeg(raw: bytes) -> tuple[int, int, int] | None:
    """The segments after SOI walked to the frame header (SOF), which holds the size."""
    at = 2
    while at + 4 <= len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _NO_LENGTH:
            at += 2
            continue
        if marker in (0xD8, 0xD9, 0xDA):  # another SOI, the end, or the scan before any frame header
            return None
        length = struct.unpack(">H", raw[at + 2:at + 4])[0]
        if length < 2:
            return None
        if marker in _SOF:
            if length < 8 or at + 9 > len(raw):
                return None
            height, width = struct.unpack(">HH", raw[at + 5:at + 9])
            return width, height, width * height
        at += 2 + length
    return None


def _webp(raw: bytes) -> tuple[int, int, int] | None:
    if len(raw) < 30 or raw[8:12] != b"WEBP":
        return None
    riff = struct.unpack("<I", raw[4:8])[0]
    if riff < 4 or riff + 8 > len(raw) + 1:  # (+1: an odd-sized payload may omit its pad byte)
        return None
    chunk, data = raw[12:16], raw[20:]
    if chunk == b"VP8 " and data[3:6] == b"\x9d\x01\x2a":
        width, height = (struct.unpack("<H", data[6:8])[0] & 0x3FFF, struct.unpack("<H", data[8:10])[0] & 0x3FFF)
    elif chunk == b"VP8L" and data[:1] == b"\x2f":
        bits = struct.unpack("<I", data[1:5])[0]
        width, height = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    elif chunk == b"VP8X":
        width = int.from_bytes(data[4:7], "little") + 1
        height = int.from_bytes(data[7:10], "little") + 1
    else:
        return None
    return width, height, width * height


_PARSERS = {"image/png": _png, "image/gif": _gif, "image/jpeg": _jpeg, "image/webp": _webp}


def image_block(mime: str, raw: bytes) -> ContentBlock:
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
    blocks: list[ContentBlock] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    total: int = 0

    def add(self, mime: str, data: Any, label: str = "") -> bool:
        what = f"{label} ({mime})" if label else mime
        raw = _raw(mime, data)
        problem = f"not a valid {mime} image" if raw is None else image_problem(mime, raw)
        if raw is None or problem is not None:
            self.notices.append(f"[{what} dropped: {problem}]")
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
