"""Sphinx configuration of stead's documentation site (``make docs``).

The pages are Markdown (MyST). The reference pages are made from the code when the
site is built (``docsgen/``): each file under ``docs/reference/`` holds only a marker
that the ``source-read`` event replaces with the page made from its source of truth.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # docsgen lives beside src/, not in the package

from docsgen import site  # noqa: E402

import stead  # noqa: E402

project = "stead"
release = version = stead.__version__
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "images/*.md"]
html_theme = "furo"
html_title = f"stead {release}"
html_static_path: list[str] = []
myst_heading_anchors = 4
myst_enable_extensions = ["attrs_block"]
autodoc_typehints = "description"
autodoc_member_order = "bysource"


def _fill(app: Any, docname: str, source: list[str]) -> None:
    source[0] = site.fill(docname, source[0])


def _generated(
    app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]
) -> list[str]:
    # made from the code, so read again at every build, whatever their marker file's age
    return sorted(site.generated_docnames(Path(app.srcdir)))


def _schema(app: Any, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        site.write_schema(Path(app.outdir))


def setup(app: Any) -> None:
    app.connect("build-finished", _schema)
    app.connect("source-read", _fill)
    app.connect("env-get-outdated", _generated)
