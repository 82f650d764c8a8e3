"""Workspace content for the hibernation benchmarks: code-like text and random bytes.

Code-like text is lines of Python-like code over a random vocabulary, which
zstandard stores at about a third of its size; random bytes are stored as they
are, like data that is already compressed. Seeded, so every run makes the same
content.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

# -- the text -------------------------------------------------------------

_LINES = (
    "def {0}_{1}({2}, {3}={n}):\n",
    "    {0} = {1}.{2}({3}, {n})\n",
    "    if {0} > {n}:\n",
    "        return {0}_{1} + {n}\n",
    "# {0} {1} {2} {3}\n",
    "class {0}{1}({2}):\n",
    "    {0}: int = {n}\n",
    "import {0}.{1}\n",
    "    for {0} in range({n}):\n",
    '        log.info("{0} {1} %s", {2})\n',
)


def vocabulary(rng: random.Random, n: int = 1000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz_"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(n)]


def code_text(rng: random.Random, vocab: Sequence[str], size: int) -> str:
    """About ``size`` characters of code-like lines over ``vocab``."""
    parts: list[str] = []
    total = 0
    while total < size:
        words = rng.choices(vocab, k=4 * 64)
        lines = rng.choices(_LINES, k=64)
        for j, t in enumerate(lines):
            line = t.format(*words[4 * j : 4 * j + 4], n=rng.randrange(1000))
            parts.append(line)
            total += len(line)
    return "".join(parts)[:size]


README = "# Project\n\nThe agent reads this file after every wake.\n" * 4


def fill_workspace(folder: Path, total_bytes: int, files: int, seed: int) -> dict[str, int]:
    """Write ``total_bytes`` into ``files`` files: half code-like text, half random."""
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    text_files = max(1, files // 2)
    bin_files = max(1, files - text_files)
    half = total_bytes // 2
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    (folder / "README.md").write_text(README, encoding="utf-8")
    for i in range(text_files):
        n = half // text_files
        (folder / "src" / f"mod_{i:03d}.py").write_text(code_text(rng, vocab, n), "utf-8")
    for i in range(bin_files):
        n = (total_bytes - half) // bin_files
        (folder / "data" / f"blob_{i:03d}.bin").write_bytes(rng.randbytes(n))
    return {
        "text_files": text_files,
        "text_bytes": half // text_files * text_files,
        "random_files": bin_files,
        "random_bytes": (total_bytes - half) // bin_files * bin_files,
        "readme_bytes": len(README),
    }
