"""The reference pages are made from the code: each names everything its source has."""

from __future__ import annotations

import argparse
import re

from docsgen import reference, site

import stead
from stead.cli.common import common_options
from stead.cli.main import build_parser
from stead.server.asgi import api_document
from stead.specschema import spec_schema


def commands(parser: argparse.ArgumentParser, prefix: str = "stead") -> list[str]:
    out = []
    for name, _, sub in reference._subcommands(parser):
        out.append(f"{prefix} {name}")
        out.extend(commands(sub, f"{prefix} {name}"))
    return out


def test_the_cli_page_has_every_command_and_option() -> None:
    parser = build_parser()
    page = reference.cli_page(parser, common_options())
    every = commands(parser)
    assert len(every) > 40
    for command in every:
        assert f"`{command}`" in page, command
    run = next(sub for name, _, sub in reference._subcommands(parser) if name == "run")
    for action in run._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert f"`{option}`" in page, option


def test_the_http_page_has_every_route_of_the_served_document() -> None:
    document = api_document()
    page = reference.http_page(document)
    routes = [(m.upper(), p) for p, item in document["paths"].items() for m in item]
    assert len(routes) > 30
    for method, path in routes:
        assert f"## `{method} {path}`" in page, (method, path)


def test_the_spec_page_has_every_field_of_the_schema() -> None:
    schema = spec_schema()
    page = reference.spec_page(schema)
    for field in schema["properties"]:
        assert re.search(rf"\| `{re.escape(field)}` \|", page), field


def test_the_python_page_documents_every_public_name() -> None:
    page = reference.python_page(list(stead.__all__))
    for name in stead.__all__:
        if not name.startswith("_"):
            assert re.search(rf"^\.\. auto\w+:: stead\.{name}$", page, re.M), name


def test_a_marker_is_replaced_by_its_page_and_an_unknown_one_is_refused() -> None:
    assert site.fill("reference/cli", "<!-- generated: cli -->\n").startswith("# Command line")
    assert site.fill("guide/agents", "# Defining an agent\n") == "# Defining an agent\n"
    try:
        site.fill("reference/x", "<!-- generated: nothing -->")
    except ValueError as exc:
        assert "nothing" in str(exc)
    else:
        raise AssertionError("an unknown marker was accepted")


def test_a_file_a_tutorial_creates_is_shown_with_its_name() -> None:
    page = '1. Make it:\n\n   ```yaml title="agent.yaml"\n   name: a\n   ```\n'
    shown = site.fill("tutorials/x", page)
    assert "   ```{code-block} yaml\n   :caption: agent.yaml\n   name: a\n" in shown
