"""Agent Skills (agentskills.io): folders ``<name>/SKILL.md`` found like instruction files, listed
in the system prompt by name and description, their bodies returned by the ``skill`` tool."""
