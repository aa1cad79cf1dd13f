"""Interop tests against real third-party servers (see conftest.py)."""
