"""The server reads the learner's offer itself: digits, currency marks, English and Hindi words.

The labelled corpus across every pack and language is tests/test_offer_corpus.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.enums import OfferAssessment
from session.offers import assess_offer, parse_offer


@pytest.mark.parametrize(("text", "offer"), [
    ("I'll give you 40", 40),
    ("₹150", 150),
    ("Rs. 80 for 2 kg", 40),  # per kilo, as the quote is
    ("Rs150", 150),
    ("150 rupees", 150),
    ("1,200 rupees for the shawl", 1200),
    ("do sau", 200),
    ("paanch sau pachaas", 550),
    ("dedh sau", 150),
    ("dhai sau rupaye", 250),
    ("saadhe teen sau", 350),
    ("ek hazaar", 1000),
    ("pachaas rupaye", 50),
    ("bhaiya chalis mein de do", 40),
    ("a hundred and fifty", 150),
    ("how about fifty", 50),
    ("twenty five rupees", 25),
    ("150 is too much, I will pay 60", 60),
    ("3 kilo for 200", 67),
    ("150 rupees a kilo", 150),
])
def test_offers_are_read(text: str, offer: int) -> None:
    assert parse_offer(text, current_quote=150) == offer


@pytest.mark.parametrize("text", [
    "hello bhaiya",
    "do you have apples?",
    "do kilo le raha hoon, kitne mein doge?",
    "I want 2 kg",
    "ek minute",
    "",
])
def test_no_offer_is_read_where_none_is_made(text: str) -> None:
    assert parse_offer(text, current_quote=150) is None


def test_repeating_the_quote_is_not_the_offer() -> None:
    assert parse_offer("150? No, I'll give 70", current_quote=150) == 70
    assert parse_offer("70 not 150", current_quote=150) == 70


@pytest.mark.parametrize(("offer", "quote", "label"), [
    (30, 150, OfferAssessment.INSULT),  # 20 %
    (37, 150, OfferAssessment.INSULT),  # 24.7 %
    (38, 150, OfferAssessment.LOWBALL),  # 25.3 %
    (59, 150, OfferAssessment.LOWBALL),  # 39 %
    (60, 150, OfferAssessment.FAIR),  # 40 %
    (110, 150, OfferAssessment.GOOD),
    (140, 150, OfferAssessment.EXCELLENT),
    (None, 150, OfferAssessment.NONE),
    (50, None, OfferAssessment.NONE),
])
def test_assessment_bands(offer: int | None, quote: int | None, label: OfferAssessment) -> None:
    assert assess_offer(offer, quote) is label


@given(st.integers(1, 99_999))
def test_any_amount_in_digits_with_a_currency_mark_is_read(amount: int) -> None:
    for text in (f"₹{amount}", f"Rs {amount}", f"{amount} rupees", f"I'll pay {amount}"):
        assert parse_offer(text) == amount


@given(st.text(max_size=200))
def test_parsing_never_fails_on_arbitrary_text(text: str) -> None:
    result = parse_offer(text)
    assert result is None or result > 0
