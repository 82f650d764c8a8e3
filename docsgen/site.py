"""What the Sphinx build asks of docsgen: generated pages and files, by name."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

MARKER = re.compile(r"<!--\s*generated:\s*(?P<name>[a-z-]+)\s*-->")
TITLED = re.compile(r'^(?P<indent> *)```(?P<language>[\w-]+) title="(?P<title>[^"]+)"[ \t]*$', re.M)
"""A fenced block naming the file it is (``` ```yaml title="agent.yaml" ```): the
tutorials' tests write it, and the page shows its name as the block's caption."""


@cache
def pages() -> dict[str, str]:
    """Each generated page's Markdown, by the marker's name."""
    import stead
    from stead.cli.common import common_options
    from stead.cli.main import build_parser
    from stead.server.asgi import api_document
    from stead.specschema import spec_schema

    from . import reference

    return {
        "cli": reference.cli_page(build_parser(), common_options()),
        "http-api": reference.http_page(api_document()),
        "spec": reference.spec_page(spec_schema()),
        "python-api": reference.python_page(list(stead.__all__)),
    }


def fill(docname: str, text: str) -> str:
    """A page's text with its marker (if any) replaced by the page it names, and its
    titled blocks given their file's name as a caption."""
    found = MARKER.search(text)
    if found is None:
        return TITLED.sub(
            lambda m: (
                f"{m['indent']}```{{code-block}} {m['language']}\n"
                f"{m['indent']}:caption: {m['title']}"
            ),
            text,
        )
    made = pages().get(found["name"])
    if made is None:
        raise ValueError(f"{docname}: no generated page is called {found['name']!r}")
    return made


def generated_docnames(source: Path) -> set[str]:
    """The pages of ``source`` whose text is a marker (their docnames, without ``.md``)."""
    return {
        str(page.relative_to(source).with_suffix(""))
        for page in source.rglob("*.md")
        if "_build" not in page.parts and MARKER.search(page.read_text(encoding="utf-8"))
    }


def write_schema(folder: Path) -> None:
    """Put the agent spec's JSON Schema at the site's root, beside its pages."""
    from stead.specschema import spec_schema

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent-spec.schema.json").write_text(
        json.dumps(spec_schema(), indent=2) + "\n", encoding="utf-8"
    )
