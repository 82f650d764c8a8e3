"""The boundaries a condition injects, and the journal's proof that each happened.

Between-step boundaries (hibernate, move, model swap, forced compaction, grant
lapse) are made with the same calls a person or an operator makes
(``stead hibernate``, ``stead export --move``, ``stead model set``,
``stead revoke``) once the agent's worker has stopped after decision ``at``.
Mid-step ones (kill, database restart) fall while the call of decision ``at``
runs: its worker is held after the call's intent is journaled (see
:mod:`stead.evals.worker`).

:func:`proof` reads the finished journal and names the events that show the
boundary happened; a condition whose journal does not show it is the eval's
failure, never a silent pass.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import SteadError
from ..journal import Event, Kind
from ..spec import AgentSpec
from .suite import Condition

LAPSED = "lapsed: the eval's grant_lapse condition"
"""The reason journaled with a grant the eval lets lapse (measure finds it by it)."""


def squeezed(own: dict[str, Any]) -> dict[str, Any]:
    """The model's options with the smallest window and share it accepts, so its next
    request is over its budget and the conversation is compacted first."""
    tokens = min(int(own.get("max_tokens") or 256), 256)
    return {
        **own,
        "context_window": 512,
        "max_tokens": tokens,
        "compact_at": 0.1,
        "compact_to": 0.05,
    }


def not_applicable(condition: Condition, spec: AgentSpec, url: str) -> str | None:
    """Why ``condition`` cannot be injected into this agent on this store, or None."""
    kind = condition.kind
    if kind == "compact":
        if spec.model_options is None:
            return "a scripted model keeps no conversation to compact"
        if spec.model.startswith("replay:"):
            return (
                "a recorded model answers only the requests it recorded; a compaction "
                "asks one it never saw"
            )
    if kind == "db_restart" and not url.startswith(("postgresql:", "postgres:")):
        return (
            "SQLite runs inside the worker process: its restart is the worker's, "
            "which the kill condition injects"
        )
    if kind == "model_swap" and spec.model.startswith("replay:") and condition.to is not None:
        return "a recorded model cannot be swapped for another: the recording would not match"
    return None


def own_model(spec: AgentSpec) -> Any:
    """The spec's model field as ``set_model`` takes it (its options, else its ref)."""
    if spec.model_options is not None and not spec.model.startswith("replay:"):
        return dict(spec.model_options)
    return spec.model


def lapse_grants(rt: Any, agent_id: str, tool: str | None) -> list[str]:
    """Revoke, as lapsed, every live grant covering ``tool`` (every grant if None)."""
    state = rt.store.load_state(agent_id)
    chosen = [
        gid
        for gid, g in sorted(state.grants.items())
        if not g.get("revoked") and (tool is None or fnmatch.fnmatchcase(tool, g["tool"]))
    ]
    for gid in chosen:
        rt.revoke(agent_id, gid, reason=LAPSED)
    return chosen


def drop_connections(url: str, application_name: str) -> int:
    """Terminate every PostgreSQL connection a worker opened (as a server restart
    does to its clients); the number terminated."""
    import psycopg  # the postgres extra: only a PostgreSQL store gets here

    from ..store.postgres_url import parse

    with psycopg.connect(parse(url).conninfo, autocommit=True, connect_timeout=10) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchall()
    return sum(1 for (done,) in rows if done)


def restart_server(url: str, command: str, patience: float = 60.0) -> float:
    """Run the operator's ``command`` that restarts the database server, then wait
    until the server takes connections again; the seconds it took."""
    import shlex
    import subprocess
    import time

    import psycopg

    from ..store.postgres_url import parse

    started = time.monotonic()
    done = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=patience)
    if done.returncode != 0:
        raise SteadError(
            f"db_restart: `{command}` exited with {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[:300]}"
        )
    while True:
        try:
            with psycopg.connect(parse(url).conninfo, connect_timeout=5):
                return time.monotonic() - started
        except psycopg.OperationalError:
            if time.monotonic() - started > patience:
                raise SteadError(
                    f"db_restart: the database did not come back within "
                    f"{patience:.0f} s of `{command}`"
                ) from None
            time.sleep(0.2)


def _seqs(events: Sequence[Event], kind: Kind, **match: Any) -> list[Event]:
    return [
        e for e in events if e.kind == kind and all(e.data.get(k) == v for k, v in match.items())
    ]


def _shown(ev: Event, what: str) -> dict[str, Any]:
    return {"seq": ev.seq, "kind": str(ev.kind), "what": what}


def proof(
    kind: str, events: Sequence[Event], moved: Sequence[Event], injected: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The events that show ``kind``'s boundary in the journal (``moved``: the
    destination's, after a move). Raises SteadError naming what is missing."""
    if kind in ("kill", "db_restart"):
        held = injected.get("held") or {}
        call = held.get("call_id")
        intent = [
            e for e in _seqs(events, Kind.TOOL_INTENT, call_id=call) if e.seq == held.get("seq")
        ]
        if not intent:
            raise SteadError(f"{kind}: the journal holds no intent at seq {held.get('seq')}")
        settled = [
            e
            for e in events
            if e.seq > intent[0].seq
            and e.data.get("call_id") == call
            and e.kind in (Kind.TOOL_RESULT, Kind.RECONCILED, Kind.OUTCOME_UNKNOWN)
        ]
        out = [_shown(intent[0], f"intent of {call} ({held.get('tool')}) journaled")]
        after = [e for e in events if e.kind == Kind.ACTIVATION_STARTED and e.seq > intent[0].seq]
        if kind == "kill" and (not after or (settled and settled[0].seq < after[0].seq)):
            raise SteadError(
                "kill: the journal shows no new activation before the killed call settled"
            )
        if after and (not settled or after[0].seq < settled[0].seq):
            out.append(_shown(after[0], "a new worker's activation took the agent over"))
        if settled:
            first = settled[0]
            what = (
                "its outcome was unknown: a person decides"
                if first.kind == Kind.OUTCOME_UNKNOWN
                else f"the call settled once, as {first.kind}"
            )
            out.append(_shown(first, what))
        return out
    if kind == "hibernate":
        slept, woke = _seqs(events, Kind.HIBERNATED), _seqs(events, Kind.RESTORED)
        if not slept or not woke:
            raise SteadError("hibernate: the journal shows no hibernation and restore")
        return [_shown(slept[0], "hibernated"), _shown(woke[0], "restored from its snapshot")]
    if kind == "move":
        gone, came = _seqs(events, Kind.AGENT_MOVED), _seqs(moved, Kind.AGENT_IMPORTED)
        if not gone or not came:
            raise SteadError("move: the journals show no move out and import")
        return [
            _shown(gone[0], "moved out of the first store"),
            _shown(came[0], "imported into the second store"),
        ]
    if kind == "model_swap":
        swaps = _seqs(events, Kind.MODEL_CHANGED)
        if not swaps:
            raise SteadError("model_swap: the journal shows no model change")
        return [_shown(swaps[0], f"model set to {swaps[0].data.get('model')}")]
    if kind == "compact":
        done = _seqs(events, Kind.CONTEXT_COMPACTED)
        if not done:
            raise SteadError("compact: the journal shows no compaction")
        return [_shown(done[0], "the conversation was compacted")]
    if kind == "grant_lapse":
        lapsed = _seqs(events, Kind.GRANT_REVOKED, reason=LAPSED)
        if not lapsed:
            raise SteadError("grant_lapse: the journal shows no lapsed grant")
        return [_shown(e, f"grant {e.data.get('grant')} lapsed") for e in lapsed]
    return []


def files_of(root: Path) -> dict[str, str]:
    """Each workspace file's SHA-256, by its path inside the workspace."""
    import hashlib

    out: dict[str, str] = {}
    if not root.is_dir():
        return out
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out
