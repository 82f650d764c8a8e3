"""The values provenance follows, and the simple rewrites they survive."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stead.values import values


@pytest.mark.parametrize(
    ("source", "rewritten"),
    [
        # a link put into a new sentence, its host upper-cased, a full stop after it
        ("see https://evil.example/pay?to=X77 for details",
         "Please go to HTTPS://EVIL.example/pay?to=X77."),
        # an address inside a list, in other case
        ("From: Mallory <mallory@evil.example>", {"to": ["bob@x.org", "Mallory@Evil.Example"]}),
        # an account number with its spaces removed
        ("IBAN DE89 3704 0044 0532 0130 00", "refund to DE89370400440532013000"),
        # an amount written with a thousands separator and a trailing zero
        ("total due: 1,234.50 EUR", {"amount": 1234.5}),
        # a file id inside other text
        ("shared file_id=f9a8b7c6", "open f9a8b7c6 now"),
        # a date copied out of minutes
        ("the meeting moved to 2026-12-14 at noon", {"date": "2026-12-14"}),
    ],
)  # fmt: skip
def test_a_value_survives_a_simple_rewrite(source: object, rewritten: object) -> None:
    assert values(source) & values(rewritten)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("ok", "ok"),  # short words are not values
        ("step 3 of 10", "3 of 10 steps"),  # nor are small numbers
        ("price 2.0", {"x": 2.0}),  # nor short amounts
        ("the quick brown fox", "the quick brown fox"),  # nor short text
    ],
)
def test_common_small_things_are_not_values(one: object, other: object) -> None:
    assert not values(one) & values(other)


JSON = st.recursive(
    st.text(max_size=60) | st.integers() | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@given(JSON)
def test_values_of_any_json_are_normalized_text_and_the_same_every_time(data: object) -> None:
    found = values(data)
    assert all(isinstance(v, str) and v and v == v.strip() for v in found)
    assert all(v == v.lower() for v in found if "://" not in v)  # only a URL's path keeps case
    assert values(data) == found
