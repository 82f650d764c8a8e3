"""A ``stead upgrade --canary`` killed (SIGKILL) during its watch is run again as it was:
the canary already on the new spec is skipped, not upgraded twice; the watch ends
where it would have (after the canary's upgrade, not after the second start); then
the rest follow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import Kind, Runtime, parse_spec
from stead.store.sqlite import SqliteStore
from stead.testing import scripted

REPO = Path(__file__).resolve().parents[2]
WAIT = [{"wait_for_input": "more?"}] * 4
WATCH = 3.0


def spec(instructions: str) -> dict[str, Any]:
    return {"name": "helper", "model": "scripted:script.yaml", "instructions": instructions,
            "tools": ["read_file"]}  # fmt: skip


def upgrades(db: Path, agent_id: str) -> list[Any]:
    store = SqliteStore(db, create=False)
    try:
        return store.read_events_of_kinds(agent_id, [Kind.SPEC_UPGRADED])
    finally:
        store.close()


@pytest.mark.chaos
def test_a_canary_killed_in_its_watch_is_run_again_and_finishes(tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(WAIT), encoding="utf-8")
    (tmp_path / "v2.yaml").write_text(yaml.safe_dump(spec("v2")), encoding="utf-8")
    db, data = tmp_path / "stead.db", tmp_path / "data"
    rt = Runtime(SqliteStore(db), data)
    ids = sorted(rt.create(parse_spec(spec("v1"), tmp_path)).agent_id for _ in range(3))
    for agent_id in ids:
        rt.run(agent_id, model=scripted(WAIT))
    rt.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
    argv = [sys.executable, "-m", "stead", "upgrade", "--spec", "helper", "--new",
            str(tmp_path / "v2.yaml"), "--canary", "1", "--watch", f"{WATCH}s", "--store",
            f"sqlite:///{db}", "--data-dir", str(data), "--json"]  # fmt: skip
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not upgrades(db, ids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)  # watching its canary
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL
    (canary,) = upgrades(db, ids[0])
    assert [upgrades(db, a) for a in ids[1:]] == [[], []]
    second = subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False)
    assert second.returncode == 0, second.stderr.decode()
    report = json.loads(second.stdout)
    assert report["outcome"] == "applied" and report["skipped"] == ids[:1]
    assert report["rest"] == ids[1:]
    assert upgrades(db, ids[0]) == [canary]  # not upgraded twice
    for agent_id in ids[1:]:
        (done,) = upgrades(db, agent_id)
        assert done.data["to"] == canary.data["to"]
        assert done.at >= canary.at + WATCH  # the watch ran its whole length from the canary
