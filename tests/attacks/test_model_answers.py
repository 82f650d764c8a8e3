"""Boundary: model answers (docs/security.md).

A model's answer is steered by everything in its context, and the service
that sends it may be broken or hostile. What must never happen: an answer
that calls no tool, calls a tool the agent does not have, or gives arguments
off the tool's schema is acted on; an answer that is not JSON, not the wire
format, nested past any recursion limit or holding numbers no integer can
hold crashes the worker; a run of unusable answers goes on for ever; a
decision widens the agent's own authority; a call asks for more time than the
operator allows. Whatever the model decides is judged by the gate at the
moment it runs, and ``finish`` is a claim the runtime checks
(tests/integrity/test_completion.py).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stead import FakeClock, Kind
from stead.errors import InvalidAnswer, ModelError
from stead.sandbox.bwrap import BwrapSandbox

from ..governance.agents import make_agent, run, runtime_at
from ..governance.test_autonomy import PROBE
from ..models import conftest as model_fixtures
from ..models import test_providers as providers
from ..models.agents import runtime
from ..models.fake_servers import (
    FakeServer,
    Reply,
    anthropic_answer,
    anthropic_use,
    openai_answer,
    openai_call,
)
from ..models.test_providers import CONTEXT, PROVIDERS, make, text_answer, tool_answer
from ..models.test_real_agent import agent, kinds
from ..runtime.test_operator_limits import _results, _run
from .memory import MB, PeakRss

server = model_fixtures.server
"""A fake model service on 127.0.0.1 (tests/models/conftest.py)."""
asking = providers.asking
"""Each provider-level test twice: the model asked in a thread, and on an event loop."""

# -- one answer, as each wire format carries it ----------------------------------------------


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (lambda p: text_answer(p, ""), "neither text nor a tool call"),
        (lambda p: tool_answer(p, ("rm_rf", {})), "there is no tool 'rm_rf'"),
        (lambda p: tool_answer(p, ("read_file", {"path": 3})), "do not fit its schema at path"),
        (lambda p: tool_answer(p, ("read_file", {})), "'path' is a required property"),
        (lambda p: tool_answer(p, ("finish", {"summary": "x", "extra": 1})), "do not fit"),
    ],
)
def test_an_unusable_answer_is_refused_with_the_reason(
    server: FakeServer, provider: str, answer: Callable[[str], Reply], reason: str
) -> None:
    model, _ = make(provider, server.url)
    server.queue(answer(provider))
    with pytest.raises(InvalidAnswer, match=reason) as err:
        model.decide(CONTEXT)
    assert err.value.answer is not None and err.value.usage is not None
    assert [a.status for a in err.value.attempts] == [200]


@pytest.mark.usefixtures("asking")
def test_openai_arguments_that_are_not_json_are_refused(server: FakeServer) -> None:
    model, _ = make("openai", server.url)
    server.queue(Reply(200, openai_answer([openai_call("c1", "read_file", '{"path": ')])))
    with pytest.raises(InvalidAnswer, match="not valid JSON"):
        model.decide(CONTEXT)


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_answers_are_model_errors_not_crashes(server: FakeServer, provider: str) -> None:
    model, _ = make(provider, server.url)
    server.queue(Reply(200, raw=b"<html>gateway</html>"), Reply(200, {"unexpected": True}))
    with pytest.raises(ModelError, match="not JSON"):
        model.decide(CONTEXT)
    with pytest.raises(ModelError, match="not in its wire format"):
        model.decide(CONTEXT)


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        # a token count no integer can hold
        (b'{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]}}],'
         b'"usage":{"prompt_tokens":1e400}}', "not finite"),
        # NaN and an infinite number in the arguments
        (b'{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function",'
         b'"function":{"name":"wait","arguments":"{\\"seconds\\": 1e400}"}}]}}]}',
         "not valid JSON"),
        (b'{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function",'
         b'"function":{"name":"remember","arguments":"{\\"values\\": {\\"x\\": NaN}}"}}]}}]}',
         "not valid JSON"),
        # nesting deep enough to exhaust the recursion limit
        (b'{"choices":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "not JSON"),
        (b'{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]}}],'
         b'"usage":{"prompt_tokens":NaN}}', "not JSON"),
    ],
)  # fmt: skip
def test_a_hostile_answer_is_an_error_never_a_crash(
    server: FakeServer, raw: bytes, problem: str
) -> None:
    model, _ = make("openai", server.url)
    server.queue(Reply(200, raw=raw))
    with pytest.raises(ModelError, match=problem):
        model.decide(CONTEXT)


@pytest.mark.usefixtures("asking")
def test_negative_token_counts_count_as_none(server: FakeServer) -> None:
    model, _ = make("anthropic", server.url)
    body = anthropic_answer([anthropic_use("t1", "finish", {"summary": "x"})], input_tokens=-500)
    server.queue(Reply(200, body))
    usage = model.decide(CONTEXT).usage
    assert usage is not None and usage["input_tokens"] == 0 and usage["tokens"] == 20


# -- answers an agent cannot use, in a run ----------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unusable_answers_are_shown_back_then_stop_the_agent(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, provider, server.url, "refuse", invalid_answers=3)
    server.queue(
        text_answer(provider, "Sure, I will write the file."),
        tool_answer(provider, ("write_file", {"path": "hello.txt", "content": "hi"})),
        text_answer(provider, "Done!"),
        tool_answer(provider, ("no_such_tool", {})),
        tool_answer(provider, ("read_file", {"path": 7})),
    )
    state = rt.run(agent_id).state
    assert state.status == "needs_attention"
    assert "gave 3 answers in a row that could not be used" in state.status_reason
    refused = kinds(rt, agent_id, Kind.ANSWER_REFUSED)
    assert [r["reason"][:30] for r in refused] == [
        "your answer called no tool; ev",
        "your answer called no tool; ev",
        "there is no tool 'no_such_tool",
        "the arguments of your call of ",
    ]
    assert refused[0]["answer"]["text"] == "Sure, I will write the file."
    # the refusal was in the very next request the model got
    text = str(server.seen[1].body)
    assert "could not be used: your answer called no tool" in text
    # a decision in between reset the count: 1 refused, 1 decision, then 3 in a row
    assert len(kinds(rt, agent_id, Kind.DECISION)) == 1
    rt.close()


# -- decisions that would widen the agent's authority or its limits ---------------------------


@pytest.mark.parametrize(
    ("action", "what"),
    [
        ({"grant": {"tool": "shell"}}, "grant itself scope"),
        ({"approve": "apr_anything"}, "cannot approve"),
        ({"set_autonomy": "act_autonomously"}, "cannot change its autonomy"),
    ],
)
def test_an_agent_cannot_widen_its_own_authority(
    tmp_path: Path, action: dict[str, object], what: str
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [action, PROBE, {"finish": "done"}],
        autonomy="observe",
        scope=[{"tool": "probe"}],
    )
    before = rt.store.load_state(agent)
    seen: list[str] = []

    class Watching:
        name = "watching"

        def __init__(self, inner: object) -> None:
            self.inner = inner

        def decide(self, context: object) -> object:
            seen.append(context.text)  # type: ignore[attr-defined]
            return self.inner.decide(context)  # type: ignore[attr-defined]

    from stead.models.registry import model_for

    model = Watching(model_for(rt.store.get_record(agent).spec))
    state = run(rt, agent, model=model).state
    (refused,) = [e for e in rt.store.read_events(agent) if e.kind == Kind.GOVERNANCE_REFUSED]
    assert what in refused.data["reason"]
    assert refused.data["type"] == next(iter(action))

    def definitions(grants: dict[str, dict[str, object]]) -> dict[str, object]:
        return {gid: {k: v for k, v in g.items() if k != "uses"} for gid, g in grants.items()}

    assert definitions(state.grants) == definitions(before.grants)  # nothing widened
    assert (state.autonomy, state.tool_autonomy) == ("observe", {})
    assert what in seen[1]  # the refusal is in the model's next context
    assert state.status == "completed"
    rt.close()


def test_a_model_cannot_ask_for_more_time_than_the_operator_allows(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    script = [
        {"tool": "shell", "args": {"command": "sleep 30; echo woke", "timeout": 100000}},
        {"finish": "done"},
    ]
    rt, agent_id = _run(tmp_path, script, {"command_seconds": 1})
    (result,) = _results(rt, agent_id)
    assert result["output"]["timed_out"] is True
    assert result["output"]["timeout"] == 1.0
    assert "woke" not in result["output"]["stdout"]
    rt.close()


# -- answers too long, or too slow, to wait for (issue 26) ---------------------------------------


def _flood(total: int) -> Iterator[bytes]:
    """``total`` bytes of an answer that starts as JSON and never becomes whole."""
    yield b'{"choices": [{"message": {"content": "'
    chunk = b"x" * (64 * 1024)
    for _ in range(total // len(chunk)):
        yield chunk


def _drip(seconds: float, every: float = 1.0) -> Iterator[bytes]:
    """An answer that sends one byte every ``every`` seconds for ``seconds``."""
    yield b'{"choices": '
    ended = time.monotonic() + seconds
    while time.monotonic() < ended:
        time.sleep(every)
        yield b" "


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize("size", [300 * MB, 1024 * MB], ids=["300-MB", "1-GB-without-an-end"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_too_long_is_refused_while_it_arrives(
    server: FakeServer, provider: str, size: int
) -> None:
    model, _ = make(provider, server.url)
    server.queue(Reply(200, chunks=_flood(size)))
    with PeakRss() as memory, pytest.raises(ModelError, match="longer than 16 MiB") as err:
        model.decide(CONTEXT)
    assert "refused" in str(err.value) and [a.status for a in err.value.attempts] == [200]
    assert memory.growth < 100 * MB, f"reading it took {memory.growth // MB} MB"


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeout_bounds_the_whole_request_not_each_read(server: FakeServer, provider: str) -> None:
    # one byte a second never lets a read wait its 2 s; the request still ends at 2 s,
    # and so does the retry, so the model call ends within 2 x 2 s (and some slack)
    model, _ = make(provider, server.url, timeout=2, max_retries=1)
    server.responder = lambda _body: Reply(200, chunks=_drip(15))
    started = time.monotonic()
    with pytest.raises(ModelError, match="gave no answer after 2 attempts") as err:
        model.decide(CONTEXT)
    took = time.monotonic() - started
    assert took < 2 * 2 + 3, f"the model call took {took:.1f}s with timeout: 2 and 1 retry"
    assert [a.error for a in err.value.attempts] == ["timed out", "timed out"]


def test_a_flooding_model_stops_the_agent_with_the_reason(
    tmp_path: Path, server: FakeServer
) -> None:
    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, "openai", server.url)
    server.queue(Reply(200, chunks=_flood(1024 * MB)))
    with PeakRss() as memory:
        state = rt.run(agent_id).state
    assert state.status == "needs_attention"
    assert "longer than 16 MiB" in state.status_reason
    assert memory.growth < 100 * MB, f"the run took {memory.growth // MB} MB"
    rt.close()


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize("proxied", [False, True], ids=["direct", "through-a-proxy"])
def test_a_service_dripping_its_headers_is_cut_off_at_the_timeout(
    monkeypatch: pytest.MonkeyPatch, proxied: bool
) -> None:
    # the status line and headers one every second: no read waits, the answer never starts
    # (or the proxy the environment names answers so: its connections are held too)
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]

    def drip_headers() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listening.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for n in range(15):
                    time.sleep(1)
                    conn.sendall(b"x-wait-%d: 1\r\n" % n)

    threading.Thread(target=drip_headers, daemon=True).start()
    url = f"http://127.0.0.1:{port}/v1"
    if proxied:
        monkeypatch.setenv("HTTP_PROXY", url.removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        url = "http://model.invalid/v1"
    model, _ = make("openai", url, timeout=2, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ModelError, match="gave no answer after 1 attempts") as err:
        model.decide(CONTEXT)
    took = time.monotonic() - started
    listening.close()
    assert [a.error for a in err.value.attempts] == ["timed out"]
    assert took < 2 + 3, f"the model call took {took:.1f}s with timeout: 2"


def test_an_endless_answer_leaves_the_servers_memory_where_it_was(
    tmp_path: Path, server: FakeServer
) -> None:
    """Against a real ``stead serve``: an agent made over HTTP whose model answers
    1 GB without end costs the server's process less than 100 MB at its peak."""
    import httpx

    from ..server.process import stead_serve

    server.queue(Reply(200, chunks=_flood(1024 * MB)))
    with stead_serve(f"sqlite:///{tmp_path / 'stead.db'}") as live:
        admin, _ = live.token(role="admin")
        operator, _ = live.token(role="operator")

        def call(token: str, method: str, path: str, **kw: object) -> httpx.Response:
            auth = {"authorization": f"Bearer {token}"}
            return httpx.request(method, live.base + path, headers=auth, timeout=30, **kw)  # type: ignore[arg-type]

        policy = f'@model_base_url("{server.url}")\npermit(principal, action, resource);\n'
        assert call(admin, "PUT", "/v1/policy", json={"text": policy}).status_code == 200
        model = {"provider": "openai", "name": "m", "base_url": server.url}
        made = call(operator, "POST", "/v1/agents", json={"spec": {"name": "x", "model": model}})
        assert made.status_code == 201, made.text
        agent_id = made.json()["agent_id"]
        before = live.rss("VmHWM")
        assert call(operator, "POST", f"/v1/agents/{agent_id}/run").status_code == 202
        deadline = time.monotonic() + 120
        while True:
            state = call(operator, "GET", f"/v1/agents/{agent_id}").json()["state"]
            if state["status"] == "needs_attention":
                break
            assert time.monotonic() < deadline, state["status"]
            time.sleep(0.2)
        grew = live.rss("VmHWM") - before
    assert "longer than 16 MiB" in state["status_reason"]
    assert grew < 100 * MB, f"the server's peak grew by {grew // MB} MB"


# -- text answers: words to a person, never an action of their own ----------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_text_answer_never_completes_an_agent_whose_checks_fail(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    from stead import parse_spec

    rt = runtime(tmp_path)
    rt.vault().set("default", f"{provider.upper()}_API_KEY", "sk-test-0123456789",
                   to=["127.0.0.1"], at=rt.clock.now())  # fmt: skip
    spec = {
        "name": "claimer", "on_text": "finish", "limits": {"max_steps": 3},
        "model": {"provider": provider, "name": "m-1", "base_url": server.url},
        "goals": [{"id": "file", "accept": [{"files_exist": ["proof.txt"]}]}],
    }  # fmt: skip
    agent_id = rt.create(parse_spec(spec, tmp_path)).agent_id
    server.default = text_answer(provider, "All done! Every check passed, mark me completed.")
    state = rt.run(agent_id).state
    assert state.status == "failed" and "limit of 3 steps" in state.status_reason
    assert len(kinds(rt, agent_id, Kind.FINISH_REJECTED)) == 3
    assert kinds(rt, agent_id, Kind.FINISH_CLAIMED) == []
    rt.close()


def test_a_text_answers_control_characters_reach_no_terminal(tmp_path: Path) -> None:
    from stead.summaries import summarize

    rt = runtime_at(tmp_path, FakeClock(1000.0))
    said = "Done.\x1b]0;pwned\x07\x1b[2J\u202etxt.exe"
    agent_id = make_agent(rt, tmp_path, [{"say": said}])
    assert run(rt, agent_id).state.status == "waiting"
    lines = [summarize(e) for e in rt.store.read_events(agent_id)]
    (line,) = [x for x in lines if x.startswith("the agent says:")]
    assert "\x1b" not in line and "\u202e" not in line and "\\x1b[2J" in line
    rt.close()
