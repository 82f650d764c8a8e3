"""The crash-to-rollback tutorial, followed as a reader would.

The reader kills the worker with ``kill -9`` while ``send_invoice`` waits on its slow
service, resumes, then quarantines the wrong exchange rate and rolls back what it
reached. The model is our fake OpenAI-compatible server; it invoices at whatever
rate the tool returned, so the second agent's invoice shows the corrected one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.models.fake_servers import FakeServer, Reply, openai_answer, openai_call

from .tutorial import LOCAL_MODEL, TUTORIALS, Reader, tool_results


def rate_seen(body: dict[str, Any]) -> str:
    """The rate line the exchange_rate call returned, as the model was shown it."""
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            found = re.search(r"1 EUR = ([0-9.]+) USD", str(message.get("content")))
            if found:
                return found[1]
    raise AssertionError("the rate never reached the model")


def answer(body: Any) -> Reply:
    n = tool_results(body)
    if n == 0:
        call = openai_call("c1", "exchange_rate", {"currency": "USD"})
    else:
        rate = rate_seen(body)
        amount = f"{100 * float(rate):.2f} USD"
        line = f"1 EUR = {rate} USD"
        if n == 1:
            text = f"# Invoice for ACME\n\n100.00 EUR at {line}: {amount}\n"
            call = openai_call("c2", "write_file", {"path": "invoice-acme.md", "content": text})
        elif n == 2:
            args = {"customer": "acme", "path": "invoice-acme.md", "amount": amount, "rate": line}
            call = openai_call("c3", "send_invoice", args)
        else:
            call = openai_call("c4", "finish", {"summary": f"invoice sent to ACME at {amount}"})
    return Reply(body=openai_answer([call]))


def test_crash_to_rollback(reader: Reader, tmp_path: Path) -> None:
    with FakeServer() as model:
        model.responder = answer
        reader.replace[LOCAL_MODEL] = model.url
        reader.follow(TUTORIALS / "crash-to-rollback.md")
    folder = tmp_path / "invoicing"
    log = [json.loads(line) for line in (folder / "sent.jsonl").read_text().splitlines()]
    first = [e for e in log if e["key"].startswith("acme/")]
    # sent once, though the worker died during the call; then voided by the rollback
    assert [("sent" in e, "void" in e) for e in first] == [(True, False), (False, True)]
    assert first[0]["amount"] == "180.00 USD"
    (second,) = [e for e in log if e["key"].startswith("acme-2/")]
    assert second["amount"] == "108.00 USD"

    trace = [json.loads(x) for x in reader.run("stead --json trace acme").output.splitlines()]
    intents = [e["data"]["call_id"] for e in trace if e["kind"] == "tool_intent"]
    assert len(intents) == len(set(intents)) == 2  # write_file and send_invoice, once each
    assert any(e["kind"] == "reconciled" for e in trace)
    results = [e["data"]["tool"] for e in trace if e["kind"] == "tool_result"]
    assert sorted(results) == ["exchange_rate", "send_invoice", "write_file"]
    kinds = [e["kind"] for e in trace]
    assert kinds.index("compensated") < kinds.index("rolled_back")

    shown = json.loads(reader.run("stead --json show acme").output)
    assert sorted(shown["manifest"]) == ["orders.md"]  # the invoice written from the bad rate
