"""A small real MCP server (the SDK's FastMCP over stdio) for the hub's tests: ``echo`` answers,
``crash`` makes the server process exit at once (after a line on stderr), ``picture`` returns an
image and structured content."""

from __future__ import annotations

import base64
import os
import sys

from mcp.server.fastmcp import FastMCP
from mcp.types import ImageContent, TextContent

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

server = FastMCP("crashing")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def crash() -> str:
    """Exit the server process."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def picture() -> list[ImageContent | TextContent]:
    """A one-pixel PNG and a caption."""
    return [TextContent(type="text", text="one pixel"),
            ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png")]


if __name__ == "__main__":
    server.run("stdio")
