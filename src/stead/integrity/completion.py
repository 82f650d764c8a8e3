"""Verified completion: a goal is done when its checks pass now; ``finish`` is a claim.

When the model completes a goal, the goal's acceptance checks
(:mod:`stead.integrity.checks`) run at that moment; the goal is completed only
if they all pass, with the evidence journaled, and otherwise the rejection and
its reasons are journaled and shown to the model. When the model finishes, the
runtime accepts it only if every goal is completed and its checks still pass
now, no call is pending or has an unknown outcome, and no violation is open;
otherwise ``finish_rejected`` carries the reasons into the next context and the
agent works on. An accepted completion is certified (see :mod:`.certificates`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..canonical import dumps, sha256_hex
from ..errors import PathEscape, SteadError
from ..integrity.checks import describe
from ..journal import Kind
from ..sandbox import beneath
from ..tools.registry import import_object

if TYPE_CHECKING:
    from ..ports import AgentPort

DETAIL_CHARS = 300
MAX_CHECKED_FILE = 64 * 1024 * 1024
"""A file check reads at most this much of a file (its hash covers what was read)."""

Certifier = Callable[["AgentPort", Mapping[str, Any]], dict[str, Any] | None]
"""Signs a completion for an activation; None when it cannot (no vault key)."""


def _evidence(
    check: Mapping[str, Any], ok: bool, seen: str, detail: str, at: float
) -> dict[str, Any]:
    return {
        "check": describe(check),
        "ok": ok,
        "digest": sha256_hex(seen),
        "detail": detail[-DETAIL_CHARS:],
        "at": at,
    }


class Verifier:
    """Runs acceptance checks for one activation and judges ``finish`` claims."""

    def __init__(self, act: AgentPort, certify: Certifier | None = None) -> None:
        self.act = act
        self.certify = certify

    def goal_spec(self, goal_id: str) -> Mapping[str, Any] | None:
        for g in self.act.record.spec.get("goals", []):
            if g["id"] == goal_id:
                return dict(g)
        return None

    def run_check(self, goal_id: str, check: Mapping[str, Any]) -> dict[str, Any]:
        at = self.act.clock.now()
        try:
            ok, seen, detail = self._run(goal_id, check)
        except (SteadError, OSError, ValueError) as exc:
            ok, seen, detail = False, repr(exc), str(exc)
        return _evidence(check, ok, seen, detail, at)

    def _run(self, goal_id: str, check: Mapping[str, Any]) -> tuple[bool, str, str]:
        root = self.act.workspace.root
        if "command" in check:
            ctx = self.act.ctx_for(f"accept-{goal_id}")
            result = ctx.run(["/bin/sh", "-c", check["command"]], timeout=check["timeout"])
            out = result.stdout + result.stderr
            if result.timed_out:
                return False, out, f"timed out after {check['timeout']} s"
            return result.exit_code == 0, out, f"exit {result.exit_code}: {out.strip()}"
        if "files_exist" in check:
            found = {p: _read(root, p) for p in check["files_exist"]}
            missing = [p for p, data in found.items() if data is None]
            seen = dumps({p: _digest(data) for p, data in found.items()})
            return not missing, seen, f"missing: {', '.join(missing)}" if missing else "all there"
        for kind in ("file_contains", "file_matches"):
            if kind in check:
                arg = check[kind]
                data = _read(root, arg["path"])
                if data is None:
                    return False, "", f"{arg['path']} does not exist"
                text = data.decode("utf-8", errors="replace")
                ok = (
                    arg["text"] in text
                    if kind == "file_contains"
                    else bool(re.search(arg["pattern"], text, re.MULTILINE))
                )
                return ok, text, "found" if ok else "not found"
        if "predicate" in check:
            base = self.act.record.spec.get("base_dir", ".")
            func = import_object(check["predicate"], [base], "predicate")
            if not callable(func):
                return False, "", f"predicate {check['predicate']} is not a function"
            try:
                answer = func(self.act.state, root)
            except Exception as exc:  # the operator's code: its failure fails the check
                return False, repr(exc), f"predicate {check['predicate']} raised {exc!r}"
            ok, why = answer if isinstance(answer, tuple) else (bool(answer), "")
            return bool(ok), dumps([bool(ok), str(why)]), str(why) or ("true" if ok else "false")
        goal = next((g for g in self.act.state.goals if g["id"] == goal_id), {})
        by = goal.get("signed_off_by")
        return by is not None, str(by), f"signed off by {by}" if by else "not signed off yet"

    def check_goal(self, goal_id: str) -> tuple[bool, list[dict[str, Any]]]:
        spec = self.goal_spec(goal_id) or {}
        checks = spec.get("accept") or []
        if not checks:
            at = self.act.clock.now()
            claim = {"check": "the model's claim (the goal declares no checks)", "ok": True,
                     "digest": sha256_hex(goal_id), "detail": "", "at": at}  # fmt: skip
            return True, [claim]
        evidence = [self.run_check(goal_id, c) for c in checks]
        return all(e["ok"] for e in evidence), evidence

    def complete_goal(self, index: int, goal_id: str) -> None:
        act = self.act
        if not any(g["id"] == goal_id for g in act.state.goals):
            known = ", ".join(g["id"] for g in act.state.goals) or "none"
            act.emit(
                Kind.GOAL_REJECTED,
                action=index,
                id=goal_id,
                reasons=[f"there is no goal {goal_id!r}; goals: {known}"],
                evidence=[],
            )
            return
        ok, evidence = self.check_goal(goal_id)
        if ok:
            act.emit(Kind.GOAL_COMPLETED, action=index, id=goal_id, known=True, evidence=evidence)
        else:
            reasons = [f"{e['check']} fails: {e['detail']}" for e in evidence if not e["ok"]]
            act.emit(
                Kind.GOAL_REJECTED, action=index, id=goal_id, reasons=reasons, evidence=evidence
            )

    def finish(self, index: int, summary: str, provenance: Mapping[str, Any] | None = None) -> None:
        """Accept a finish claim if it is true now; else reject it, saying why.

        ``provenance`` (from the data-flow rule) says where the summary came from;
        it is journaled with the claim and sealed into the certificate.
        """
        act = self.act
        seen = {"provenance": dict(provenance)} if provenance else {}
        state = act.state
        reasons: list[str] = []
        proof: list[dict[str, Any]] = []
        for goal in state.goals:
            if goal["status"] != "completed":
                reasons.append(f"goal {goal['id']} is not completed")
                continue
            _, evidence = self.check_goal(goal["id"])  # again: true now, not remembered
            proof.append(
                {"id": goal["id"], "description": goal["description"], "evidence": evidence}
            )
            reasons += [
                f"goal {goal['id']}: {e['check']} no longer passes: {e['detail']}"
                for e in evidence
                if not e["ok"]
            ]
        reasons += [
            f"call {c} ({v.get('tool')}) is still pending" for c, v in state.pending.items()
        ]
        reasons += [
            f"call {c} ({v.get('tool')}) has an unknown outcome" for c, v in state.unknown.items()
        ]
        reasons += [
            f"violation {vid} of monitor {v['rule']} is open" for vid, v in state.violations.items()
        ]
        if reasons:
            act.emit(Kind.FINISH_REJECTED, action=index, summary=summary, reasons=reasons, **seen)
            return
        claimed = act.emit(Kind.FINISH_CLAIMED, action=index, summary=summary, goals=proof, **seen)
        # from the event as journaled: redacted, so the certificate holds no secret
        body = {
            "summary": claimed.data["summary"],
            "goals": claimed.data["goals"],
            "finish": claimed,
            "provenance": claimed.data.get("provenance"),
        }
        certificate = self.certify(act, body) if self.certify else None
        if certificate is not None:
            act.emit(Kind.COMPLETION_CERTIFIED, certificate=certificate)


def _read(root: Path, rel: str) -> bytes | None:
    """The file's bytes, reached without following links; None if it is not a file there."""
    try:
        return beneath.read_bytes(root, rel, MAX_CHECKED_FILE)
    except (PathEscape, OSError):
        return None


def _digest(data: bytes | None) -> str | None:
    return sha256_hex(data.decode("latin-1")) if data is not None else None
