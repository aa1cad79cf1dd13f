"""The wire APIs, one module each: OpenAI Chat Completions (and the servers that speak it), the
OpenAI Responses API and Anthropic Messages. A new provider is one more module here."""
