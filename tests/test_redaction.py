"""Secrets in other shapes: encoded, cut, re-cased, or written by the model itself.

Nothing the journal keeps (and so nothing the state, the CLI, a certificate or an
archive shows) holds a secret's value in any shape :mod:`stead.redaction`
derives: exact, reversed, JSON-escaped, URL-encoded, hex, base64 (standard or
URL-safe, padded or not, at any alignment), in any case, or a long enough run of
one of those.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from stead import Runtime, parse_spec
from stead.cli.main import main
from stead.integrity.certificates import journaled_certificate, verify_certificate
from stead.models.scripted import ScriptedModel
from stead.redaction import SHORT, Redactor, fragment_length, shapes
from stead.runtime.context import render
from stead.sandbox.secrets import redact
from stead.snapshots.archive import read_archive
from stead.store.sqlite import SqliteStore
from tests.sandbox.test_secrets import KEY, MOD, SECRET, acme_spec

HIDDEN = "[secret:TOKEN]"


def every_shape(secret: str) -> list[str]:
    """The shapes a person would try, written out independently of the redactor."""
    raw = secret.encode()
    found = [secret, secret.upper(), secret.lower(), secret[::-1], raw.hex(), raw.hex().upper()]
    found += [quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1]]
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        found += [encode(raw).decode(), encode(raw).decode().rstrip("=")]
    return found


def test_every_common_shape_of_a_secret_is_redacted() -> None:
    r = Redactor({"TOKEN": SECRET})
    for shape in every_shape(SECRET):
        assert r.text(f"before {shape} after") == f"before {HIDDEN} after", shape
    # inside a longer base64 stream, at each of the three byte alignments
    for lead in (b"", b"a", b"ab", b"abc"):
        stream = base64.b64encode(lead + SECRET.encode() + b"tail").decode()
        hidden = r.text(stream)
        # the characters the secret's own bits decide are all gone
        start, end = -(-8 * len(lead) // 6), 8 * (len(lead) + len(SECRET)) // 6
        assert HIDDEN in hidden
        assert not any(stream[i : i + 6] in hidden for i in range(start, end - 5)), lead
    # a prefix or a truncated value, down to the fragment length
    need = fragment_length(len(SECRET))
    assert need == 8
    assert r.text(f"truncated: {SECRET[:need]}") == f"truncated: {HIDDEN}"
    assert r.text(f"tail: {SECRET[-need:]}.") == f"tail: {HIDDEN}."
    # shorter runs are ordinary text
    assert r.text(f"x {SECRET[: need - 1]} y") == f"x {SECRET[: need - 1]} y"
    assert r.text("the s3cr3t is safe; Value is 9") == "the s3cr3t is safe; Value is 9"


def test_a_secret_cut_across_the_strings_of_one_value_is_hidden_in_both() -> None:
    r = Redactor({"TOKEN": SECRET})
    assert r.value({"stdout": f"a {SECRET[:3]}", "stderr": f"{SECRET[3:]} b"}) == {
        "stdout": f"a {HIDDEN}",
        "stderr": f"{HIDDEN} b",
    }
    # in either order: the second half went to stdout, the first to stderr
    assert r.value({"stdout": f"{SECRET[5:]} b", "stderr": f"a {SECRET[:5]}"}) == {
        "stdout": f"{HIDDEN} b",
        "stderr": f"a {HIDDEN}",
    }
    # each half of a value cut in two is hidden on its own (two separate results)
    half = len(SECRET) // 2
    assert r.text(SECRET[:half]) == HIDDEN and r.text(SECRET[half:]) == HIDDEN


def test_a_short_secret_is_matched_only_whole_and_exactly() -> None:
    assert shapes("4821") == ["4821"]
    r = Redactor({"PIN": "4821"})
    assert r.text("pin 4821, not 1284 or 482") == "pin [secret:PIN], not 1284 or 482"
    assert Redactor({"W": "Hunter2"}).text("hunter2 Hunter2") == "hunter2 [secret:W]"
    assert fragment_length(SHORT) == SHORT  # a secret of SHORT characters: whole only
    assert fragment_length(100) == 24  # the cap: a long key's 24-character runs


def test_redaction_is_derived_once_and_keeps_the_runtime_s_own_fields() -> None:
    r = Redactor({"TOKEN": SECRET})
    data = {
        "call_id": "call_1",
        "status": "completed",
        "actions": [{"type": "finish", "summary": f"done {SECRET}", "call_id": "c"}],
        "verdict": {"decision": "allow", "reason": SECRET},
        "values": {SECRET: SECRET.upper(), "n": 7},
    }
    assert r.event(data) == {
        "call_id": "call_1",
        "status": "completed",
        "actions": [{"type": "finish", "summary": f"done {HIDDEN}", "call_id": "c"}],
        "verdict": {"decision": "allow", "reason": HIDDEN},
        "values": {HIDDEN: HIDDEN, "n": 7},
    }
    assert redact({"k": base64.b64encode(SECRET.encode()).decode()}, {"T": SECRET}) == {
        "k": "[secret:T]"
    }


secret_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=SHORT
)


@settings(max_examples=150, deadline=None)
@given(secret=secret_text, before=st.text(), after=st.text(), pick=st.integers(0, 100))
def test_no_shape_of_a_secret_survives_redaction(
    secret: str, before: str, after: str, pick: int
) -> None:
    r = Redactor({"TOKEN": secret})
    candidates = every_shape(secret)
    shape = candidates[pick % len(candidates)]
    hidden = r.text(before + shape + after)
    for s in candidates:
        assert s.lower() not in hidden.lower() or s.lower() in (before + after).lower()
    # and cut across two strings of one value, at any point
    cut = pick % (len(shape) + 1)
    left, right = r.value([before + shape[:cut], shape[cut:] + after])
    assert shape.lower() not in (left + right).lower() or shape.lower() in (before + after).lower()


@pytest.mark.parametrize(
    "secrets", [{"TOKEN": "TOKEN"}, {"PIN1234": "1234"}, {"KEY": "secret:KEY]"}]
)
def test_redacting_redacted_text_changes_nothing(secrets: dict[str, str]) -> None:
    """A result is redacted where it is made and again where it is journaled."""
    r = Redactor(secrets)
    (value,) = secrets.values()
    once = r.text(f"a {value} b")
    assert value not in once.replace(f"[secret:{next(iter(secrets))}]", "")
    assert r.text(once) == once


@settings(max_examples=60)
@given(secret=st.text(min_size=1, max_size=30), around=st.text(max_size=30))
def test_redaction_is_idempotent(secret: str, around: str) -> None:
    r = Redactor({"TOKEN": secret})
    once = r.text(around + secret + around)
    assert r.text(once) == once


def test_a_secret_the_model_writes_is_journaled_shown_certified_and_exported_nowhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model knows the value (it read it somewhere) and writes it into a call's
    arguments, its memory, a goal and its finish: all of it is journaled redacted,
    so the CLI, the certificate and an archive never have it either. The call runs
    with the arguments as journaled."""
    b64 = base64.b64encode(SECRET.encode()).decode()
    script: list[Any] = [
        {"tool": "write_file", "args": {"path": "note.txt", "content": f"key={SECRET}"}},
        {"remember": {"key": SECRET, "encoded": b64, SECRET[:9]: 1}},
        {"push_goal": {"id": "g1", "description": f"use {SECRET.upper()}"}},
        {"complete_goal": "g1"},
        {"finish": f"done {SECRET}"},
    ]
    # the spec keeps its script, so the model is handed over here: it stands for one
    # that learnt the value somewhere, not for anything the operator wrote down
    spec = acme_spec(tmp_path, [{"finish": "unused"}], [f"{MOD}:echo_token", "write_file"])
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=KEY)
    rt.vault().set("acme", "TOKEN", SECRET, at=1.0)
    agent_id = rt.create(spec).agent_id
    state = rt.run(agent_id, model=ScriptedModel.from_data(script)).state
    assert state.status == "completed"
    assert state.status_reason == f"done {HIDDEN}"
    assert state.memory == {"key": HIDDEN, "encoded": HIDDEN, HIDDEN: 1}
    assert state.goals[0]["description"] == f"use {HIDDEN}"
    (wrote,) = state.recent_calls
    assert wrote["args"]["content"] == f"key={HIDDEN}"
    assert (rt.workspace(agent_id, "acme").root / "note.txt").read_text() == f"key={HIDDEN}"
    record = rt.store.get_record(agent_id)
    context = render(state, record.spec, rt.tools_for(record)).text
    journal = json.dumps([e.to_json() for e in rt.store.read_events(agent_id)])
    archive = tmp_path / "a.stead"
    rt.export(agent_id, archive)
    rt.close()
    got = read_archive(archive)
    exported = json.dumps([e.to_json() for e in got.events]) + json.dumps(got.state.to_json())
    exported += b"".join(got.blobs.values()).decode("latin-1")

    monkeypatch.setenv("STEAD_SECRET_KEY", base64.b64encode(KEY).decode())
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]
    shown = ""
    for argv in (["show", agent_id], ["show", agent_id, "--json"], ["trace", agent_id, "--json"]):
        assert main([*argv, *store]) == 0, argv
        shown += capsys.readouterr().out
    assert f"status: completed — done {HIDDEN}" in shown
    assert main(["certificate", agent_id, *store]) == 0
    certificate = capsys.readouterr().out
    assert f"done {HIDDEN}" in certificate
    (tmp_path / "cert.json").write_text(certificate)
    assert main(["verify-certificate", str(tmp_path / "cert.json"), *store]) == 0
    capsys.readouterr()

    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*")).decode("latin-1")
    places = {"context": context, "journal": journal, "cli": shown, "certificate": certificate}
    places |= {"archive": exported, "database": raw}
    for where, text in places.items():
        for shape in every_shape(SECRET):
            assert shape not in text, (where, shape)


def test_a_check_s_output_with_a_secret_is_certified_redacted(
    bwrap: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An acceptance check that prints a secret a tool left in the workspace: its
    evidence is journaled, and certified, redacted; so is a command that cuts the
    secret across stdout and stderr and one that prints it in base64."""
    script = [
        {"tool": "save_token"},
        {"tool": "shell", "args": {"command": "cut -c7-12 token.txt; cut -c13- token.txt >&2"}},
        {"tool": "shell", "args": {"command": "base64 token.txt; rev token.txt"}},
        {"complete_goal": "g1"},
        {"finish": "done"},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    spec = parse_spec(
        {
            "name": "s",
            "tenant": "acme",
            "model": "scripted:script.yaml",
            "tools": [f"{MOD}:save_token", "shell"],
            "goals": [{"id": "g1", "accept": [{"command": "cat token.txt"}]}],
        },
        tmp_path,
    )
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=KEY)
    rt.vault().set("acme", "TOKEN", SECRET, at=1.0)
    agent_id = rt.create(spec).agent_id
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    _, cut, encoded = state.recent_calls
    assert cut["output"]["stdout"].strip() == HIDDEN and cut["output"]["stderr"].strip() == HIDDEN
    assert SECRET[::-1] not in encoded["output"]["stdout"]
    certificate = journaled_certificate(rt.store, agent_id)
    (evidence,) = certificate["goals"][0]["evidence"]
    assert evidence["detail"] == f"exit 0: token={HIDDEN}"
    assert verify_certificate(rt.store, certificate) == []
    journal = json.dumps([e.to_json() for e in rt.store.read_events(agent_id)])
    rt.close()
    for shape in every_shape(SECRET):
        assert shape not in journal and shape not in json.dumps(certificate), shape
