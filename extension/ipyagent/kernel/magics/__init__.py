"""The magics: ``%%agent``, ``%agent …`` (one module per group of commands), ``%compact``.
"""
