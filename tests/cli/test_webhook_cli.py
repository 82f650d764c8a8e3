"""``stead webhook``: add (the secret once), ls, deliveries, rm; ``stead work`` delivers
an approval waiting and then the agent's completion to a receiver of our own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stead.cli.main import main

from ..notify.receiver import receiver, verify
from .test_cli import run_json, store, write_agent  # noqa: F401 - the store fixture

WRITE = {"tool": "write_file", "args": {"path": "out.txt", "content": "hello"}}


def test_webhooks_from_the_command_line(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("STEAD_SECRET_KEY", raising=False)
    monkeypatch.delenv("STEAD_WEBHOOK_ALLOW", raising=False)
    with receiver([]) as box:
        assert main(["webhook", "add", box.url, "--store", store]) == 2
        assert "would be refused" in capsys.readouterr().err
        monkeypatch.setenv("STEAD_WEBHOOK_ALLOW", "127.0.0.1")
        assert main(["webhook", "add", box.url, "--events", "nope", "--store", store]) == 2
        assert "no webhook event 'nope'" in capsys.readouterr().err
        assert main(["webhook", "add", box.url, "--events", "approval_requested,completed",
                     "--store", store]) == 0  # fmt: skip
        shown = capsys.readouterr()
        secret = shown.out.split("never again): ", 1)[1].split()[0]
        assert secret.startswith("whsec_") and "stored unencrypted" in shown.err
        code, listed = run_json(capsys, "webhook", "ls", "--store", store)
        assert code == 0 and secret not in json.dumps(listed)
        (hook,) = listed
        assert hook["events"] == ["approval_requested", "completed"] and hook["last"] is None

        spec = write_agent(tmp_path, [WRITE, {"finish": "done"}], autonomy="act_with_approval")
        assert main(["run", str(spec), "--id", "ag_w", "--store", store]) == 3
        assert main(["work", "--store", store]) == 0
        assert [json.loads(r.body)["type"] for r in box.got] == ["approval.requested"]
        capsys.readouterr()
        code, pending = run_json(capsys, "approvals", "--store", store)
        assert main(["approve", pending[0]["approval_id"], "--store", store]) == 0
        assert main(["work", "--store", store]) == 0
        assert [json.loads(r.body)["type"] for r in box.got] == [
            "approval.requested", "agent.completed"]  # fmt: skip
        assert all(verify(secret, r.headers, r.body) for r in box.got)
    capsys.readouterr()
    code, history = run_json(capsys, "webhook", "deliveries", hook["hook_id"], "--store", store)
    assert code == 0
    assert [d["state"] for d in history["deliveries"]] == ["delivered", "delivered"]
    assert main(["webhook", "ls", "--store", store]) == 0
    assert "last: delivered 200 after 1 tries" in capsys.readouterr().out
    assert main(["webhook", "ls", "--store", store, "--tenant", "other"]) == 0
    assert "no webhooks for tenant other" in capsys.readouterr().out
    assert main(["webhook", "rm", hook["hook_id"], "--store", store, "--tenant", "other"]) == 2
    assert main(["webhook", "rm", hook["hook_id"], "--store", store]) == 0
    assert main(["webhook", "rm", hook["hook_id"], "--store", store]) == 2
    assert "no webhook" in capsys.readouterr().err
