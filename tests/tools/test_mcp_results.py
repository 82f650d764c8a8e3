"""How an MCP result is kept: text as text, binary parts as blobs, names every provider
accepts, effect classes from the spec before the server's hints."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from stead.errors import ToolError
from stead.store.blobs import BlobStore
from stead.tools.base import Effect, ToolContext
from stead.tools.mcp.tools import effect_of, make_tools, render, tool_name

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def ctx(tmp_path: Path) -> ToolContext:
    blobs = BlobStore(tmp_path / "blobs")
    return ToolContext("ag", "default", "call_1", "k", tmp_path, put_blob=blobs.put)


def test_binary_parts_are_stored_as_blobs_and_named_by_digest(tmp_path: Path) -> None:
    c = ctx(tmp_path)
    image = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(PNG).decode()}
    out = render({"content": [{"type": "text", "text": "a chart"}, image]}, c)
    text, stored = out["content"]
    assert text == {"type": "text", "text": "a chart"}
    assert stored["type"] == "image" and stored["bytes"] == len(PNG)
    assert BlobStore(tmp_path / "blobs").get(stored["blob"]) == PNG
    assert "data" not in stored  # the journal holds the digest, not the bytes


def test_one_text_part_is_kept_as_text_and_structured_content_as_json(tmp_path: Path) -> None:
    assert render({"content": [{"type": "text", "text": "hi"}]}, ctx(tmp_path)) == "hi"
    both = render({"content": [{"type": "text", "text": "{}"}], "structuredContent": {"n": 1}},
                  ctx(tmp_path))  # fmt: skip
    assert both["structured"] == {"n": 1}
    assert both["content"] == [{"type": "text", "text": "{}"}]  # not a repeat: kept


def test_structured_content_repeated_as_json_text_is_shown_once(tmp_path: Path) -> None:
    structured = {"timezone": "UTC", "datetime": "2026-01-01T00:00:00+00:00"}
    out = render({"content": [{"type": "text", "text": json.dumps(structured, indent=2)},
                              {"type": "text", "text": "and a note"}],
                  "structuredContent": structured}, ctx(tmp_path))  # fmt: skip
    assert out == {"content": [{"type": "text", "text": "and a note"}], "structured": structured}


def test_an_error_result_is_a_failed_call(tmp_path: Path) -> None:
    def call(*_: Any) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "no such branch"}], "isError": True}

    listed = [{"name": "checkout", "inputSchema": {"type": "object"}}]
    (t,) = make_tools({"name": "git"}, listed, call).values()
    with pytest.raises(ToolError, match="no such branch"):
        t.call({}, ctx(tmp_path))


@pytest.mark.parametrize("remote", ["git_status", "read.file", "a" * 80, "résumé tool", "x/y"])
def test_tool_names_are_ones_every_provider_accepts_and_stay_distinct(remote: str) -> None:
    name = tool_name("srv", remote)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name), name
    assert name.startswith("srv__")
    assert tool_name("srv", remote + "x") != name


def test_hints_decide_only_where_the_spec_is_silent() -> None:
    read = {"name": "status", "annotations": {"readOnlyHint": True}}
    assert effect_of({"name": "git"}, read)[:2] == (Effect.READ_ONLY, "hints")
    said = effect_of({"name": "git", "effect": "effectful"}, read)
    assert said[:2] == (Effect.EFFECTFUL, "spec") and "read_only" in str(said[2])
    per_tool = {"name": "git", "effect": "read_only", "effects": {"status": "idempotent"}}
    assert effect_of(per_tool, read)[0] is Effect.IDEMPOTENT
    bare = {"name": "push"}
    assert effect_of({"name": "git"}, bare)[0] is Effect.EFFECTFUL  # no hint: guarded


def test_a_tool_whose_schema_is_unusable_is_not_offered() -> None:
    listed = [{"name": "ok", "inputSchema": {"type": "object"}},
              {"name": "bad", "inputSchema": {"type": "string"}},
              {"name": "worse", "inputSchema": {"type": "object", "properties": 3}}]  # fmt: skip
    assert list(make_tools({"name": "s"}, listed, lambda *_: {})) == ["s__ok"]


def test_a_long_text_part_is_kept_whole_as_a_blob_and_its_start_journaled(
    tmp_path: Path,
) -> None:
    long = "".join(f"line {i}\n" for i in range(20_000))
    out = render({"content": [{"type": "text", "text": long}, {"type": "text", "text": "ok"}]},
                 ctx(tmp_path))  # fmt: skip
    first = out["content"][0]
    assert first["cut"] is True and first["chars"] == len(long)
    assert long.startswith(first["text"]) and len(first["text"]) < len(long)
    assert BlobStore(tmp_path / "blobs").get(first["blob"]).decode() == long


def test_a_lone_long_text_part_keeps_its_mark_of_being_cut(tmp_path: Path) -> None:
    out = render({"content": [{"type": "text", "text": "x" * 40_000}]}, ctx(tmp_path))
    assert out["content"][0]["cut"] is True and out["content"][0]["chars"] == 40_000
