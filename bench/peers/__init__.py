"""The peers' side of the comparison: LangGraph and DBOS Transact running stead's workloads.

Every module here runs in ``.venv-peers`` (built by ``make bench`` from
``requirements.txt`` beside this file), never in stead's own venv, and imports
nothing from stead. Each is invoked as ``.venv-peers/bin/python -m
bench.peers.NAME COMMAND ...`` from the repository root and prints exactly one
JSON object on stdout; see docs/benchmarks.md.
"""
