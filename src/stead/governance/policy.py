"""Policies: a tenant's Cedar rules, evaluated on every tool call.

A policy is Cedar text (https://www.cedarpolicy.com) stored per tenant in the
store, versioned: setting a new text makes version N+1, and every verdict is
journaled with the version it came from. Each call is one Cedar request::

    principal = Agent::"<agent id>"      (attributes: tenant, name)
    action    = Action::"call"
    resource  = Tool::"<tool name>"      (attributes: effect)
    context   = {args, autonomy, effect, now, in_scope, grants}

``context.args`` holds the call's arguments (numbers that are not whole, or
beyond 64 bits, are given as text, since Cedar has neither), ``context.now`` the runtime
clock's time in whole seconds, ``context.grants`` the ids of the live grants
covering the call, and ``context.in_scope`` whether there is one.

The verdict is ``deny`` when Cedar denies (no ``permit`` applies, or a
``forbid`` does), ``ask`` when Cedar allows and one of the policies that
allowed it is annotated ``@ask``, else ``allow``. A policy that fails while
being evaluated counts as a denial: an error never lets a call through.

A text that does not parse is refused by :func:`compile_policy`, so a broken
policy is never stored.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cedarpy

from ..errors import PolicyError

MODEL_BASE_URL = "model_base_url"
"""The annotation naming, space-separated, the model endpoints (``base_url``) besides the
provider's own that the tenant's specs from the network may name (``@model_base_url("URL")``
on any of its policies)."""
PERMIT_ALL = "permit(principal, action, resource);\n"
"""What a tenant without a policy gets (version 0): everything the ledger allows."""


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    decision: str  # "allow" | "deny" | "ask"
    version: int
    reasons: tuple[str, ...] = ()


class CompiledPolicy:
    """A parsed policy text of one version, ready to evaluate many calls."""

    def __init__(self, text: str, version: int) -> None:
        self.text = text
        self.version = version
        try:
            self._set = cedarpy.PolicySet.from_str(text)
            described = json.loads(cedarpy.policies_to_json_str(text))
        except (ValueError, RuntimeError) as exc:
            raise PolicyError(
                f"the policy does not parse as Cedar: {exc}; nothing was stored. "
                "Check it against https://docs.cedarpolicy.com/policies/syntax-policy.html"
            ) from exc
        policies = described.get("staticPolicies", {})
        if not policies and described.get("templates"):
            raise PolicyError(
                "the policy text holds only templates (with ?principal or ?resource), which "
                "stead does not link; write static policies; nothing was stored"
            )
        if not policies:
            raise PolicyError(
                "the policy text holds no policies; a tenant with none would deny every "
                "call. Write at least one permit, e.g. permit(principal, action, resource);"
            )
        # Cedar denies whatever no permit allows: forbids alone deny every call
        self.permits = any(p.get("effect") == "permit" for p in policies.values())
        self._ask = frozenset(
            pid for pid, p in policies.items() if "ask" in (p.get("annotations") or {})
        )
        self._ids = {
            pid: (p.get("annotations") or {}).get("id") or pid for pid, p in policies.items()
        }
        # not a rule for calls: where the tenant's specs from the network may send
        # their model's requests (stead.server.netspec), set with the policy by an admin
        self.model_base_urls = frozenset(
            url.rstrip("/")
            for p in policies.values()
            for url in str((p.get("annotations") or {}).get(MODEL_BASE_URL, "")).split()
        )

    def evaluate(
        self,
        *,
        agent_id: str,
        tenant: str,
        name: str,
        tool: str,
        effect: str,
        args: Mapping[str, Any],
        autonomy: str,
        now: float,
        grants: Sequence[str],
        taint: Mapping[str, Any] | None = None,
    ) -> PolicyVerdict:
        request = {
            "principal": {"type": "Agent", "id": agent_id},
            "action": {"type": "Action", "id": "call"},
            "resource": {"type": "Tool", "id": tool},
            "context": {
                "args": _cedar_value(dict(args)),
                "decimals": decimals(args),
                "autonomy": autonomy,
                "effect": effect,
                "now": int(now),
                "in_scope": bool(grants),
                "grants": list(grants),
                # what the arguments owe to untrusted data (the data-flow rule's view)
                "untrusted_args": list((taint or {}).get("untrusted_args", [])),
                "influenced": bool((taint or {}).get("influenced", False)),
            },
        }
        entities = [
            {
                "uid": {"type": "Agent", "id": agent_id},
                "attrs": {"tenant": tenant, "name": name},
                "parents": [],
            },
            {"uid": {"type": "Tool", "id": tool}, "attrs": {"effect": effect}, "parents": []},
        ]
        try:
            result = cedarpy.is_authorized(request, self._set, entities)
        except (ValueError, RuntimeError) as exc:
            return PolicyVerdict(
                "deny", self.version, (f"the policy could not be evaluated: {exc}",)
            )
        errors = [str(e) for e in result.diagnostics.errors]
        reasons = tuple(self._ids.get(r, r) for r in result.diagnostics.reasons)
        if errors:
            return PolicyVerdict(
                "deny", self.version, (f"policy evaluation failed: {'; '.join(errors)}",)
            )
        if not result.allowed:
            why = reasons or ("no permit applies",)
            return PolicyVerdict("deny", self.version, why)
        if any(r in self._ask for r in result.diagnostics.reasons):
            return PolicyVerdict("ask", self.version, reasons)
        return PolicyVerdict("allow", self.version, reasons)


def compile_policy(text: str, version: int = 0) -> CompiledPolicy:
    """Parse a policy text; raise :class:`~stead.errors.PolicyError` if it is broken."""
    return CompiledPolicy(text, version)


def settable_policy(text: str) -> CompiledPolicy:
    """A policy text a person may set: it parses, and it permits something.

    Checked when a policy is set, not when a stored one is loaded, so a version
    stored before this rule still evaluates (denying what it denies).
    """
    compiled = compile_policy(text)
    if not compiled.permits:
        raise PolicyError(
            "the policy text holds no permit, so it would deny every call (forbid "
            "rules only take away what a permit allows). Add one, e.g. "
            "permit(principal, action, resource); or stop an agent with `stead "
            "autonomy ID observe`; nothing was stored"
        )
    return compiled


_DECIMAL_LIMIT = decimal.Decimal("922337203685477.5807")


def cedar_decimal(value: Any) -> Any:
    """A number as Cedar's ``decimal`` (four places after the point, rounded half to
    even), or None where it is not a finite number Cedar's decimal can hold."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    exact = decimal.Decimal(repr(value) if isinstance(value, float) else value)
    if abs(exact) >= _DECIMAL_LIMIT:  # (checked first: quantize cannot hold more digits)
        return None
    places = exact.quantize(decimal.Decimal("0.0001"), rounding=decimal.ROUND_HALF_EVEN)
    return {"__extn": {"fn": "decimal", "arg": f"{places:.4f}"}}


def decimals(args: Mapping[str, Any]) -> dict[str, Any]:
    """Every number among the top-level arguments as a Cedar decimal, whole or not,
    so one policy comparison (``.greaterThan(decimal("2000.0"))``) serves both."""
    out = {}
    for key, value in args.items():
        as_decimal = cedar_decimal(value)
        if as_decimal is not None:
            out[str(key)] = as_decimal
    return out


def _cedar_value(value: Any) -> Any:
    """A JSON value Cedar accepts: a whole number is a Long, a fraction a decimal."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        # Cedar's whole numbers are 64-bit; a bigger one is given as text, not refused
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, float):
        whole = math.isfinite(value) and value.is_integer() and abs(value) < 2**63
        if whole:
            return int(value)
        as_decimal = cedar_decimal(value)
        return as_decimal if as_decimal is not None else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _cedar_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cedar_value(v) for v in value]
    return "null" if value is None else str(value)
