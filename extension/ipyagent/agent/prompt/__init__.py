"""What the model is told besides the session: the system prompt and its parts (environment,
instruction files, pins), the prompt's interpolation and the notebook-activity block.
"""
