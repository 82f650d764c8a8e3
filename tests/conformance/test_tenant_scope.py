"""Tenant separation, for every backend: a tenant's view of the store sees only its own.

Another tenant's agent, lease or secret is answered exactly like one that does
not exist, so a view neither reaches nor reveals what is not its own.
"""

from __future__ import annotations

import pytest

from stead.errors import NotFound, StoreError, UsageError
from stead.journal import Kind, NewEvent, seal
from stead.state import fold
from stead.store.base import AgentRecord, Batch, Store
from stead.store.scoped import TenantStore


def _create(view: Store, agent_id: str, tenant: str) -> None:
    view.create_agent(
        AgentRecord(agent_id, tenant, agent_id, {}, 1.0),
        [NewEvent("agent_created", {"tenant": tenant, "name": agent_id})],
        1.0,
    )


@pytest.fixture
def views(store: Store) -> tuple[TenantStore, TenantStore]:
    a, b = TenantStore(store, "acme"), TenantStore(store, "globex")
    _create(a, "ag_a", "acme")
    _create(b, "ag_b", "globex")
    return a, b


def test_another_tenant_s_agent_is_not_found_like_a_missing_one(
    views: tuple[TenantStore, TenantStore],
) -> None:
    a, _ = views
    reads = [
        lambda agent: a.get_record(agent),
        lambda agent: a.load_state(agent),
        lambda agent: list(a.read_events(agent)),
        lambda agent: a.get_lease(agent),
        lambda agent: a.acquire_lease(agent, "w", 30, 1.0),
        lambda agent: a.state_at(agent, 1),
        lambda agent: a.get_anchor(agent),
    ]
    for read in reads:
        with pytest.raises(NotFound) as other:
            read("ag_b")
        with pytest.raises(NotFound) as missing:
            read("ag_nope")
        assert str(other.value) == str(missing.value).replace("ag_nope", "ag_b")
    assert [s.agent_id for s in a.list_agents()] == ["ag_a"]
    assert a.list_agents("globex") == []
    assert a.load_state("ag_a").version == 1


def test_a_view_cannot_write_to_or_create_in_another_tenant(
    views: tuple[TenantStore, TenantStore],
    store: Store,
) -> None:
    a, b = views
    theirs = store.load_state("ag_b")
    events = seal(
        "ag_b", 2, theirs.head_hash, 2.0, 0, [NewEvent("memory_written", {"values": {"x": 1}})]
    )
    with pytest.raises(NotFound):
        a.append(events, fold(events, theirs), expected_version=1, epoch=0, at=2.0)
    (result,) = a.append_many([Batch(events, fold(events, theirs), 1, 0)], 2.0)
    assert isinstance(result, NotFound)
    assert store.load_state("ag_b").version == 1
    with pytest.raises(UsageError, match="tenant acme"):
        _create(a, "ag_sneaky", "globex")
    with pytest.raises(NotFound):
        store.get_record("ag_sneaky")
    # its own writes go through
    b.append(events, fold(events, theirs), expected_version=1, epoch=0, at=2.0)
    assert store.load_state("ag_b").version == 2


def test_secrets_are_visible_to_their_tenant_only(
    views: tuple[TenantStore, TenantStore], store: Store
) -> None:
    a, b = views
    b.put_secret("globex", "", "TOKEN", "sealed-b", 1.0)
    assert a.get_secret("globex", "", "TOKEN") is None
    assert a.list_secrets("globex") == []
    assert a.delete_secret("globex", "", "TOKEN") is False
    with pytest.raises(UsageError):
        a.put_secret("globex", "", "TOKEN", "overwrite", 2.0)
    with pytest.raises(NotFound):
        a.put_secret("acme", "ag_b", "TOKEN", "pinned-to-their-agent", 2.0)
    assert store.get_secret("globex", "", "TOKEN") == "sealed-b"
    assert b.list_secrets("globex") == [("", "TOKEN", 1.0)]


def test_an_id_a_view_claimed_gives_it_nothing_of_another_tenant_s_agent(store: Store) -> None:
    """A view may write the key of an agent it is about to create, and nothing
    more: if another tenant creates that id first, the view still cannot see it."""
    acme = TenantStore(store, "acme")
    acme.claim_new("ag_contested")
    acme.put_secret("acme", "ag_contested", "stead.identity", "sealed", 1.0)
    store.create_agent(
        AgentRecord("ag_contested", "globex", "theirs", {"name": "theirs"}, 1.0),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": "globex", "name": "theirs"})],
        at=1.0,
    )
    for read in (acme.get_record, acme.load_state, lambda a: list(acme.read_events(a))):
        with pytest.raises(NotFound):
            read("ag_contested")
    with pytest.raises(StoreError, match="already in use"):
        TenantStore(store, "acme").claim_new("ag_contested")


def test_a_secret_sealed_with_its_hosts_opens_with_them_on_every_backend(store: Store) -> None:
    """The hosts a secret may go to are sealed into its row (stead.destinations): every
    backend keeps that row as it was given, so the list comes back unwidened."""
    import os

    from stead.destinations import Bound
    from stead.sandbox.secrets import Vault

    vault = Vault(TenantStore(store, "acme"), os.urandom(32))
    vault.set("acme", "GH", "ghp_token-value", to=["api.github.com", "*.corp.io"], at=1.0)
    vault.set("acme", "OLD", "sk-unbound-value", at=1.0)
    hosts = ("api.github.com", "*.corp.io")
    assert vault.find("acme", "", "GH") == Bound("ghp_token-value", hosts)
    assert vault.find("acme", "", "OLD") == Bound("sk-unbound-value", None)
    assert (store.get_secret("acme", "", "GH") or "").startswith("v2:")
