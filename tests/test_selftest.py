"""``stead selftest isolation`` passes here, and fails with evidence when isolation breaks."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from stead.cli.main import main
from stead.sandbox.bwrap import BwrapSandbox
from stead.selftest import isolation_selftest
from stead.store.sqlite import SqliteStore


class SharedTmpSandbox(BwrapSandbox):
    """A broken sandbox: every run shares one host folder as its /tmp."""

    def __init__(self, binary: str, shared: Path) -> None:
        super().__init__(binary)
        self.shared = shared

    def command(
        self,
        argv: Sequence[str],
        workspace: Path,
        env: Mapping[str, str],
        network: bool,
        **kw: Any,
    ) -> list[str]:
        args = super().command(argv, workspace, env, network, **kw)
        i = args.index("--tmpfs")
        assert args[i + 1] == "/tmp" and args[i - 2] == "--size"
        return [*args[: i - 2], "--bind", str(self.shared), "/tmp", *args[i + 2 :]]


def test_the_selftest_passes_on_this_machine(
    bwrap: BwrapSandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["selftest", "isolation", "--json", "--store", f"sqlite:///{tmp_path / 's.db'}"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["passed"] is True, [c for c in report["checks"] if not c["ok"]]
    assert len(report["checks"]) >= 10
    # the MCP server B's agent ran in its sandbox could not read the store or A's files
    mcp = [c for c in report["checks"] if c["check"].startswith("B's MCP server cannot read")]
    assert len(mcp) >= 3 and all(c["ok"] for c in mcp), mcp
    # and over HTTP: B's token finds nothing of A at the API or the page
    http = [c for c in report["checks"] if "API" in c["check"]]
    assert len(http) == 6 and all(c["ok"] for c in http), http


def test_a_shared_tmp_makes_it_fail_with_evidence(bwrap: BwrapSandbox, tmp_path: Path) -> None:
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    store = SqliteStore(tmp_path / "s.db")
    report = isolation_selftest(
        store, tmp_path / "data", sandbox=SharedTmpSandbox(bwrap.binary, shared)
    )
    store.close()
    assert not report.passed
    failed = {name: evidence for name, ok, evidence in report.checks if not ok}
    assert "no canary in B's sandbox (listing, reading, environment, processes)" in failed
    assert (
        "stead-canary-"
        in failed["no canary in B's sandbox (listing, reading, environment, processes)"]
    )
