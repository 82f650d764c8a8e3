"""An eval of an agent driven by a provider's model over HTTP (OpenAI's wire format,
served on 127.0.0.1): the boundaries a scripted model cannot take (a forced
compaction) are injected, and the eval's budget stops what would cost too much."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stead.evals.runner import Options, run_eval
from stead.evals.suite import load_suite
from tests.models.fake_servers import (
    FakeServer,
    Reply,
    anthropic_answer,
    anthropic_text,
    anthropic_use,
    openai_answer,
    openai_call,
)

FILES = ("first.md", "second.md", "third.md")


def next_call(body: Any) -> tuple[str, dict[str, Any]] | str:
    """A model that writes three files in turn, then finishes: what it does next
    follows from the files its request already mentions, so a resumed or compacted
    conversation gets the same answer as an uninterrupted one. A request without
    tools asks for a summary: its text keeps what it covers."""
    done = [name for name in FILES if name in json.dumps(body)]
    if "tools" not in body:
        return f"Written so far: {', '.join(done) or 'nothing'}."
    if len(done) == len(FILES):
        return ("finish", {"summary": "three files written"})
    return ("write_file", {"path": FILES[len(done)], "content": FILES[len(done)]})


def openai(body: Any) -> Reply:
    call = next_call(body)
    if isinstance(call, str):
        return Reply(200, openai_answer(text=call))
    made = openai_call(f"call_{len(json.dumps(body))}", *call)
    return Reply(200, openai_answer([made], prompt_tokens=300, completion_tokens=30))


def anthropic(body: Any) -> Reply:
    call = next_call(body)
    if isinstance(call, str):
        return Reply(200, anthropic_answer([anthropic_text(call)]))
    made = anthropic_use(f"toolu_{len(json.dumps(body))}", *call)
    return Reply(200, anthropic_answer([made], input_tokens=300, output_tokens=30))


@pytest.fixture(params=["openai", "anthropic"])
def model_server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeServer]:
    """A fake model service of each wire format on 127.0.0.1, its key in the
    workers' environment and allowed to go there."""
    provider = request.param
    with FakeServer() as server:
        server.responder = openai if provider == "openai" else anthropic
        server.provider = provider  # type: ignore[attr-defined]
        name = f"{provider.upper()}_API_KEY"
        monkeypatch.setenv(name, "sk-test-1234567890abcdef")
        monkeypatch.setenv("STEAD_MODEL_KEY_ENV", name)
        yield server


def suite(tmp_path: Path, server: FakeServer, extra: str = "") -> Path:
    provider = server.provider  # type: ignore[attr-defined]
    spec = tmp_path / "writer.yaml"
    spec.write_text(
        "name: writer\ninstructions: Write the three files you are asked for, then finish.\n"
        f"model: {{provider: {provider}, name: m-1, base_url: '{server.url}'}}\n"
        "tools: [write_file]\n",
        encoding="utf-8",
    )
    path = tmp_path / "suite.yaml"
    path.write_text(
        "name: provider\nruns: 1\nconditions: [{kind: kill, at: 2}, {kind: compact, at: 2},"
        " {kind: model_swap, at: 2}, {kind: hibernate, at: 2}]\n"
        f"tasks: [{{id: writer, spec: writer.yaml}}]\n{extra}",
        encoding="utf-8",
    )
    return path


def test_a_provider_agent_under_every_boundary_it_can_take(
    tmp_path: Path, model_server: FakeServer
) -> None:
    summary = run_eval(load_suite(suite(tmp_path, model_server)), Options(tmp_path / "out"))
    rows = {r["condition"]: r for r in summary["tasks"][0]["conditions"]}
    for label in ("baseline", "kill", "compact", "model_swap"):
        r = rows[label]
        assert r["errors"] == [], (label, r["errors"])
        assert r["completion"]["rate"] == 1.0 and r["completion"]["certified"] == 1.0, label
        assert r["effects"] == {"repeated": 0, "lost": 0, "unknown": 0, "retried": 0}, label
        assert r["same_outcome"]["rate"] == 1.0, label
        assert r["cost"]["tokens"]["median"] > 0
    assert [p["kind"] for p in rows["compact"]["injected"]["proof"]] == ["context_compacted"]
    assert [p["kind"] for p in rows["kill"]["injected"]["proof"]][:2] == [
        "tool_intent",
        "activation_started",
    ]
    # this agent never waits for the world, so it is never hibernated: said, not passed
    assert "only an agent waiting for the world" in rows["hibernate"]["errors"][0]
    assert any("hibernate" in f for f in summary["failures"])
    # the summary request reached the model: the compaction was the model's own
    assert any("tools" not in seen.body for seen in model_server.seen)


def test_the_budget_stops_a_run_and_starts_no_more(
    tmp_path: Path, model_server: FakeServer
) -> None:
    path = suite(tmp_path, model_server, "budget: {tokens: 500}\n")
    summary = run_eval(load_suite(path), Options(tmp_path / "out", jobs=1))
    base = next(r for r in summary["tasks"][0]["conditions"] if r["condition"] == "baseline")
    # one decision of 330 tokens, a second one reaches 660: the run stops after it
    assert base["cost"]["tokens"]["median"] == 660
    assert base["completion"]["rate"] == 0.0
    cell = json.loads((tmp_path / "out/cells/writer/baseline/0/cell.json").read_text("utf-8"))
    assert cell["stopped"] == "stopped by the eval's budget"
    assert len(summary["info"]["skipped"]) == 4  # every other cell: the budget was spent
