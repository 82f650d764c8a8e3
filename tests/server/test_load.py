"""``stead serve`` under a bounded load on 127.0.0.1: 50 clients for 30 seconds sending
messages to agents waiting for input, reading journals page by page, making agents
that ask for approval, and racing each other to approve them.

Afterwards: no request failed (no 5xx, no transport error, and a 4xx only where the
race makes one: the losers of an approval are told it is no longer waiting); every
message a client was told was taken is in its agent's journal exactly once; every
approval was granted once, to one client, and its agent, run, completed.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from stead.server import api

from .conftest import WRITE, Served, write_spec
from .test_api import made, run_until

REPO = Path(__file__).resolve().parents[2]
CLIENTS = 50
SECONDS = 30.0
WAITERS = 8
"""Agents waiting for input that the senders share, so that sends to one agent meet."""


@dataclass
class Load:
    base: str
    tokens: dict[str, str]
    until: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiters: list[str] = field(default_factory=list)
    askers: list[str] = field(default_factory=list)
    sent: dict[str, list[str]] = field(default_factory=dict)  # agent: texts taken
    refused: dict[str, list[str]] = field(default_factory=dict)  # agent: texts refused
    granted: list[tuple[str, str]] = field(default_factory=list)  # (approval, agent) won
    lost_races: int = 0
    pages: int = 0
    unexpected: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def client(self, role: str) -> httpx.Client:
        auth = {"authorization": f"Bearer {self.tokens[role]}"}
        # an idle connection is dropped well before the server's keep-alive (5 s)
        # ends it: at equal times, a request sent as the server closes is lost
        limits = httpx.Limits(keepalive_expiry=1.0)
        return httpx.Client(base_url=self.base, headers=auth, timeout=60, limits=limits)

    def note(self, what: str, got: httpx.Response | None, error: str = "") -> None:
        with self.lock:
            if got is None:
                self.unexpected.append(f"{what}: {error}")
            else:
                self.unexpected.append(f"{what}: {got.status_code} {got.text[:300]}")


def _stead(env: dict[str, str], *argv: str) -> Any:
    out = subprocess.run([sys.executable, "-m", "stead", *argv, "--json"], env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout)


@pytest.fixture
def load(tmp_path: Path) -> Iterator[Load]:
    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "asker", [WRITE, {"finish": "wrote"}], autonomy="act_with_approval")
    write_spec(specs, "waiter", [{"wait_for_input": "anything?"}, {"finish": "heard"}])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEAD_", "OTEL_"))}
    env |= {"PYTHONPATH": str(REPO), "STEAD_STORE": f"sqlite:///{tmp_path / 'stead.db'}",
            "STEAD_SECRET_KEY": base64.b64encode(os.urandom(32)).decode()}  # fmt: skip
    tokens = {
        role: _stead(env, "token", "create", "--tenant", "acme", "--role", role, "--name",
                     f"{role} under load")["token"]
        for role in ("viewer", "operator", "approver")
    }  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        # the clients run the agents themselves (POST .../run), racing each other and
        # their messages: the server's own worker would end them before the races
        [sys.executable, "-m", "stead", "serve", "--port", str(port), "--specs", str(specs),
         "--workers", "0"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(base + "/v1/health", timeout=1).raise_for_status()
            break
        except httpx.HTTPError:
            assert server.poll() is None and time.monotonic() < deadline, (
                "stead serve did not start"
            )
            time.sleep(0.1)
    try:
        yield Load(base, tokens)
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
        # anything the server logged (a traceback) is shown with a failure
        sys.stdout.write((tmp_path / "serve.log").read_text(errors="replace"))


def _status(c: httpx.Client, agent_id: str) -> str:
    got = c.get(f"/v1/agents/{agent_id}")
    assert got.status_code == 200, got.text
    return str(got.json()["state"]["status"])


def _run(c: httpx.Client, agent_id: str) -> None:
    got = c.post(f"/v1/agents/{agent_id}/run")
    assert got.status_code == 202, got.text


def _journal(c: httpx.Client, agent_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after: int | None = 0
    while after is not None:
        got = c.get(f"/v1/agents/{agent_id}/events", params={"after": after})
        assert got.status_code == 200, got.text
        page = got.json()
        events += page["events"]
        after = page["next"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    return events


def sender(load: Load, n: int) -> None:
    """Messages to the shared waiters, each text unique."""
    rng = random.Random(n)
    with load.client("operator") as c:
        for i in itertools.count():
            if time.monotonic() >= load.until:
                return
            agent_id = rng.choice(load.waiters)
            text = f"message {i} from sender {n}"
            try:
                got = c.post(f"/v1/agents/{agent_id}/messages", json={"text": text})
            except httpx.HTTPError as exc:
                load.note("send", None, repr(exc))
                continue
            with load.lock:
                load.counts[f"send {got.status_code}"] += 1
                if got.status_code == 200:
                    load.sent.setdefault(agent_id, []).append(text)
                else:
                    load.refused.setdefault(agent_id, []).append(text)
            if got.status_code != 200:
                load.note(f"send to {agent_id}", got)


def reader(load: Load, n: int) -> None:
    """Journals read page by page from a random place, each page checked whole."""
    rng = random.Random(1000 + n)
    with load.client("viewer") as c:
        while time.monotonic() < load.until:
            with load.lock:
                agent_id = rng.choice(load.waiters + load.askers)
            after: int | None = rng.choice([0, 0, rng.randrange(0, 20)])
            limit = rng.choice([1, 7, 50, 500])
            while after is not None and time.monotonic() < load.until:
                try:
                    got = c.get(f"/v1/agents/{agent_id}/events",
                                params={"after": after, "limit": limit})  # fmt: skip
                except httpx.HTTPError as exc:
                    load.note("read", None, repr(exc))
                    break
                with load.lock:
                    load.counts[f"read {got.status_code}"] += 1
                if got.status_code != 200:
                    load.note(f"read {agent_id}", got)
                    break
                page = got.json()
                seqs = [e["seq"] for e in page["events"]]
                if seqs != list(range(after + 1, after + 1 + len(seqs))) or len(seqs) > limit:
                    load.note(f"page of {agent_id} after {after} limit {limit}: {seqs}", None)
                with load.lock:
                    load.pages += 1
                after = page["next"]


def maker(load: Load, n: int) -> None:
    """New agents that ask for approval, so approvals keep coming during the load."""
    with load.client("operator") as c:
        while time.monotonic() < load.until:
            try:
                made = c.post("/v1/agents", json={"spec_file": "asker.yaml"})
                if made.status_code != 201:
                    load.note("create", made)
                    continue
                agent_id = made.json()["agent_id"]
                ran = c.post(f"/v1/agents/{agent_id}/run")
                if ran.status_code != 202:
                    load.note(f"run {agent_id}", ran)
                with load.lock:
                    load.askers.append(agent_id)
                    load.counts["made"] += 1
            except httpx.HTTPError as exc:
                load.note("make", None, repr(exc))
            time.sleep(0.3)


def approver(load: Load, n: int) -> None:
    """Approve one of the oldest waiting approvals (the others race for the same);
    a winner runs its agent on."""
    rng = random.Random(2000 + n)
    with load.client("approver") as c, load.client("operator") as op:
        while time.monotonic() < load.until:
            try:
                listed = c.get("/v1/approvals")
                if listed.status_code != 200:
                    load.note("approvals", listed)
                    continue
                pending = listed.json()[:2]
                if not pending:
                    time.sleep(0.05)
                    continue
                pick = rng.choice(pending)
                got = c.post(f"/v1/approvals/{pick['approval_id']}/approve",
                             json={"valid_for_seconds": 900})  # fmt: skip
            except httpx.HTTPError as exc:
                load.note("approve", None, repr(exc))
                continue
            with load.lock:
                load.counts[f"approve {got.status_code}"] += 1
            if got.status_code == 200:
                with load.lock:
                    load.granted.append((pick["approval_id"], pick["agent_id"]))
                ran = op.post(f"/v1/agents/{pick['agent_id']}/run")
                if ran.status_code != 202:
                    load.note(f"run approved {pick['agent_id']}", ran)
            elif got.status_code == 404 and got.json()["error"]["message"] in (
                # the race lost before the lease, or after it, with the winner's answer in
                f"no approval {pick['approval_id']} is waiting for an answer; "
                "GET /v1/approvals lists them",
                f"approval {pick['approval_id']} is no longer waiting for an answer",
            ):
                with load.lock:
                    load.lost_races += 1
            else:
                load.note(f"approve {pick['approval_id']}", got)


@pytest.mark.chaos  # half a minute of load, and more to settle
def test_fifty_clients_for_thirty_seconds_lose_nothing_and_approve_once(load: Load) -> None:
    with load.client("operator") as c:
        for _ in range(WAITERS):
            agent_id = c.post("/v1/agents", json={"spec_file": "waiter.yaml"}).json()["agent_id"]
            _run(c, agent_id)
            load.waiters.append(agent_id)
        for _ in range(10):
            agent_id = c.post("/v1/agents", json={"spec_file": "asker.yaml"}).json()["agent_id"]
            _run(c, agent_id)
            load.askers.append(agent_id)
        deadline = time.monotonic() + 60
        while {_status(c, a) for a in load.waiters + load.askers} != {"waiting"}:
            assert time.monotonic() < deadline, "the agents did not come to wait"
            time.sleep(0.1)

    roles = [sender] * 20 + [reader] * 15 + [approver] * 10 + [maker] * 5
    assert len(roles) == CLIENTS
    load.until = time.monotonic() + SECONDS
    threads = [threading.Thread(target=role, args=(load, n), name=f"{role.__name__}-{n}")
               for n, role in enumerate(roles)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=SECONDS + 120)
    assert not any(t.is_alive() for t in threads), "a client hung"
    print(dict(load.counts), f"pages {load.pages}, races lost {load.lost_races}")

    assert load.unexpected == []
    with load.client("operator") as c:
        # every message taken is in its agent's journal once; none refused is
        for agent_id in load.waiters:
            journal = _journal(c, agent_id)
            heard = Counter(e["data"]["text"] for e in journal if e["kind"] == "input_received")
            assert heard == Counter(load.sent.get(agent_id, [])), agent_id
            assert all(e["data"]["by"].startswith("operator under load") for e in journal
                       if e["kind"] == "input_received")  # fmt: skip
        assert sum(len(texts) for texts in load.sent.values()) > 100

        # each approval was won by one client, granted once, and its agent completed
        won = Counter(approval for approval, _ in load.granted)
        assert won and max(won.values()) == 1, won
        assert load.lost_races > 0, "the approvers never raced"
        deadline = time.monotonic() + 60
        for _, agent_id in load.granted:
            while _status(c, agent_id) != "completed":
                if time.monotonic() > deadline:
                    tail = [(e["kind"], e["data"]) for e in _journal(c, agent_id)[-4:]]
                    pytest.fail(f"{agent_id} approved but not completed: {tail}")
                time.sleep(0.1)
        for agent_id in load.askers:
            journal = _journal(c, agent_id)
            grants = [e["data"]["approval_id"] for e in journal if e["kind"] == "approval_granted"]
            asked = [e["data"]["approval_id"] for e in journal
                     if e["kind"] == "approval_requested"]  # fmt: skip
            assert Counter(grants) == Counter(a for a, b in load.granted if b == agent_id)
            assert len(grants) == len(set(grants)) <= len(asked)
        still = {a["approval_id"] for a in c.get("/v1/approvals").json()}
        assert not still & set(won)


def test_a_person_s_write_waits_out_a_lease_held_for_a_moment(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What lets many people write to one agent at once: a write that finds the
    agent's lease held tries again until it is free, and only past its patience is it
    refused, having written nothing."""
    agent_id = made(served, "waiter.yaml")
    assert run_until(served, agent_id, {"waiting"}) == "waiting"
    rt = served.runtime("acme")
    answers: list[Any] = []

    def send(text: str) -> None:
        answers.append(served.call("POST", f"/v1/agents/{agent_id}/messages", "acme",
                                   "operator", json={"text": text}))  # fmt: skip

    with rt.hold(agent_id):
        sender = threading.Thread(target=send, args=("after the moment",))
        sender.start()
        time.sleep(0.5)  # the send meets the held lease, more than once
        assert sender.is_alive() and answers == []
    sender.join(timeout=10)
    assert answers[0].status_code == 200, answers[0].text

    monkeypatch.setattr(api, "PATIENCE_SECONDS", 0.2)
    with rt.hold(agent_id):
        send("while a step runs on")
    refused = answers[1]
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "lease_held"
    texts = [e.data["text"] for e in rt.store.read_events(agent_id, 1, 10_000)
             if e.kind == "input_received"]  # fmt: skip
    assert texts == ["after the moment"]
