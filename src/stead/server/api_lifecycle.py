"""Endpoints for an agent's life beyond its steps: hibernation and snapshots, forks,
the completion certificate, the monitors run again, provenance, quarantine and
rollback, and archives (an agent exported as signed bytes, or imported from them:
hostile input, checked by :mod:`stead.snapshots.lineage` like a file would be)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from starlette.responses import StreamingResponse

from ..errors import GovernanceError, SteadError, UsageError
from ..integrity.certificates import journaled_certificate, verify_certificate
from ..snapshots.trust import TrustedKeys
from .api import brief, one_agent
from .app import Call, Endpoint
from .netspec import check_record, endpoints
from .schemas import ID, NEW_AGENT, OBJECT, TEXT, answer, listing, strict, whole

SNAPSHOT = answer(
    {"snapshot_id": ID, "agent_id": ID, "version": {"type": "integer"}},
)
NODE = answer({"seq": {"type": "integer"}, "kind": TEXT, "why": TEXT})


def hibernate(call: Call) -> Any:
    return call.rt.hibernate(call.params["agent_id"]).to_json()


def wake(call: Call) -> Any:
    state = call.rt.wake(call.params["agent_id"])
    return brief(state)


def snapshots(call: Call) -> Any:
    return [s.to_json() for s in call.rt.store.list_snapshots(call.params["agent_id"])]


def restore(call: Call) -> Any:
    state = call.rt.restore(call.params["snapshot_id"])
    return brief(state)


def fork(call: Call) -> Any:
    """A new agent from one of the tenant's; ``with_grants`` keeps the source's grants
    (delegated), which, as on import, only an admin may ask for."""
    b = call.body
    if b.get("with_grants") and call.token.role != "admin":
        raise GovernanceError("forking an agent with its grants needs an admin token")
    state = call.rt.fork(call.params["agent_id"], at_version=b.get("at_version"),
                         with_grants=bool(b.get("with_grants")), name=b.get("name"))  # fmt: skip
    return brief(state)


def certificate(call: Call) -> Any:
    return journaled_certificate(call.rt.store, call.params["agent_id"])


def verify(call: Call) -> Any:
    problems = verify_certificate(call.rt.store, call.body["certificate"])
    return {"ok": not problems, "problems": problems}


def check(call: Call) -> Any:
    found, journaled = call.rt.check(call.params["agent_id"])
    return {"violations": [{"seq": seq, **v.to_json()} for seq, v in found],
            "journaled": journaled,
            "same_as_live": [v.to_json() for _, v in found] == journaled}  # fmt: skip


def _seq(call: Call) -> int:
    return whole(call.params["seq"], "an event's sequence number")


def _nodes(call: Call, which: str) -> Any:
    graph = call.rt.provenance(call.params["agent_id"])
    seq = _seq(call)
    try:
        nodes = graph.lineage(seq) if which == "lineage" else graph.impact(seq)
    except KeyError:
        raise UsageError(f"agent {call.params['agent_id']} has no event {seq}") from None
    return [n.to_json() for n in nodes]


def lineage(call: Call) -> Any:
    return _nodes(call, "lineage")


def impact(call: Call) -> Any:
    return _nodes(call, "impact")


def quarantine(call: Call) -> Any:
    status, downstream = call.rt.quarantine(call.params["agent_id"], call.body["seq"],
                                            call.body["reason"])  # fmt: skip
    return {"seq": call.body["seq"], "downstream": downstream, "status": status}


def rollback(call: Call) -> Any:
    b = call.body
    report = call.rt.rollback(call.params["agent_id"], to_version=b.get("to_version"),
                              downstream_of=b.get("downstream_of"))  # fmt: skip
    return {
        "compensated": report.compensated,
        "failed": report.failed,
        "needs_person": report.needs_person,
        "restored_paths": report.restored_paths,
    }


_SEQ = {"type": "integer", "minimum": 1}
ENDPOINTS = [
    Endpoint("POST", "/v1/agents/{agent_id}/hibernate", "operate",
             "Hibernate an agent into a snapshot", one_agent(hibernate), SNAPSHOT, body=OBJECT,
             tag="lifecycle"),
    Endpoint("POST", "/v1/agents/{agent_id}/wake", "operate", "Wake a hibernated agent",
             one_agent(wake),
             NEW_AGENT, body=OBJECT, tag="lifecycle"),
    Endpoint("GET", "/v1/agents/{agent_id}/snapshots", "read", "List an agent's snapshots",
             snapshots, listing(SNAPSHOT), tag="lifecycle"),
    Endpoint("POST", "/v1/snapshots/{snapshot_id}/restore", "operate",
             "Restore a snapshot (once)", restore, NEW_AGENT, body=OBJECT, tag="lifecycle"),
    Endpoint("POST", "/v1/agents/{agent_id}/fork", "operate",
             "Fork an agent from a past or its current version", fork, NEW_AGENT,
             body=strict({"at_version": _SEQ, "with_grants": {"type": "boolean"},
                          "name": {"type": "string", "minLength": 1, "maxLength": 200}}),
             status=201, tag="lifecycle"),
    Endpoint("GET", "/v1/agents/{agent_id}/certificate", "read",
             "Show an agent's completion certificate", certificate, OBJECT, tag="integrity"),
    Endpoint("POST", "/v1/certificates/verify", "read",
             "Check a completion certificate against the store", verify,
             answer({"ok": {"type": "boolean"}, "problems": listing(TEXT)}),
             body=strict({"certificate": OBJECT}, required=["certificate"]), tag="integrity"),
    Endpoint("GET", "/v1/agents/{agent_id}/check", "read",
             "Run the monitors over the stored journal again", check,
             answer({"violations": {"type": "array"}, "journaled": {"type": "array"},
                     "same_as_live": {"type": "boolean"}}), tag="integrity"),
    Endpoint("GET", "/v1/agents/{agent_id}/lineage/{seq}", "read",
             "Where an event came from", lineage, listing(NODE), tag="integrity"),
    Endpoint("GET", "/v1/agents/{agent_id}/impact/{seq}", "read",
             "Everything downstream of a result", impact, listing(NODE), tag="integrity"),
    Endpoint("POST", "/v1/agents/{agent_id}/quarantine", "approve",
             "Mark a result bad and flag what depends on it", one_agent(quarantine),
             answer({"seq": {"type": "integer"}, "downstream": {"type": "array"},
                     "status": TEXT}),
             body=strict({"seq": _SEQ, "reason": {"type": "string", "minLength": 1,
                                                  "maxLength": 4096}},
                         required=["seq", "reason"]), tag="integrity"),
    Endpoint("POST", "/v1/agents/{agent_id}/rollback", "govern",
             "Undo what came after a version, or what depended on a result", one_agent(rollback),
             answer({"compensated": {"type": "array"}, "failed": {"type": "array"},
                     "needs_person": {"type": "array"}, "restored_paths": {"type": "array"}}),
             body=strict({"to_version": _SEQ, "downstream_of": _SEQ},
                         one_of=[["to_version"], ["downstream_of"]]), tag="integrity"),
]  # fmt: skip


def export(call: Call) -> Any:
    """The agent's signed archive, as bytes; with ``move`` the source is retired. It
    is sent from disk a chunk at a time, never held whole."""
    with tempfile.TemporaryDirectory(prefix="stead-export-") as folder:
        done = call.rt.export(call.params["agent_id"], Path(folder) / "agent.stead",
                              move=bool(call.body.get("move")))  # fmt: skip
        # open before the folder goes: the file is read on, and nothing is left on disk
        # however the sending ends
        archive = open(done["path"], "rb")  # noqa: SIM115 (closed by chunks())
    size = os.fstat(archive.fileno()).st_size

    def chunks() -> Iterator[bytes]:
        with archive:
            while chunk := archive.read(1 << 20):
                yield chunk

    return StreamingResponse(
        chunks(),
        media_type="application/octet-stream",
        headers={"x-stead-archive-id": str(done["archive_id"]),
                 "x-stead-sha256": str(done["sha256"]),
                 "x-stead-public-key": str(done["public_key"]),
                 "content-length": str(size),
                 "content-disposition": f'attachment; filename="{call.params["agent_id"]}.stead"'},
    )  # fmt: skip


def import_archive(call: Call) -> Any:
    """A new agent from an archive in the body. ``?trust_key=KEY`` accepts only an
    archive signed by that exporter key; ``?with_grants=true`` keeps the archive's
    grants, which only an admin may ask for, since it gives the agent authority.
    The archive's spec is a spec from the network: held to the same allowlist as one
    sent to ``POST /v1/agents`` (:func:`stead.server.netspec.check_record`)."""
    with_grants = call.query.get("with_grants", "false") == "true"
    if with_grants and call.token.role != "admin":
        raise GovernanceError("importing an agent with its grants needs an admin token")
    key = call.query.get("trust_key")
    trusted = TrustedKeys.configured([key] if key else [], None)
    path = call.body.path  # the body as it arrived, on disk (server/bodies.py)
    allowed = endpoints(call.rt.store, call.token.tenant)
    try:
        state = call.rt.import_archive(path, with_grants=with_grants, trusted=trusted,
                                       vet=lambda spec: check_record(spec, allowed))  # fmt: skip
    except SteadError as exc:
        # the file is the server's own: its words say "the archive", not where it is
        exc.args = (str(exc).replace(str(path), "the archive"), *exc.args[1:])
        raise
    origin = state.origin or {}
    return {"agent_id": state.agent_id, "status": state.status, "version": state.version,
            "signed_by": origin.get("signed_by"), "trusted": trusted is not None}  # fmt: skip


ENDPOINTS += [
    Endpoint("POST", "/v1/agents/{agent_id}/export", "operate",
             "Export an agent's signed archive (with move, retire the source)", export,
             {"type": "string", "format": "binary"},
             body=strict({"move": {"type": "boolean"}}), media="application/octet-stream",
             tag="lifecycle"),
    Endpoint("POST", "/v1/agents/import", "operate", "Import an agent from an archive",
             import_archive,
             answer({"agent_id": ID, "status": TEXT, "version": {"type": "integer"},
                     "signed_by": {"type": ["string", "null"]}, "trusted": {"type": "boolean"}}),
             body={"type": "string", "format": "binary"}, raw=True, status=201,
             query={"trust_key": {"type": "string"}, "with_grants": {"enum": ["true", "false"]}},
             tag="lifecycle"),
]  # fmt: skip
