"""Benchmarks for stead: the durable-commit floor, step throughput, and resume cost.

Run with ``make bench`` (or ``.venv/bin/python -m bench``); see docs/benchmarks.md.
"""
