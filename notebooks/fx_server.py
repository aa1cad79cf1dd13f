"""A toy MCP server for the quickstart: converts pounds at fixed, made-up rates, so that the
notebook's recording is the same on every build. Eleven lines with the MCP SDK (pip install
"ipyagent[mcp]" brings it); any MCP server is configured the same way."""

from mcp.server.fastmcp import FastMCP

RATES = {"EUR": 1.15, "USD": 1.25, "JPY": 190.0}  # made up, fixed: a teaching example
server = FastMCP("fx")


@server.tool()
def convert(amount: float, currency: str) -> str:
    """Convert an amount in pounds (GBP) into EUR, USD or JPY at the fixed rates."""
    if currency not in RATES:
        raise ValueError(f"unknown currency {currency!r}; known: {', '.join(RATES)}")
    return f"£{amount:.2f} = {amount * RATES[currency]:.2f} {currency} (at {RATES[currency]} {currency} per £)"


if __name__ == "__main__":
    server.run("stdio")
