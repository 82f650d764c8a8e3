"""Agent identity: signed envelopes, their shape, and the vault's reserved key name."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stead.canonical import dumps
from stead.errors import GovernanceError, SecretError
from stead.governance.identity import (
    ENVELOPE_KINDS,
    IDENTITY_SECRET,
    check_shape,
    new_key_pair,
    sign,
    signature_valid,
    signed_part,
)
from stead.sandbox.secrets import Vault, new_key
from stead.store.memory import MemoryStore

PRIVATE, PUBLIC = new_key_pair()
OTHER_PRIVATE, OTHER_PUBLIC = new_key_pair()
FIELDS = ("v", "id", "kind", "from", "to", "tenant", "at", "body")


def envelope(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "v": 1,
        "id": "msg_1",
        "kind": "message",
        "from": "ag_sender",
        "to": "ag_receiver",
        "tenant": "acme",
        "at": 1_767_225_600.5,
        "body": {"text": "hello", "claims": ["gr_1"]},
    }
    return {**base, **overrides}


# -- keys and signatures --------------------------------------------------------------


def test_a_key_pair_is_two_distinct_32_byte_hex_keys() -> None:
    assert len(bytes.fromhex(PRIVATE)) == 32 and len(bytes.fromhex(PUBLIC)) == 32
    assert PRIVATE != PUBLIC
    assert new_key_pair() != (PRIVATE, PUBLIC)


def test_sign_adds_only_a_signature_and_it_verifies() -> None:
    env = envelope()
    signed = sign(PRIVATE, env)
    assert {k: v for k, v in signed.items() if k != "sig"} == env
    assert "sig" not in env  # the input is not changed
    assert len(bytes.fromhex(signed["sig"])) == 64
    assert signature_valid(PUBLIC, signed)


def test_the_signature_covers_the_canonical_form_not_key_order() -> None:
    signed = sign(PRIVATE, envelope())
    reordered = dict(reversed(list(signed.items())))
    assert signature_valid(PUBLIC, reordered)
    assert signed_part(signed) == dumps(envelope()).encode()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("v", 2),
        ("id", "msg_2"),
        ("kind", "delegation"),
        ("from", "ag_mallory"),
        ("to", "ag_other"),
        ("tenant", "globex"),
        ("at", 1_767_225_600.0),
        ("body", {"text": "hello", "claims": ["gr_1", "gr_2"]}),
        ("body", {"text": "hellO", "claims": ["gr_1"]}),
        ("extra", "a field the signer never saw"),
    ],
)
def test_changing_any_signed_field_breaks_the_signature(field: str, value: Any) -> None:
    signed = sign(PRIVATE, envelope())
    assert not signature_valid(PUBLIC, {**signed, field: value})


def test_removing_a_signed_field_breaks_the_signature() -> None:
    signed = sign(PRIVATE, envelope())
    for field in FIELDS:
        assert not signature_valid(PUBLIC, {k: v for k, v in signed.items() if k != field})


def test_a_changed_byte_of_the_signature_breaks_it() -> None:
    signed = sign(PRIVATE, envelope())
    raw = bytearray(bytes.fromhex(signed["sig"]))
    for i in (0, 31, 63):
        flipped = bytearray(raw)
        flipped[i] ^= 0x01
        assert not signature_valid(PUBLIC, {**signed, "sig": flipped.hex()})


@pytest.mark.parametrize("sig", [None, 42, "", "zz", "00" * 64, "ab" * 10])
def test_a_missing_or_malformed_signature_does_not_verify(sig: Any) -> None:
    signed = sign(PRIVATE, envelope())
    broken = {**signed, "sig": sig} if sig is not None else envelope()
    assert not signature_valid(PUBLIC, broken)


def test_another_key_does_not_verify() -> None:
    signed = sign(PRIVATE, envelope())
    assert not signature_valid(OTHER_PUBLIC, signed)
    # re-signing with another key and claiming the same sender does not verify either
    forged = sign(OTHER_PRIVATE, envelope())
    assert not signature_valid(PUBLIC, forged)


@pytest.mark.parametrize("public", ["", "zz", "00" * 31, "ff" * 33])
def test_a_malformed_public_key_does_not_verify_and_does_not_raise(public: str) -> None:
    assert not signature_valid(public, sign(PRIVATE, envelope()))


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(max_examples=100, deadline=None)
@given(
    body=st.dictionaries(st.text(max_size=6), JSON, max_size=4),
    at=st.floats(min_value=0, max_value=4e9),
    field=st.sampled_from(FIELDS),
    replacement=JSON,
)
def test_any_signed_envelope_verifies_and_any_change_to_a_field_breaks_it(
    body: dict[str, Any], at: float, field: str, replacement: Any
) -> None:
    env = envelope(body=body, at=at)
    signed = sign(PRIVATE, env)
    assert signature_valid(PUBLIC, signed)
    assume(dumps(replacement) != dumps(env[field]))
    assert not signature_valid(PUBLIC, {**signed, field: replacement})


# -- shape ------------------------------------------------------------------------------


def test_a_well_formed_envelope_passes_check_shape_unchanged() -> None:
    env = sign(PRIVATE, envelope())
    assert check_shape(env) == env
    for kind in ENVELOPE_KINDS:
        assert check_shape(envelope(kind=kind))["kind"] == kind
    assert check_shape(envelope(at=5))["at"] == 5  # a whole number of seconds is a time


@pytest.mark.parametrize("field", FIELDS)
def test_check_shape_names_a_missing_field(field: str) -> None:
    env = {k: v for k, v in envelope().items() if k != field}
    with pytest.raises(GovernanceError, match=f"envelope field '{field}' is missing"):
        check_shape(env)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("v", "1"),
        ("id", 1),
        ("kind", None),
        ("from", ["ag_1"]),
        ("to", 3),
        ("tenant", {"name": "acme"}),
        ("at", "yesterday"),
        ("body", "hello"),
        ("body", ["hello"]),
    ],
)
def test_check_shape_names_a_field_of_the_wrong_type(field: str, value: Any) -> None:
    with pytest.raises(GovernanceError, match=f"envelope field '{field}'.*wrong type"):
        check_shape(envelope(**{field: value}))


@pytest.mark.parametrize("version", [0, 2, 99])
def test_check_shape_refuses_another_version(version: int) -> None:
    with pytest.raises(GovernanceError, match=f"envelope version {version} is not understood"):
        check_shape(envelope(v=version))


@pytest.mark.parametrize("kind", ["grant", "approve", "Message", ""])
def test_check_shape_refuses_an_unknown_kind(kind: str) -> None:
    with pytest.raises(GovernanceError, match=f"envelope kind '{kind}' is unknown"):
        check_shape(envelope(kind=kind))


@pytest.mark.parametrize("thing", [None, "envelope", ["v", 1], 7])
def test_check_shape_refuses_what_is_not_an_object(thing: Any) -> None:
    with pytest.raises(GovernanceError, match="an envelope is a JSON object"):
        check_shape(thing)


# -- the vault never hands out an identity key ------------------------------------------


@pytest.fixture
def vault() -> Vault:
    return Vault(MemoryStore(), base64.b64decode(new_key()))


def test_the_identity_key_is_sealed_under_its_reserved_name(vault: Vault) -> None:
    vault.set_reserved("acme", IDENTITY_SECRET, PRIVATE, agent_id="ag_1", at=1.0)
    assert vault.get("acme", "ag_1", IDENTITY_SECRET) == PRIVATE
    assert vault.get("acme", "ag_2", IDENTITY_SECRET) is None  # another agent's key


def test_a_tool_is_never_handed_the_identity_key(vault: Vault) -> None:
    vault.set_reserved("acme", IDENTITY_SECRET, PRIVATE, agent_id="ag_1", at=1.0)
    vault.set("acme", "API_TOKEN", "tok", at=1.0)
    assert vault.for_call("acme", "ag_1", ["API_TOKEN"]) == {"API_TOKEN": "tok"}
    with pytest.raises(SecretError, match="not allowed"):
        vault.for_call("acme", "ag_1", [IDENTITY_SECRET])
    with pytest.raises(SecretError, match="not allowed"):
        vault.for_call("acme", "ag_1", ["API_TOKEN", IDENTITY_SECRET])


@pytest.mark.parametrize("name", [IDENTITY_SECRET, "stead.anything"])
def test_a_person_cannot_set_a_reserved_name(vault: Vault, name: str) -> None:
    with pytest.raises(SecretError, match="not allowed"):
        vault.set("acme", name, "my own key", agent_id="ag_1", at=1.0)
    assert vault.get("acme", "ag_1", name) is None


def test_set_reserved_refuses_an_ordinary_name(vault: Vault) -> None:
    with pytest.raises(SecretError, match="not a reserved name"):
        vault.set_reserved("acme", "API_TOKEN", "x", agent_id="ag_1", at=1.0)
    assert vault.get("acme", "ag_1", "API_TOKEN") is None


def test_the_identity_key_is_stored_sealed() -> None:
    store = MemoryStore()
    Vault(store, base64.b64decode(new_key())).set_reserved(
        "acme", IDENTITY_SECRET, PRIVATE, agent_id="ag_1", at=1.0
    )
    sealed = store.get_secret("acme", "ag_1", IDENTITY_SECRET)
    assert sealed is not None and PRIVATE not in sealed
    assert PRIVATE not in base64.b64decode(sealed).hex()
