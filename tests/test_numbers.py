"""The shared number reader finds numbers in every pack language, with exact spans and kinds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.numbers import number_words, number_words_files
from schemas.scenario import available_scenarios, load_scenario
from session.numbers import NumberLexicon, NumberMention, find_numbers, number_lexicon, price_mentions

JAIPUR = number_lexicon(["en-IN", "hi-EN"])
KYOTO = number_lexicon(["en", "ja-JP"])
MARRAKECH = number_lexicon(["en", "ar-MA", "fr-MA"])
LEXICONS = {"jaipur": JAIPUR, "kyoto": KYOTO, "marrakech": MARRAKECH}


def prices(text: str, lex: NumberLexicon = JAIPUR) -> list[tuple[float, str]]:
    return [(m.value, text[m.start:m.end]) for m in price_mentions(text, lex)]


def only(text: str, lex: NumberLexicon) -> NumberMention:
    found = find_numbers(text, lex)
    assert len(found) == 1, found
    return found[0]


# The vendor's own price statements, the lead's rewriting use: each span exact, nothing around it.
@pytest.mark.parametrize(("text", "expected"), [
    ("No no my friend, 150 rupees now", [(150, "150")]),
    ("Okay okay, 5 rupees only", [(5, "5")]),
    ("ek sau pachaas rupaye", [(150, "ek sau pachaas")]),
    ("डेढ़ सौ रुपये", [(150, "डेढ़ सौ")]),
    ("a hundred and fifty", [(150, "a hundred and fifty")]),
    ("A hundred and fifty, final!", [(150, "A hundred and fifty")]),
    ("Rs. 150 for you, bhaiya.", [(150, "150")]),
    ("Rs.150/- only", [(150, "150")]),
    ("₹1,200", [(1200, "1,200")]),
    ("१५० रुपये", [(150, "१५०")]),
    ("दो सौ पचास रुपये", [(250, "दो सौ पचास")]),
    ("saadhe teen sau", [(350, "saadhe teen sau")]),
    ("paune do sau", [(175, "paune do sau")]),
    ("sava sau rupaye", [(125, "sava sau")]),
    ("dhai sau rupaye", [(250, "dhai sau")]),
    ("ek hazaar", [(1000, "ek hazaar")]),
    ("1.5 lakh", [(150000, "1.5 lakh")]),
    ("1,50,000 rupees", [(150000, "1,50,000")]),
    ("2.5k", [(2500, "2.5k")]),
    ("fifteen hundred", [(1500, "fifteen hundred")]),
    ("one fifty rupees", [(150, "one fifty")]),
    ("twenty-five rupees", [(25, "twenty-five")]),
    ("150, 200, 250", [(150, "150"), (200, "200"), (250, "250")]),
    ("do sau teen sau", [(200, "do sau"), (300, "teen sau")]),
    ("150? No, I'll give 70", [(150, "150"), (70, "70")]),
    ("Only 2 left at 150, take them", [(150, "150")]),
    ("These 3 are the best, 200 each", [(200, "200")]),
])
def test_prices_a_vendor_states_are_found_with_exact_spans(text: str, expected: list[tuple[float, str]]) -> None:
    assert prices(text) == [(float(v), s) for v, s in expected]


@pytest.mark.parametrize(("lex", "text", "value", "span"), [
    ("kyoto", "一万二千円", 12000, "一万二千"),
    ("kyoto", "ichiman nisen en", 12000, "ichiman nisen"),
    ("kyoto", "いちまんにせんえん", 12000, "いちまんにせん"),
    ("kyoto", "1万2千円でどう？", 12000, "1万2千"),
    ("kyoto", "千五百円", 1500, "千五百"),
    ("kyoto", "nisengohyaku en", 2500, "nisengohyaku"),
    ("kyoto", "¥12,000", 12000, "12,000"),
    ("kyoto", "１２０００円", 12000, "１２０００"),
    ("kyoto", "18,000 yen", 18000, "18,000"),
    ("kyoto", "jūman", 100000, "jūman"),
    ("marrakech", "1.5k dirhams?", 1500, "1.5k"),
    ("marrakech", "mya u khamsin", 150, "mya u khamsin"),
    ("marrakech", "khamsa u 3ichrin dh", 25, "khamsa u 3ichrin"),
    ("marrakech", "alf u khams mya", 1500, "alf u khams mya"),
    ("marrakech", "مية و خمسين درهم", 150, "مية و خمسين"),
    ("marrakech", "ميا وخمسين", 150, "ميا وخمسين"),
    ("marrakech", "ألف و خمسمية", 1500, "ألف و خمسمية"),
    ("marrakech", "٣٠٠ درهم", 300, "٣٠٠"),
    ("marrakech", "bkhamsin", 50, "khamsin"),
    ("marrakech", "cent cinquante", 150, "cent cinquante"),
    ("marrakech", "quatre-vingt-dix dirhams", 90, "quatre-vingt-dix"),
    ("marrakech", "soixante et onze", 71, "soixante et onze"),
    ("marrakech", "mille deux cents", 1200, "mille deux cents"),
    ("marrakech", "quinze cents dirhams", 1500, "quinze cents"),
    ("marrakech", "1.500 dh", 1500, "1.500"),
])
def test_numbers_in_each_packs_languages(lex: str, text: str, value: float, span: str) -> None:
    found = only(text, LEXICONS[lex])
    assert (found.value, text[found.start:found.end], found.kind) == (value, span, "amount")


@pytest.mark.parametrize(("lex", "text", "kinds"), [
    ("jaipur", "It's 10 am, I'll come back at 5", [(10, "time"), (5, "time")]),
    ("jaipur", "10:30 baje aaunga", [(10.5, "time")]),
    ("jaipur", "I came here in 2019, on 12/05", [(2019, "date"), (12, "date")]),
    ("jaipur", "call me on 98290 12345", [(9829012345, "phone")]),
    ("jaipur", "+91 98290 12345", [(919829012345, "phone")]),
    ("jaipur", "2 kg for 100?", [(2, "count"), (100, "amount")]),
    ("jaipur", "do kilo ke liye 100 dunga", [(2, "count"), (100, "amount")]),
    ("jaipur", "give me 2 dozen bananas for 80", [(2, "count"), (80, "amount")]),
    ("jaipur", "Sixty percent?", [(60, "percent")]),
    ("jaipur", "half of that", [(0.5, "fraction")]),
    ("jaipur", "1/2 price", [(0.5, "fraction")]),
    ("jaipur", "the 5th shop", [(5, "ordinal")]),
    ("jaipur", "three of them", [(3, "count")]),
    ("kyoto", "How about 70 percent of your price?", [(70, "percent")]),
    ("kyoto", "7割", [(70, "percent")]),
    ("kyoto", "hanbun", [(0.5, "fraction")]),
    ("marrakech", "sb3in f lmya", [(70, "percent")]),
    ("marrakech", "٧٠٪", [(70, "percent")]),
    ("marrakech", "la moitié", [(0.5, "fraction")]),
    ("marrakech", "à 10h je reviens", [(10, "time")]),
])
def test_what_a_number_is_follows_what_stands_beside_it(lex: str, text: str, kinds: list[tuple[float, str]]) -> None:
    assert [(m.value, m.kind) for m in find_numbers(text, LEXICONS[lex])] == [(float(v), k) for v, k in kinds]


@pytest.mark.parametrize(("lex", "text"), [
    ("jaipur", "do you have apples? I'll do so"),
    ("jaipur", "ek minute"),
    ("jaipur", "this one is nice"),
    ("jaipur", "mere sath chalo"),
    ("kyoto", "Tanaka-san, konnichiwa"),
    ("kyoto", "Let's go, man"),
    ("kyoto", "ここにあります"),
    ("marrakech", "un thé à la menthe"),
])
def test_ordinary_words_that_spell_numbers_are_not_read(lex: str, text: str) -> None:
    assert find_numbers(text, LEXICONS[lex]) == []


@pytest.mark.parametrize(("lex", "text"), [
    ("jaipur", "do kilo"), ("jaipur", "It's 10 am"), ("jaipur", "one"), ("jaipur", "five"),
    ("jaipur", "call 9829012345"), ("jaipur", "70 percent"), ("jaipur", "2 kg"),
    ("marrakech", "100 euros"), ("marrakech", "100 ryal"), ("kyoto", "三割引"),
])
def test_non_prices_are_not_price_mentions(lex: str, text: str) -> None:
    assert price_mentions(text, LEXICONS[lex]) == []


def test_a_range_gives_both_ends() -> None:
    assert [m.value for m in find_numbers("100-150 rupees", JAIPUR)] == [100, 150]


def test_a_foreign_currency_is_kept_as_a_unit_not_a_price() -> None:
    found = only("100 euros", MARRAKECH)
    assert (found.kind, found.unit, found.currency) == ("amount", "eur", False)


def test_every_number_file_validates_and_every_pack_language_has_one() -> None:
    files = number_words_files()
    for name in files:
        assert number_words(name).language
    for scenario in available_scenarios():
        for code in load_scenario(scenario).vendor.languages:
            base = code.value.split("-")[0]
            assert code.value in files or base in files, code
        lex = number_lexicon(load_scenario(scenario).vendor.languages)
        assert find_numbers("150 rupees", lex)[0].value == 150


def test_the_lexicon_is_built_once_per_language_set() -> None:
    assert number_lexicon(["hi-EN", "en-IN"]) is number_lexicon(["en-IN", "hi-EN"])


# ---------------------------------------------------------------------------------------------
# Properties: spans re-read to the same value; any text is read without failing.

_EN_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen " \
            "sixteen seventeen eighteen nineteen".split()
_EN_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def english(n: int) -> str:
    def under_100(k: int) -> str:
        return _EN_UNITS[k] if k < 20 else _EN_TENS[k // 10] + ("" if k % 10 == 0 else " " + _EN_UNITS[k % 10])

    def under_1000(k: int) -> str:
        head, rest = divmod(k, 100)
        words = [f"{_EN_UNITS[head]} hundred"] if head else []
        if rest:
            words.append(("and " if head else "") + under_100(rest))
        return " ".join(words)

    thousands, rest = divmod(n, 1000)
    out = [f"{under_1000(thousands)} thousand"] if thousands else []
    if rest:
        out.append(under_1000(rest))
    return " ".join(out)


_HI = number_words("hi").numbers
_HI_LATIN = {int(v): w for w, v in reversed(list(_HI.items())) if w.isascii() and v == int(v)}
_HI_DEVA = {int(v): w for w, v in reversed(list(_HI.items())) if "\u0900" <= w[0] <= "\u097f" and v == int(v)}


def hindi(n: int, words: dict[int, str], sau: str, hazaar: str) -> str:
    thousands, rest = divmod(n, 1000)
    hundreds, rest = divmod(rest, 100)
    out = []
    if thousands:
        out += [words[thousands], hazaar]
    if hundreds:
        out += [words[hundreds], sau]
    if rest:
        out.append(words[rest])
    return " ".join(out)


_KANJI = "〇一二三四五六七八九"


def kanji(n: int) -> str:
    out = ""
    for value, sign in ((10000, "万"), (1000, "千"), (100, "百"), (10, "十")):
        head, n = divmod(n, value)
        if head:
            out += ("" if head == 1 and value < 10000 else (kanji(head) if head >= 10 else _KANJI[head])) + sign
    return out + (_KANJI[n] if n else "")


def digits(n: int, style: int) -> str:
    if style == 1:
        return f"{n:,}"
    if style == 2 and n % 100 == 0 and n >= 1000:
        return f"{n / 1000:g}k"
    return str(n)


amounts = st.integers(1, 99_999)
renderings = st.one_of(
    st.builds(lambda n, s: (n, digits(n, s), "jaipur"), amounts, st.integers(0, 2)),
    st.builds(lambda n: (n, english(n), "jaipur"), amounts),
    st.builds(lambda n: (n, hindi(n, _HI_LATIN, "sau", "hazaar"), "jaipur"), st.integers(1, 99_999)),
    st.builds(lambda n: (n, hindi(n, _HI_DEVA, "सौ", "हज़ार"), "jaipur"), st.integers(1, 99_999)),
    st.builds(lambda n: (n, kanji(n), "kyoto"), amounts),
)
fillers = st.sampled_from(["", "bhaiya", "ok", "how about", "I'll give", "no no,", "final:", "दूंगा", "then?"])
CURRENCIES = {"jaipur": ["rupees", "rupaye", "₹", "Rs.", "रुपये"], "kyoto": ["円", "yen", "¥", "en"]}
currencies = st.sampled_from(["rupees", "rupaye", "₹", "Rs.", "रुपये", "円", "yen"])


@given(renderings, fillers, fillers, st.integers(0, 4), st.booleans())
def test_a_price_written_out_is_found_with_its_value(rendering: tuple[int, str, str], before: str,
                                                    after: str, which: int, sign_first: bool) -> None:
    n, said, lex_name = rendering
    lex = LEXICONS[lex_name]
    currency = CURRENCIES[lex_name][which % len(CURRENCIES[lex_name])]
    money = f"{currency} {said}" if sign_first and currency in ("₹", "Rs.", "¥") else f"{said} {currency}"
    text = " ".join(p for p in (before, money, after) if p)
    found = price_mentions(text, lex)
    assert [(m.value, text[m.start:m.end]) for m in found] == [(n, said)]


@given(st.lists(st.one_of(renderings.map(lambda r: r[1]), fillers, currencies,
                          st.sampled_from(["kg", "percent", "do", "ek", "am", "at", ",", "?", "half", "-"])),
                max_size=8),
       st.sampled_from(sorted(LEXICONS)))
def test_every_span_reads_back_to_its_own_value(parts: list[str], lex_name: str) -> None:
    lex = LEXICONS[lex_name]
    text = " ".join(parts)
    for mention in find_numbers(text, lex):
        span = text[mention.start:mention.end]
        assert span == span.strip() and span[-1] not in ",.?!" and span[0] not in ",.?!"
        again = find_numbers(span, lex) or find_numbers(f"{span} rupees", lex)  # a weak word needs its currency
        assert len(again) == 1
        assert again[0].value * (mention.percent_scale / again[0].percent_scale) == mention.value
        assert (again[0].start, again[0].end) == (0, len(span))


@given(st.text(max_size=300), st.sampled_from(sorted(LEXICONS)))
def test_any_text_is_read_without_failing(text: str, lex_name: str) -> None:
    for mention in find_numbers(text, LEXICONS[lex_name]):
        assert 0 <= mention.start < mention.end <= len(text)
        assert mention.kind in ("amount", "percent", "fraction", "time", "date", "phone", "count", "ordinal")


def test_every_price_a_packs_vendor_line_states_is_found_with_its_exact_span() -> None:
    """The reply check rewrites the prices a vendor states: in every line of every pack that names
    `{price}`, that price is a price mention whose span is just its digits."""
    from schemas.lines import say

    checked = 0
    for pack in available_scenarios():
        scenario = load_scenario(pack)
        lex = number_lexicon(scenario.vendor.languages)
        for language, pools in scenario.lines.items():
            for key, pool in pools.items():
                for index, template in enumerate(pool):
                    if "{price}" not in template:
                        continue
                    for item in (*scenario.items, None):
                        text = say(scenario, language, key, index, item, price=1234, offer=999, qty=2,
                                   heard="seventy", last_items="tomatoes")
                        spans = [text[m.start:m.end] for m in price_mentions(text, lex) if m.value == 1234]
                        assert spans and set(spans) == {"1234"}, text
                        checked += 1
    assert checked > 1000
