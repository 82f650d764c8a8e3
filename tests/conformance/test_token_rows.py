"""API tokens and the operator's log, the same on every backend."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.errors import UsageError
from stead.store.base import Store
from stead.store.memory import MemoryStore
from stead.store.tokens import ROLES, TokenRecord, TokenRows

T0 = 1_767_225_600.0


def rows(store: Store) -> TokenRows:
    assert isinstance(store, TokenRows)
    return store


def token(token_id: str, tenant: str = "t1", role: str = "viewer") -> TokenRecord:
    return TokenRecord(token_id, tenant, role, f"{role} of {tenant}", "d" * 64, T0)


def test_tokens_are_stored_listed_per_tenant_and_revoked_once(store: Store) -> None:
    t = rows(store)
    assert t.get_token("tok_1") is None and t.list_tokens() == []
    for made in (token("tok_1"), token("tok_2", "t2", "admin"), token("tok_3", "t1", "approver")):
        t.put_token(made)
    assert t.get_token("tok_2") == token("tok_2", "t2", "admin")
    assert [r.token_id for r in t.list_tokens()] == ["tok_1", "tok_2", "tok_3"]
    assert [r.token_id for r in t.list_tokens("t1")] == ["tok_1", "tok_3"]
    assert t.list_tokens("nobody") == []
    assert t.revoke_token("tok_1", T0 + 5)
    assert not t.revoke_token("tok_1", T0 + 6), "revoked twice"
    assert not t.revoke_token("tok_missing", T0 + 6)
    revoked = t.get_token("tok_1")
    assert revoked is not None and revoked.revoked_at == T0 + 5
    assert t.get_token("tok_3") == token("tok_3", "t1", "approver")  # the others unchanged


def test_a_token_id_is_never_stored_twice(store: Store) -> None:
    t = rows(store)
    t.put_token(token("tok_1"))
    with pytest.raises(Exception):  # noqa: B017 - each backend's own refusal
        t.put_token(token("tok_1", "t2", "admin"))
    assert t.get_token("tok_1") == token("tok_1")


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(UsageError, match="one of viewer, operator, approver, admin"):
        token("tok_1", role="root")


def test_the_operator_log_keeps_lines_in_order_and_pages(store: Store) -> None:
    t = rows(store)
    assert t.operator_log() == []
    for i in range(5):
        t.log_operator("auth_failed", {"from": "10.0.0.9", "n": i, "why": "ünknown ✓"}, T0 + i)
    lines = t.operator_log()
    assert [(e.kind, e.data["n"], e.at) for e in lines] == [
        ("auth_failed", i, T0 + i) for i in range(5)
    ]
    assert lines[0].data["why"] == "ünknown ✓"
    seqs = [e.seq for e in lines]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert [e.data["n"] for e in t.operator_log(after=seqs[1], limit=2)] == [2, 3]


@settings(max_examples=50, deadline=None)
@given(
    tenant=st.from_regex(r"[a-z][a-z0-9_-]{0,20}", fullmatch=True),
    role=st.sampled_from(ROLES),
    name=st.text(max_size=40),
    at=st.floats(min_value=0, max_value=4e9, allow_nan=False),
)
def test_a_token_record_round_trips(tenant: str, role: str, name: str, at: float) -> None:
    t = MemoryStore()
    made = TokenRecord("tok_x", tenant, role, name, "a" * 64, at)
    t.put_token(made)
    assert t.get_token("tok_x") == made
