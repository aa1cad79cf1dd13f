"""Probes of summary quality (``%agent probe``, ``ipyagent probe``): the runner and its prompts.
"""
