"""MCP servers as tool sources: their configuration (the common ``mcpServers`` shape), the names
and schemas their tools get, the client that runs them in the background (the optional ``mcp``
extra, imported only when a server starts), their tools as agent tools, and project ``.mcp.json``
files. Nothing here imports IPython.
"""
