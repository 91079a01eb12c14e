"""The server reads the learner's offer itself: digits, currency marks, English and Hindi words.

The labelled corpus across every pack and language is tests/test_offer_corpus.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.enums import OfferAssessment
from schemas.numbers import number_words
from schemas.scenario import load_scenario
from session.numbers import NumberLexicon, number_lexicon
from session.offers import OfferReading, assess_offer, assess_reading, parse_offer, read_offer
from tests.test_offer_corpus import PACK_LANGUAGES, PACK_OF, UTTERANCES, Utterance


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


# ---------------------------------------------------------------------------------------------
# Properties of the offer reader over every pack (issue 40).

PACKS = {
    "jaipur-bazaar": ("kg", ["{p} percent", "{p}%", "{p} percent of your price", "how about {p} per cent?",
                             "{p} pratishat", "{p} प्रतिशत", "{w} percent"]),
    "kyoto-antiques": ("piece", ["{p} percent", "{p}%", "Would you take {p} percent of that?", "{p}パーセントで",
                                 "{w} percent?"]),
    "marrakech-souk": ("piece", ["{p} percent", "{p}%", "{p} pour cent", "{p} f lmya", "{w} percent, my friend"]),
}
OFF_FORMS = {
    "jaipur-bazaar": ["{p}% off", "{p} percent off", "{p} percent kam karo", "{p}% discount", "{w} percent off"],
    "kyoto-antiques": ["{p}% off", "{p} percent off?", "Could you take {p} percent off?", "{p}パーセント引きで"],
    "marrakech-souk": ["{p}% off", "{p} pour cent de réduction", "{p}% de moins", "{w} percent less"],
}
FRACTIONS = {
    "jaipur-bazaar": [("half", 0.5), ("half of that", 0.5), ("aadha", 0.5), ("आधा", 0.5), ("a quarter of that", 0.25)],
    "kyoto-antiques": [("half", 0.5), ("hanbun", 0.5), ("半分", 0.5), ("a third of that", 1 / 3)],
    "marrakech-souk": [("half", 0.5), ("la moitié", 0.5), ("nss", 0.5), ("نص", 0.5), ("a quarter", 0.25)],
}
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_UNITS = ("_ one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
          "seventeen eighteen nineteen").split()


def _english(n: int) -> str:
    return _UNITS[n] if n < 20 else _TENS[n // 10] + ("" if n % 10 == 0 else f" {_UNITS[n % 10]}")


def _lexicon(pack: str) -> NumberLexicon:
    return number_lexicon(load_scenario(pack).vendor.languages)


@given(st.sampled_from(sorted(PACKS)), st.integers(100, 50_000), st.integers(1, 99), st.integers(0, 6),
       st.booleans())
def test_a_share_of_the_quote_is_an_insult_only_when_it_is_one(pack: str, quote: int, pct: int, which: int,
                                                              off: bool) -> None:
    unit, forms = PACKS[pack]
    forms = OFF_FORMS[pack] if off else forms
    bands = load_scenario(pack).rules.offer_bands
    text = forms[which % len(forms)].format(p=pct, w=_english(pct))
    reading = read_offer(text, quote, _lexicon(pack), unit=unit)
    share = (100 - pct) / 100 if off else pct / 100
    price = round(quote * (100 - pct if off else pct) / 100)
    assert reading is not None and reading.sure, (text, reading)
    assert reading.price == price, text
    label = assess_reading(reading, quote, bands)
    assert label is assess_offer(price, quote, bands)
    if share >= bands.insult_below + 0.01:
        assert label is not OfferAssessment.INSULT, text


@given(st.sampled_from(sorted(FRACTIONS)), st.integers(100, 50_000), st.integers(0, 4))
def test_a_fraction_of_the_quote_is_read_as_that_share(pack: str, quote: int, which: int) -> None:
    said, share = FRACTIONS[pack][which % len(FRACTIONS[pack])]
    bands = load_scenario(pack).rules.offer_bands
    reading = read_offer(f"Could you do {said}?", quote, _lexicon(pack), unit=PACKS[pack][0])
    assert reading is not None and reading.price == round(quote * share)
    insult = assess_reading(reading, quote, bands) is OfferAssessment.INSULT
    assert insult == (round(quote * share) / quote < bands.insult_below)


def test_ten_percent_is_an_insult_where_it_is_one() -> None:
    reading = read_offer("10 percent of your price", 18_000, _lexicon("kyoto-antiques"), unit="piece")
    assert assess_reading(reading, 18_000, load_scenario("kyoto-antiques").rules.offer_bands) is OfferAssessment.INSULT


def _same(a: OfferReading | None, b: OfferReading | None) -> bool:
    sure_a = a.price if a is not None and a.sure else None
    sure_b = b.price if b is not None and b.sure else None
    return sure_a == sure_b


@given(st.sampled_from(UTTERANCES), st.sampled_from(["", "?", "!", ".", "??", " ?", "!!"]))
def test_the_reading_is_the_same_with_or_without_end_punctuation(u: Utterance, end: str) -> None:
    bare = u.text.rstrip("?!. \uff1f\uff01\u3002")
    if bare.lower().endswith(("rs", "dhs")):
        return  # "Rs." keeps its dot
    lexicon = number_lexicon(PACK_LANGUAGES[PACK_OF[u.language]])
    first = read_offer(bare, u.quote, lexicon, unit=u.unit, last_offer=u.last_offer)
    again = read_offer(bare + end, u.quote, lexicon, unit=u.unit, last_offer=u.last_offer)
    assert _same(first, again), (bare, end, first, again)
    with_quote = read_offer(f'"{bare}"', u.quote, lexicon, unit=u.unit, last_offer=u.last_offer)
    assert _same(first, with_quote)


_HI_LATIN = {v: w for w, v in reversed(list(number_words("hi").numbers.items()))
             if w.isascii() and v == int(v)}
_HI_DEVA = {v: w for w, v in reversed(list(number_words("hi").numbers.items()))
            if "\u0900" <= w[0] <= "\u097f" and v == int(v)}


def _hindi(n: int, words: dict[float, str], sau: str, hazaar: str) -> str:
    thousands, rest = divmod(n, 1000)
    hundreds, rest = divmod(rest, 100)
    out = [f"{words[thousands]} {hazaar}"] if thousands else []
    out += [f"{words[hundreds]} {sau}"] if hundreds else []
    return " ".join(out + ([words[rest]] if rest else []))


_DARIJA_HUNDREDS = {1: ("mya", "مية"), 2: ("mitin", "ميتين"), 3: ("tlatmya", "تلتمية"), 4: ("rb3mya", "ربعمية"),
                    5: ("khamsmya", "خمسمية"), 6: ("settmya", "ستمية"), 7: ("sb3mya", "سبعمية"),
                    8: ("tmenmya", "تمنمية"), 9: ("ts3mya", "تسعمية")}
_DARIJA_TENS = {2: ("3ichrin", "عشرين"), 3: ("tlatin", "تلاتين"), 4: ("rb3in", "ربعين"), 5: ("khamsin", "خمسين"),
                6: ("settin", "ستين"), 7: ("sb3in", "سبعين"), 8: ("tmanin", "تمانين"), 9: ("ts3in", "تسعين")}
_DARIJA_UNITS = {1: ("wahed", "واحد"), 2: ("jouj", "جوج"), 3: ("tlata", "تلاتة"), 4: ("rb3a", "ربعة"),
                 5: ("khamsa", "خمسة"), 6: ("stta", "ستة"), 7: ("seb3a", "سبعة"), 8: ("tmenya", "تمنية"),
                 9: ("tes3a", "تسعة")}


def _darija(n: int, script: int) -> str:
    hundreds, rest = divmod(n, 100)
    tens, units = divmod(rest, 10)
    parts = [_DARIJA_HUNDREDS[hundreds][script]]
    join = (" u ", " و ")[script]
    if tens >= 2:
        low = _DARIJA_TENS[tens][script]
        if units:
            low = _DARIJA_UNITS[units][script] + join + low
        parts.append(low)
    return join.join(parts)


@given(st.integers(1, 9_999))
def test_hindi_reads_the_same_in_either_script(n: int) -> None:
    lexicon = _lexicon("jaipur-bazaar")
    latin = read_offer(f"{_hindi(n, _HI_LATIN, 'sau', 'hazaar')} rupaye dunga", 20_000, lexicon)
    deva = read_offer(f"{_hindi(n, _HI_DEVA, 'सौ', 'हज़ार')} रुपये दूंगा", 20_000, lexicon)
    assert latin is not None and deva is not None
    assert (latin.price, latin.sure) == (deva.price, deva.sure) == (n, True)


@given(st.integers(100, 999).filter(lambda n: n % 100 == 0 or n % 100 >= 20))
def test_darija_reads_the_same_in_either_script(n: int) -> None:
    lexicon = _lexicon("marrakech-souk")
    latin = read_offer(f"{_darija(n, 0)} dh", 1_000, lexicon, unit="piece")
    arabic = read_offer(f"{_darija(n, 1)} درهم", 1_000, lexicon, unit="piece")
    assert latin is not None and arabic is not None
    assert (latin.price, latin.sure) == (arabic.price, arabic.sure) == (n, True)


_KANJI = "〇一二三四五六七八九"
_ROMAJI = ["", "ichi", "ni", "san", "yon", "go", "roku", "nana", "hachi", "kyuu"]
_ROMAJI_PLACES = {10: "juu", 100: "hyaku", 1000: "sen"}
_ROMAJI_IRREGULAR = {300: "sanbyaku", 600: "roppyaku", 800: "happyaku", 3000: "sanzen", 8000: "hassen"}


def _kanji(n: int) -> str:
    man, n = divmod(n, 10_000)
    out = (_kanji(man) + "万") if man else ""
    for place, sign in ((1000, "千"), (100, "百"), (10, "十")):
        head, n = divmod(n, place)
        if head:
            out += ("" if head == 1 else _KANJI[head]) + sign
    return out + (_KANJI[n] if n else "")


def _romaji(n: int) -> str:
    man, n = divmod(n, 10_000)
    out = [f"{_romaji(man)}man"] if man else []
    for place in (1000, 100, 10):
        head, n = divmod(n, place)
        if head:
            out.append(_ROMAJI_IRREGULAR.get(head * place)
                       or ("" if head == 1 else _ROMAJI[head]) + _ROMAJI_PLACES[place])
    if n:
        out.append(_ROMAJI[n])
    return " ".join(out)


@given(st.integers(1, 99_999))
def test_japanese_reads_the_same_in_kanji_and_romaji(n: int) -> None:
    lexicon = _lexicon("kyoto-antiques")
    kanji = read_offer(f"{_kanji(n)}円で", 100_000, lexicon, unit="piece")
    romaji = read_offer(f"{_romaji(n)} en de", 100_000, lexicon, unit="piece")
    assert kanji is not None and romaji is not None
    assert (kanji.price, kanji.sure) == (romaji.price, romaji.sure) == (n, True), (_kanji(n), _romaji(n))
