"""A delegation of counted uses takes them from the parent grant.

However many times a grant of N uses is delegated, to however many agents, and
however the holder uses it itself, no more than N calls run under it in all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind

from .agents import RUNS, make_agent, run, runtime_at

QA1 = {"tool": "deploy", "args": {"target": "qa-1"}}


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def delegate(to: str, uses: int) -> dict[str, Any]:
    return {
        "delegate": {
            "to": to,
            "grant": "deploy",
            "args": {"target": {"glob": "qa-1"}},
            "max_uses": uses,
        }
    }


@pytest.mark.parametrize("limit", [1, 2])
def test_delegations_never_allow_more_uses_than_the_grant_had(tmp_path: Path, limit: int) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    kids = []
    for name in ("c1", "c2"):
        folder = tmp_path / name
        folder.mkdir()
        script = [QA1, QA1, QA1, {"finish": "done"}]
        kids.append(make_agent(rt, folder, script, name=name, scope=[{"tool": "probe"}]))
    folder = tmp_path / "parent"
    folder.mkdir()
    scope = [
        {
            "tool": "deploy",
            "args": {"target": {"glob": "qa-*"}},
            "max_uses": limit,
            "delegable": True,
        }
    ]
    parent = make_agent(
        rt,
        folder,
        [delegate(kids[0], 1), delegate(kids[0], 1), delegate(kids[1], 1), QA1, {"finish": "x"}],
        name="parent",
        scope=scope,
    )
    run(rt, parent)
    for kid in kids:
        run(rt, kid)
    assert len(RUNS) == limit  # in all: the parent's own call and every child's
    (grant,) = rt.store.load_state(parent).grants.values()
    assert grant["uses"] == limit
    sent = [e for e in rt.store.read_events(parent) if e.kind == Kind.DELEGATED]
    accepted = [e for e in sent if e.data["ok"]]
    assert len(accepted) == limit and all(e.data["reserved"] == 1 for e in accepted)
    refused = [e for e in sent if not e.data["ok"]]
    assert len(refused) == 3 - limit
    assert all("can no longer use" in e.data["error"] for e in refused)
    assert all(f"used all {limit} times" in e.data["error"] for e in refused)
    rt.close()


def test_scope_shows_a_delegated_grant_dead_once_its_source_is_revoked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from stead.cli.main import main

    rt = runtime_at(tmp_path, FakeClock())
    (tmp_path / "c").mkdir()
    child = make_agent(rt, tmp_path / "c", [{"finish": "d"}], name="c", scope=[{"tool": "probe"}])
    (tmp_path / "p").mkdir()
    scope = [{"tool": "deploy", "max_uses": 3, "delegable": True}]
    parent = make_agent(rt, tmp_path / "p", [delegate(child, 1), {"wait_for_input": "?"}],
                        name="p", scope=scope)  # fmt: skip
    run(rt, parent)
    (source,) = rt.store.load_state(parent).grants
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]

    def delegated() -> dict[str, Any]:
        capsys.readouterr()
        assert main(["scope", child, "--json", *store]) == 0
        (grant,) = [g for g in json.loads(capsys.readouterr().out)["grants"] if g["delegated_from"]]
        return dict(grant)

    assert delegated()["inactive"] is None
    rt.revoke(parent, source, reason="incident")
    assert "was revoked" in delegated()["inactive"]
    rt.close()
