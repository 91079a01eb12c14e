"""The labelled offer corpus: what learners say across the three packs and all their languages,
and what a person would take them to offer (tests/data/offer_corpus.txt says the format).

Clear offers must be read exactly; ambiguous ones either rightly or not at all; non-offers not at
all. Never a wrong price. `python -m tests.test_offer_corpus` prints the per-language table that
docs/scenarios.md quotes.
"""

from __future__ import annotations

import pathlib
from collections import Counter
from dataclasses import dataclass

import pytest

from session.numbers import number_lexicon
from session.offers import OfferReading, read_offer

CORPUS = pathlib.Path(__file__).resolve().parent / "data" / "offer_corpus.txt"
PACK_LANGUAGES = {
    "jaipur-bazaar": ("en-IN", "hi-EN"),
    "kyoto-antiques": ("en", "ja-JP"),
    "marrakech-souk": ("en", "ar-MA", "fr-MA"),
}
PACK_OF = {
    "en-IN": "jaipur-bazaar", "hi-Latn": "jaipur-bazaar", "hi-Deva": "jaipur-bazaar", "mix-IN": "jaipur-bazaar",
    "en-JP": "kyoto-antiques", "ja-Kanji": "kyoto-antiques", "ja-Kana": "kyoto-antiques",
    "ja-Latn": "kyoto-antiques",
    "en-MA": "marrakech-souk", "fr": "marrakech-souk", "ar-Arab": "marrakech-souk", "ar-Latn": "marrakech-souk",
    "mix-MA": "marrakech-souk",
}


@dataclass(frozen=True, slots=True)
class Utterance:
    language: str
    quote: int
    unit: str
    last_offer: int | None
    expected: str
    text: str

    @property
    def kind(self) -> str:
        return "none" if self.expected == "-" else "ambiguous" if self.expected.startswith("?") else "clear"

    def read(self) -> OfferReading | None:
        lexicon = number_lexicon(PACK_LANGUAGES[PACK_OF[self.language]])
        return read_offer(self.text, self.quote, lexicon, unit=self.unit, last_offer=self.last_offer)

    def judge(self) -> str:
        """"right", "none" (nothing read) or "wrong"."""
        reading = self.read()
        price = reading.price if reading is not None and reading.sure else None
        if price is None:
            return "none"
        if self.kind == "clear" and price == int(self.expected):
            return "right"
        if self.kind == "ambiguous" and self.expected[1:] and price == int(self.expected[1:]):
            return "right"
        return "wrong"


def load() -> list[Utterance]:
    out = []
    for line in CORPUS.read_text("utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        language, quote, unit, last, expected, text = line.split("|", 5)
        out.append(Utterance(language, int(quote), unit, int(last) if last else None, expected, text))
    return out


UTTERANCES = load()


def test_the_corpus_is_large_and_covers_every_pack_language() -> None:
    assert len(UTTERANCES) >= 300
    assert sum(u.kind == "none" for u in UTTERANCES) >= 50
    assert {u.language for u in UTTERANCES} == set(PACK_OF)


@pytest.mark.parametrize("u", [u for u in UTTERANCES if u.kind == "clear"], ids=lambda u: f"{u.language}:{u.text}")
def test_a_clear_offer_is_read_exactly(u: Utterance) -> None:
    reading = u.read()
    assert reading is not None and reading.sure, reading
    assert reading.price == int(u.expected), reading


@pytest.mark.parametrize("u", [u for u in UTTERANCES if u.kind == "ambiguous"], ids=lambda u: f"{u.language}:{u.text}")
def test_an_ambiguous_offer_is_read_rightly_or_not_at_all(u: Utterance) -> None:
    assert u.judge() in ("right", "none"), u.read()


@pytest.mark.parametrize("u", [u for u in UTTERANCES if u.kind == "none"], ids=lambda u: f"{u.language}:{u.text}")
def test_a_line_that_makes_no_offer_gives_none(u: Utterance) -> None:
    assert u.judge() == "none", u.read()


def figures() -> dict[str, Counter[str]]:
    table: dict[str, Counter[str]] = {}
    for u in UTTERANCES:
        table.setdefault(u.language, Counter())[f"{u.kind}:{u.judge()}"] += 1
    return table


if __name__ == "__main__":
    print("| language | utterances | clear offers read exactly | ambiguous: right / none / wrong | "
          "no offer: none / wrong |")
    print("| --- | --- | --- | --- | --- |")
    for language, c in figures().items():
        clear = c["clear:right"] + c["clear:none"] + c["clear:wrong"]
        print(f"| {language} | {sum(c.values())} | {c['clear:right']}/{clear} | "
              f"{c['ambiguous:right']} / {c['ambiguous:none']} / {c['ambiguous:wrong']} | "
              f"{c['none:none']} / {c['none:wrong']} |")
