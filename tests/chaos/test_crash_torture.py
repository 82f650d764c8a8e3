"""Kill a real worker with SIGKILL again and again; nothing may be lost or done twice.

After every kill the agent's scope is checked: its ledger matches its journal and
the calls it may make (over a fixed grid) are what they were, except for the one
grant a person makes half-way through.

A scripted agent works through a few hundred decisions that call the ledger
tools (whose effects land in a file outside the workspace, which no restore can
undo) and ``write_file``. A worker process runs it and is SIGKILLed at a random
moment; a new worker resumes it at once. When a kill lands inside an effectful
call without a reconcile hook, the agent stops with that call's outcome
unknown, and the test plays the person who looks at the ledger and answers
``done`` or ``retry``. Once enough kills have landed mid-work, the agent runs to
the end and the journal, the ledger and the workspace are checked against each
other.

Most kills wait until the worker is visibly inside its activation and come a
random moment after; each counts as landed mid-work only if the store shows
that it cut the activation short (see :mod:`tests.chaos.midwork`), so a busy
machine gets slower kills, not kills that land before anything started. The
others come a random moment after the worker starts, wherever it is then (on a
busy machine: still starting, or creating the agent).

The kill delays come from a seeded generator; the seed is printed, and
``STEAD_CHAOS_SEED`` replays the same sequence of delays (timing on a busy
machine still varies, which is the point of the test).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from stead.errors import NotFound
from stead.governance.gate import judge
from stead.governance.ledger import LEDGER_KINDS, verify_ledger
from stead.models.base import parse_decision
from stead.state import State
from stead.store.sqlite import SqliteStore

from .cli_helpers import EXIT_COMPLETED, EXIT_STOPPED, Cli, files_on_disk, go, write_spec
from .ledger_tools import PAUSE_ENV
from .midwork import Cut, Watch, kill_measured, wait_busy

pytestmark = pytest.mark.chaos

KILLS_WANTED = 50  # kills that cut an activation short
EARLY_KILLS = 0.2  # the share of kills that come at a time after start, wherever it is
EARLY_DELAY = (0.0, 1.0)  # seconds after a worker starts, for those
KILL_WITHIN = (0.0, 0.4)  # seconds after a worker is seen inside its activation
TOOL_PAUSE = "0.04"  # seconds each ledger tool sleeps before and after its write
DECISIONS = 360  # tool decisions per agent, plus a final finish
LOOP_BUDGET = 420.0  # seconds; the loop fails saying what it measured rather than hang


def torture_script(tag: str, n: int = DECISIONS) -> list[Any]:
    """``n`` decisions cycling through the ledger tools and the workspace, then finish.

    ``write_file`` (the builtin) and ``write_slowly`` (which can be killed half-way
    through a file) change the workspace; every sixth decision does several calls
    in one step, so a kill can also land between the calls of a step (where a
    result is committed together with the next intent).
    """
    script: list[Any] = []
    for i in range(n):
        content = f"{tag} decision {i}: {'x' * (i % 13)}\n"
        path = f"notes/{i % 7}.txt" if i % 3 else f"log/{i}.txt"
        match i % 6:
            case 0:
                script.append({"tool": "append_plain", "args": {"n": i}})
            case 1:
                script.append({"tool": "append_reconciled", "args": {"n": i}})
            case 2:
                script.append({"tool": "append_idempotent", "args": {"n": i}})
            case 3:
                script.append({"tool": "write_file", "args": {"path": path, "content": content}})
            case 4:
                script.append(
                    {"tool": "write_slowly", "args": {"path": path, "content": content * 40}}
                )
            case _:
                script.append(
                    {
                        "tools": [
                            {"tool": "append_idempotent", "args": {"n": i}},
                            {"tool": "write_file", "args": {"path": path, "content": content}},
                            {"tool": "append_plain", "args": {"n": i}},
                            {"tool": "append_reconciled", "args": {"n": i}},
                        ]
                    }
                )
    script.append({"finish": f"{tag}: all {n} decisions done"})
    return script


WORKSPACE_TOOLS = ("write_file", "write_slowly")
GRID = [
    (tool, args)
    for tool in ("append_plain", "append_idempotent", "write_file", "shell", "deploy")
    for args in ({"n": 1}, {"command": "ls -l"}, {"command": "rm -rf /"}, {"path": "a"})
]
GRANT_AT_KILL = KILLS_WANTED // 2


def allowed(state: State) -> frozenset[str]:
    """Which calls of a fixed grid the gate would let run now, from a stored state."""
    return frozenset(
        f"{tool}{sorted(args.items())}"
        for tool, args in GRID
        if judge(
            state, call_id="grid", tool=tool, effect="idempotent", args=args,
            now=state.version, policy=None,
        ).decision
        == "allow"
    )  # fmt: skip


def expected_files(script: list[Any]) -> dict[str, str]:
    """What the workspace tools left in the workspace: each path's last content."""
    files: dict[str, str] = {}
    for item in script:
        for action in parse_decision(item, "script").to_json():
            if action.get("tool") in WORKSPACE_TOOLS:
                files[action["args"]["path"]] = action["args"]["content"]
    return files


class Torture:
    """Runs agents under repeated SIGKILLs and keeps count of what happened."""

    def __init__(self, cli: Cli, seed: int) -> None:
        self.cli = cli
        self.seed = seed
        self.rng = random.Random(seed)
        self.reader = SqliteStore(cli.db)
        self.watch = Watch.sqlite(cli.db)
        self.deadline = time.monotonic() + LOOP_BUDGET
        self.kills = 0  # every SIGKILL that found the worker alive
        self.landed = 0  # the kills that cut its activation short
        self.cuts: list[Cut] = []
        # a worker that will resume the agent, its imports done ahead (on a loaded
        # machine they take seconds, which every kill would wait out)
        self.spare: subprocess.Popen[bytes] | None = None
        self.spare_args: tuple[str, ...] = ()
        self.kills_with_intent = Counter[str]()  # by the tool whose intent was pending
        self.kills_mid_step = 0
        self.kills_before_agent_existed = 0
        self.starts = Counter[str]()
        self.exits = Counter[int]()
        self.resolutions: dict[str, list[str]] = defaultdict(list)
        self.decisions_at_last_kill = 0
        self.allowed: dict[str, frozenset[str]] = {}
        self.granted = False

    def close(self) -> None:
        self.reader.close()
        self.watch.close()
        self.drop_spare()

    def drop_spare(self) -> None:
        if self.spare is not None:
            self.spare.kill()
            self.spare.communicate(timeout=30)
            self.spare = None

    def where(self) -> str:
        return f"(seed {self.seed}, after {self.kills} kills, {self.landed} of them mid-work)"

    def state_or_none(self, agent_id: str) -> Any:
        try:
            return self.reader.load_state(agent_id)
        except NotFound:
            return None

    def drive(self, agent_id: str, spec: Path) -> None:
        """Start, kill and restart workers until the agent completes."""
        while True:
            assert time.monotonic() < self.deadline, f"the torture loop ran too long {self.where()}"
            if self.state_or_none(agent_id) is None:
                args: tuple[str, ...] = ("run", str(spec), "--id", agent_id, "--json")
            else:
                args = ("resume", agent_id, "--json")
            self.starts[args[0]] += 1
            if self.spare is not None and args == self.spare_args:
                proc, self.spare = go(self.spare), None
            else:
                proc = self.cli.popen(*args)
            if args[0] == "resume":  # the next one's imports, done while this one runs
                self.drop_spare()
                self.spare, self.spare_args = self.cli.standby(*args), args
            cut: list[Cut] = []
            if self.landed < KILLS_WANTED:
                if self.rng.random() < EARLY_KILLS:
                    end = time.monotonic() + self.rng.uniform(*EARLY_DELAY)
                    while proc.poll() is None and time.monotonic() < end:
                        time.sleep(0.005)
                else:  # once it is inside its activation, wherever it is a moment later
                    wait_busy(proc, self.watch)
                    end = time.monotonic() + self.rng.uniform(*KILL_WITHIN)
                    while proc.poll() is None and time.monotonic() < end:
                        time.sleep(0.005)
                if proc.poll() is None:
                    cut = kill_measured(proc, self.watch)
            out, err = proc.communicate(timeout=120)
            code = proc.returncode
            self.exits[code] += 1
            if code == -signal.SIGKILL:  # it was alive when the signal came
                self.kills += 1
                self.landed += bool(cut)
                self.cuts += cut
                self.note_kill(agent_id)
                continue
            if code == EXIT_COMPLETED:
                report = json.loads(out)
                assert report["status"] == "completed", report
                return
            assert code == EXIT_STOPPED, (
                f"`stead {args[0]}` exited {code} {self.where()}:\n{err.decode()}"
            )
            self.resolve_unknown(agent_id, json.loads(out))

    def check_scope(self, agent_id: str, state: State) -> None:
        """A kill never changes what the agent may do, and never damages its ledger."""
        verify_ledger(state, self.reader.read_events_of_kinds(agent_id, LEDGER_KINDS))
        now = allowed(state)
        before = self.allowed.setdefault(agent_id, now)
        assert now == before, f"a kill changed the allowed calls {self.where()}"
        if self.landed >= GRANT_AT_KILL and not self.granted:
            # the one way the allowed set may change: a journaled grant
            proc = self.cli.run("grant", agent_id, "shell", "--arg", "command=glob:ls *")
            assert proc.returncode == 0, proc.stderr
            self.granted = True
            after = allowed(self.reader.load_state(agent_id))
            assert after - before == {f"shell{[('command', 'ls -l')]}"}, after - before
            self.allowed[agent_id] = after

    def note_kill(self, agent_id: str) -> None:
        state = self.state_or_none(agent_id)
        if state is None:
            self.kills_before_agent_existed += 1
            return
        self.check_scope(agent_id, state)
        self.decisions_at_last_kill = state.decisions
        if state.inflight is not None:
            self.kills_mid_step += 1
        for call in state.pending.values():
            self.kills_with_intent[call["tool"]] += 1

    def resolve_unknown(self, agent_id: str, report: dict[str, Any]) -> None:
        """Play the person: look at the ledger, then answer each unknown call."""
        state = self.cli.show(agent_id)
        assert state["status"] == "needs_attention", (report, self.where())
        assert state["unknown"], f"stopped without unknown calls {self.where()}: {report}"
        assert sorted(state["unknown"]) == report["unknown_calls"]
        ledger = set(self.cli.ledger_lines())
        for call_id, call in sorted(state["unknown"].items()):
            assert call["tool"] == "append_plain", (
                f"only the tool without a reconcile hook may end outcome-unknown, got {call}"
            )
            answer = "done" if f"A {call_id}" in ledger else "retry"
            proc = self.cli.run("resolve", agent_id, call_id, "--as", answer, "--no-resume")
            assert proc.returncode == EXIT_STOPPED, proc.stderr  # recorded; not resumed
            assert f"resolved as {answer}" in proc.stderr
            self.resolutions[call_id].append(answer)


def check_agent(
    cli: Cli, torture: Torture, agent_id: str, script: list[Any], ledger: Counter[str]
) -> dict[str, int]:
    """Check one finished agent's journal against the ledger and its workspace."""
    where = f"agent {agent_id} {torture.where()}"
    events = cli.trace(agent_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), where

    # every decision of the script was made once, in order, and its step completed once
    decisions = [e["data"] for e in events if e["kind"] == "decision"]
    assert len(decisions) == len(script), where
    calls: dict[str, str] = {}
    for step, (made, item) in enumerate(zip(decisions, script, strict=True), start=1):
        assert made["step"] == step, where
        expected = parse_decision(item, f"script decision {step}").to_json()
        assert [{k: v for k, v in a.items() if k != "call_id"} for a in made["actions"]] == (
            expected
        ), where
        for action in made["actions"]:
            if action["type"] == "tool":
                assert action["call_id"] not in calls, f"call id used twice: {where}"
                calls[action["call_id"]] = action["tool"]
    completed_steps = [e["data"]["step"] for e in events if e["kind"] == "step_completed"]
    assert completed_steps == list(range(1, len(script) + 1)), where

    intents, unknowns = Counter[str](), Counter[str]()
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    resolved: dict[str, list[str]] = defaultdict(list)
    for e in events:
        d = e["data"]
        if e["kind"] == "tool_intent":
            intents[d["call_id"]] += 1
        elif e["kind"] == "tool_result":
            results[d["call_id"]].append(d)
        elif e["kind"] == "outcome_unknown":
            unknowns[d["call_id"]] += 1
        elif e["kind"] == "call_resolved":
            resolved[d["call_id"]].append(d["resolution"])
    assert set(intents) | set(results) | set(unknowns) <= set(calls), where
    doubled = {c: len(r) for c, r in results.items() if len(r) > 1}
    assert not doubled, f"calls with two tool_result events: {doubled} {where}"

    tally = Counter[str]()
    for call_id, tool in calls.items():
        res = results[call_id]
        what = f"{tool} {call_id} of {where}: intents {intents[call_id]}, results {res}, " + (
            f"unknown {unknowns[call_id]}, resolved {resolved[call_id]}"
        )
        if tool == "append_plain":
            lines = ledger[f"A {call_id}"]
            answers = resolved[call_id]
            assert lines <= 1, f"an effect without reconcile ran twice: {what}"
            assert answers == torture.resolutions.get(call_id, []), what
            assert len(answers) == unknowns[call_id], what
            assert "done" not in answers[:-1] and "abort" not in answers, what
            if res:  # it completed by running, after any number of retries
                assert res[0]["ok"] and not res[0].get("reconciled"), what
                assert "done" not in answers, what
                assert lines == 1, f"completed by running but left no line: {what}"
                assert intents[call_id] == 1 + len(answers), what
                tally["plain_ran"] += 1
            else:  # a person saw its line and said it was done
                assert answers and answers[-1] == "done", what
                assert lines == 1, what
                assert intents[call_id] == len(answers), what
                tally["plain_resolved_done"] += 1
            tally["plain_retried"] += answers.count("retry")
        elif tool == "append_reconciled":
            assert len(res) == 1 and res[0]["ok"], what
            assert ledger[f"R {call_id}"] == 1, f"reconciled effect not exactly once: {what}"
            assert unknowns[call_id] == 0 and intents[call_id] == 1, what
            tally["reconciled_done"] += bool(res[0].get("reconciled"))
            tally["reconciled_rerun"] += bool(res[0].get("rerun"))
        elif tool == "append_idempotent":
            assert len(res) == 1 and res[0]["ok"], what
            assert ledger[f"I {agent_id}/{call_id}"] == 1, f"idempotent effect repeated: {what}"
            assert unknowns[call_id] == 0 and intents[call_id] == 1, what
            tally["idempotent_rerun"] += bool(res[0].get("rerun"))
        else:
            assert tool in WORKSPACE_TOOLS, what
            assert len(res) == 1 and res[0]["ok"], what
            assert unknowns[call_id] == 0 and intents[call_id] == 1, what
            tally[f"{tool}_rerun"] += bool(res[0].get("rerun"))

    # the final state, and the workspace on disk equals its last committed manifest
    state = cli.show(agent_id)
    assert state["status"] == "completed", where
    assert state["pending"] == {} and state["unknown"] == {} and state["inflight"] is None, where
    assert state["decisions"] == len(script) == state["steps_completed"], where
    on_disk = files_on_disk(cli.workspace(agent_id))
    assert on_disk == state["manifest"], f"workspace differs from its manifest: {where}"
    wanted = {
        path: hashlib.sha256(content.encode()).hexdigest()
        for path, content in expected_files(script).items()
    }
    assert on_disk == wanted, f"workspace is not what write_file wrote: {where}"

    audit = cli.run("audit", "verify", agent_id, "--json")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    verified = json.loads(audit.stdout)
    assert verified["events"] == len(events) == state["version"], where
    assert verified["head_hash"] == state["head_hash"] == events[-1]["hash"], where

    tally["restores"] = sum(e["kind"] == "workspace_restored" for e in events)
    tally["activations"] = sum(e["kind"] == "activation_started" for e in events)
    return dict(tally)


def test_sigkill_torture(tmp_path: Path) -> None:
    seed = int(os.environ.get("STEAD_CHAOS_SEED", random.SystemRandom().randrange(2**32)))
    print(f"chaos seed {seed} (set STEAD_CHAOS_SEED={seed} to replay its kill delays)")
    cli = Cli(tmp_path, **{PAUSE_ENV: TOOL_PAUSE})
    torture = Torture(cli, seed)
    started = time.monotonic()
    agents: list[tuple[str, list[Any]]] = []
    try:
        # one agent is normally enough; if it finishes before enough kills have
        # landed mid-work, the next one takes the remaining kills
        while not agents or torture.landed < KILLS_WANTED:
            agent_id = f"ag_torture_{len(agents)}"
            script = torture_script(agent_id, DECISIONS)
            spec = write_spec(
                tmp_path / agent_id, script, name=agent_id, limits={"max_steps": len(script) + 5}
            )
            torture.drive(agent_id, spec)
            agents.append((agent_id, script))
    finally:
        torture.close()
    loop_seconds = time.monotonic() - started
    assert torture.granted, "the grant half-way through the kills was never made"

    ledger = Counter(cli.ledger_lines())
    tallies = [check_agent(cli, torture, agent_id, script, ledger) for agent_id, script in agents]
    # no line in the ledger is unaccounted for, and none is doubled
    assert all(n == 1 for n in ledger.values()), [line for line, n in ledger.items() if n > 1]
    expected_lines = sum(
        1 for _, script in agents for item in script for a in parse_decision(item, "s").actions
        if a["type"] == "tool" and a["tool"] not in WORKSPACE_TOOLS
    )  # fmt: skip
    assert sum(ledger.values()) == expected_lines

    assert torture.landed >= KILLS_WANTED, torture.where()
    # each activation a kill cut short was taken up again by a later one
    activations = {
        agent_id: [e for e in cli.trace(agent_id) if e["kind"] == "activation_started"]
        for agent_id, _ in agents
    }
    for cut in torture.cuts:
        started = activations[cut.agent_id]
        assert any(e["epoch"] == cut.epoch for e in started), cut
        assert any(e["epoch"] > cut.epoch for e in started), f"{cut} was not taken up again"
    assert torture.exits[4] == 0, "a worker found the lease of a killed worker still held"
    print(
        f"{torture.kills} kills in {loop_seconds:.1f}s over {len(agents)} agent(s), "
        f"{torture.landed} of them mid-work (the newest event then: "
        f"{dict(Counter(c.head for c in torture.cuts))}); "
        f"{torture.kills_mid_step} mid-step, with an intent pending: "
        f"{sum(torture.kills_with_intent.values())} {dict(torture.kills_with_intent)}; "
        f"before the agent existed: {torture.kills_before_agent_existed}; the last kill "
        f"came at decision {torture.decisions_at_last_kill} of {DECISIONS + 1}"
    )
    print(f"starts {dict(torture.starts)}, exits {dict(torture.exits)}")
    print(f"resolutions {Counter(a for r in torture.resolutions.values() for a in r)}")
    for (agent_id, _), tally in zip(agents, tallies, strict=True):
        print(f"{agent_id}: {tally}")
