"""An agent driven by a provider's model over HTTP, through the whole runtime.

The model is a fake server of each wire format on 127.0.0.1; everything else
(the spec, the vault, the store, the sandboxed tools, the journal) is real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.store.sqlite import SqliteStore

from .agents import runtime
from .fake_servers import FakeServer
from .test_providers import error, tool_answer

KEY = "sk-live-4f1c9a7e2b8d6035"
PROVIDERS = ["openai", "anthropic"]


def agent(
    rt: Runtime, tmp_path: Path, provider: str, url: str, on_text: str = "wait", **model: Any
) -> str:
    secret = f"{provider.upper()}_API_KEY"
    rt.vault().set("default", secret, KEY, to=["127.0.0.1"], at=rt.clock.now())
    spec = {
        "name": "writer",
        "instructions": "Write hello.txt, read it back, then finish.",
        "model": {"provider": provider, "name": "m-1", "base_url": url, **model},
        "tools": ["write_file", "read_file"],
        "on_text": on_text,
    }
    return rt.create(parse_spec(spec, tmp_path)).agent_id


def kinds(rt: Runtime, agent_id: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent_id) if e.kind == kind]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_real_agent_runs_to_its_finish_with_cost_and_attempts_journaled(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, provider, server.url)
    busy = error(provider, 429, "slow down")
    busy.headers = {"retry-after": "0"}
    server.queue(
        tool_answer(provider, ("write_file", {"path": "hello.txt", "content": "hello " + KEY})),
        busy,
        tool_answer(provider, ("read_file", {"path": "hello.txt"})),
        tool_answer(provider, ("finish", {"summary": "wrote and read hello.txt"})),
    )
    outcome = rt.run(agent_id)
    assert outcome.state.status == "completed", outcome.state.status_reason
    assert (rt.workspace(agent_id, "default").root / "hello.txt").read_text().startswith("hello")
    decisions = kinds(rt, agent_id, Kind.DECISION)
    assert [d["model"] for d in decisions] == [f"{provider}:m-1"] * 3
    assert [a["status"] for a in decisions[1]["attempts"]] == [429, 200]
    assert decisions[-1]["usage"]["total_tokens"] == 3 * 120
    assert decisions[-1]["usage"]["input_tokens"] == 100
    # what the model was shown of the file it wrote came back redacted, and the key
    # it authenticates with went in a header, never in a body
    assert all(KEY not in str(s.body) for s in server.seen[1:])
    auth = "authorization" if provider == "openai" else "x-api-key"
    assert all(KEY in s.headers[auth] for s in server.seen)
    rt.close()
    # the key is nowhere in the database or the blobs
    for path in [tmp_path / "s.db", *(tmp_path / "data").rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_key_stops_the_agent_saying_what_to_do(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, provider, server.url)
    # a service that echoes the key it refused: the journal still never holds it
    server.queue(error(provider, 401, f"invalid x-api-key {KEY}"))
    state = rt.run(agent_id).state
    assert KEY not in state.status_reason
    assert state.status == "needs_attention"
    assert "refused the API key" in state.status_reason
    assert "stead secret set" in state.status_reason
    (stopped,) = [d for d in kinds(rt, agent_id, Kind.STATUS_CHANGED) if "attempts" in d]
    assert stopped["attempts"][0]["status"] == 401
    assert not kinds(rt, agent_id, Kind.DECISION)  # nothing was decided, nothing ran
    # the person sets a good key and resumes: the agent goes on
    server.queue(tool_answer(provider, ("finish", {"summary": "ok"})))
    assert rt.run(agent_id).state.status == "completed"  # `stead resume`
    rt.close()
    assert KEY.encode() not in (tmp_path / "s.db").read_bytes()


def test_a_key_from_the_workers_environment_is_used_when_the_vault_has_none(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_LLM_KEY", "env-key-77")
    monkeypatch.setenv("STEAD_MODEL_KEY_ENV", "LOCAL_LLM_KEY")  # the operator allows it
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock())
    spec = {
        "name": "local",
        "model": {
            "provider": "openai",
            "name": "llama3.1",
            "base_url": server.url,
            "api_key_secret": "LOCAL_LLM_KEY",
        },
    }
    agent_id = rt.create(parse_spec(spec, tmp_path)).agent_id
    server.queue(tool_answer("openai", ("finish", {"summary": "ok"})))
    assert rt.run(agent_id).state.status == "completed"
    assert server.seen[0].headers["authorization"] == "Bearer env-key-77"
    assert server.seen[0].body["model"] == "llama3.1"
    rt.close()


def test_the_stored_spec_holds_the_secrets_name_never_a_key(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    spec = {"name": "a", "model": "anthropic:claude-sonnet-4-5"}
    state = rt.create(parse_spec(spec, tmp_path))
    record = rt.store.get_record(state.agent_id).spec
    assert record["model"] == "anthropic:claude-sonnet-4-5"
    assert record["model_options"]["api_key_secret"] == "ANTHROPIC_API_KEY"
    assert record["model_options"]["base_url"] == "https://api.anthropic.com/v1"
    rt.close()


def test_a_program_can_create_an_agent_for_its_own_model(tmp_path: Path) -> None:
    from stead.errors import SpecError
    from stead.testing import scripted

    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock())
    agent_id = rt.create(
        parse_spec({"name": "mine", "model": "program:planner"}, tmp_path)
    ).agent_id
    with pytest.raises(SpecError, match="given by the program that runs it"):
        rt.run(agent_id)
    state = rt.run(agent_id, model=scripted([{"finish": "done by my own model"}])).state
    assert state.status == "completed"
    rt.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_key_is_in_no_snapshot_archive_or_recording(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, provider, server.url)
    server.queue(
        # the model itself writes the key into its arguments and its memory
        tool_answer(provider, ("write_file", {"path": "k.txt", "content": KEY})),
        tool_answer(provider, ("remember", {"values": {"key": KEY}})),
        tool_answer(provider, ("wait_for_input", {"prompt": f"is {KEY} right?"})),
    )
    recording = tmp_path / "run.jsonl"
    assert rt.run(agent_id, record_model=recording).state.status == "waiting"
    rt.hibernate(agent_id)
    rt.wake(agent_id)
    rt.export(agent_id, tmp_path / "agent.stead")
    rt.close()
    files = [tmp_path / "s.db", tmp_path / "agent.stead", recording]
    files += [p for p in (tmp_path / "data").rglob("*") if p.is_file()]
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data, path
    assert (tmp_path / "agent.stead").stat().st_size > 0 and recording.stat().st_size > 0


def test_show_gives_the_model_and_what_it_cost(tmp_path: Path, server: FakeServer) -> None:
    from stead.cli.main import main

    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, "openai", server.url)
    server.queue(tool_answer("openai", ("wait_for_input", {"prompt": "next?"})))
    rt.run(agent_id)
    rt.close()
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["show", agent_id, *store]) == 0
    text = printed.getvalue()
    assert "model: openai:m-1" in text and "usage: 120 tokens" in text


def test_the_operators_key_goes_to_the_providers_own_endpoint_and_allowed_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stead.models.registry import model_for

    monkeypatch.setenv("OPENAI_API_KEY", "sk-operators-openai-key")
    monkeypatch.setenv("LOCAL_KEY", "local-key")
    monkeypatch.setenv("STEAD_MODEL_KEY_ENV", "LOCAL_KEY")
    own = {"provider": "openai", "name": "m", "base_url": "https://api.openai.com/v1",
           "api_key_secret": "OPENAI_API_KEY"}  # fmt: skip
    local = {"provider": "openai", "name": "m", "base_url": "http://127.0.0.1:9/v1",
             "api_key_secret": "LOCAL_KEY"}  # fmt: skip
    spec = {"model": "openai:m", "model_options": None}
    from stead.models.options import parse_model

    for opts, key in ((own, "sk-operators-openai-key"), (local, "local-key")):
        spec["model_options"] = parse_model(opts).to_json()
        model = model_for(spec)
        assert model.secrets == {opts["api_key_secret"]: key}  # type: ignore[attr-defined]
        model.close()  # type: ignore[attr-defined]
