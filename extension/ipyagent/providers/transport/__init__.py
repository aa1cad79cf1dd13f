"""What every wire API shares on the way to and from a server: HTTP clients and error responses,
SSE parsing, the stream's lifecycle and deadlines, retries, and the assembled assistant message."""
