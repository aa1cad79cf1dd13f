"""Helpers shared by the tests and benchmarks (session generator, ...)."""
