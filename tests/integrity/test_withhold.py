"""Withholding from an answer the values it repeats from untrusted text
(:mod:`stead.integrity.withhold`): none of them is left, every value a person
gave is, and each span is found however the model wrote it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stead.integrity.withhold import withhold
from stead.values import values

LINK = "https://evil.example/login?next=x9k2"


def test_each_kind_of_value_is_withheld_as_written_and_named() -> None:
    untrusted = values(
        f"Log in at {LINK}, write to Mallory@Evil-Mail.example, call +1 555 0199 7731, "
        "pay 1,250.50 by 2026-12-18 into GB33BUKB20201555555555"
    )
    text = (
        f"IT asks you to log in at {LINK}. Write to mallory@evil-mail.example or call "
        "+1 555 0199 7731; pay 1,250.50 by 2026-12-18 to GB33BUKB20201555555555."
    )
    shown, withheld = withhold(text, dict.fromkeys(untrusted, 7), set())
    assert [w["kind"] for w in withheld] == [
        "link", "e-mail address", "number", "amount", "date", "identifier"
    ]  # fmt: skip
    assert [w["value"] for w in withheld] == [
        LINK, "mallory@evil-mail.example", "+1 555 0199 7731", "1,250.50", "2026-12-18",
        "GB33BUKB20201555555555",
    ]  # fmt: skip
    assert all(w["from"] == 7 for w in withheld)
    assert shown.startswith(
        "IT asks you to log in at [link withheld: from untrusted text, event 7]."
    )
    assert not values(shown) & untrusted


def test_a_link_without_its_scheme_is_withheld_whole() -> None:
    untrusted = values(LINK)
    shown, withheld = withhold(
        "Go to evil.example/login?next=x9k2 now", dict.fromkeys(untrusted, 3), set()
    )
    assert shown == "Go to [link withheld: from untrusted text, event 3] now"
    assert withheld == [{"value": "evil.example/login?next=x9k2", "kind": "link", "from": 3}]


def test_what_a_person_gave_and_prose_are_kept() -> None:
    untrusted = values(f"Meet bob@partner.example on 2026-12-14, then see {LINK}")
    own = values("Write to bob@partner.example")
    text = f"Bob (bob@partner.example) says the review moved; see {LINK}"
    shown, withheld = withhold(text, dict.fromkeys(untrusted, 4), own)
    assert "bob@partner.example" in shown and "says the review moved" in shown
    assert [w["value"] for w in withheld] == [LINK]


def test_the_latest_source_of_a_value_is_named() -> None:
    _, withheld = withhold(f"see {LINK}", {LINK: 9, "evil.example": 4}, set())
    assert withheld == [{"value": LINK, "kind": "link", "from": 9}]


_label = st.text("abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8)
_value = st.one_of(
    st.builds(lambda h, p: f"https://{h}.example/{p}-x1", _label, _label),
    st.builds(lambda u, h: f"{u}@{h}.example", _label, _label),
    st.builds(lambda a, n: f"{a}{n}", _label, st.integers(1000, 99999).map(str)),
    st.integers(10_000_000, 99_999_999).map(str),
    st.builds(lambda m, d: f"2026-{m:02d}-{d:02d}", st.integers(1, 12), st.integers(1, 28)),
)
_filler = st.sampled_from(["the", "mail", "says", "see", "and", "then", "please", "ok"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_value, min_size=1, max_size=4, unique=True),
    st.lists(_value, max_size=4, unique=True),
    st.lists(_filler, min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_a_withheld_answer_holds_no_untrusted_value_and_every_trusted_one(
    bad: list[str], good: list[str], words: list[str], rnd: object
) -> None:
    good = [g for g in good if not values(g) & values(bad)]  # a value is one or the other
    untrusted = {v for b in bad for v in values(b)}
    own = {v for g in good for v in values(g)}
    pieces = [*bad, *good, *words]
    rnd.shuffle(pieces)  # type: ignore[attr-defined]
    text = " ".join(pieces)
    shown, withheld = withhold(text, dict.fromkeys(untrusted - own, 1), own)
    assert not {v for v in values(shown) if " " not in v} & (untrusted - own), shown
    for g in good:
        assert g in shown, (g, shown)
    assert len(withheld) >= 1


def test_version_2_withholds_values_in_the_forms_people_write_them() -> None:
    """A decimal comma, a date in words and a date-time are withheld whole."""
    source = "Invoice: 1.250,00 EUR due December 20th 2026; call at 2024-05-19 16:00"
    untrusted = {v: 8 for v in values(source, 2)}
    text, withheld = withhold(
        "It is 1.250,00 EUR, due 20 December 2026; call at 2024-05-19 16:00.", untrusted, set(), 2
    )
    assert [w["value"] for w in withheld] == ["1.250,00", "20 December 2026", "2024-05-19 16:00"]
    assert "1.250" not in text and ",00" not in text and "2026" not in text
