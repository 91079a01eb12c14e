"""Find the learner's price offer in a transcript, and judge it against the vendor's quote.

Learners say prices in digits ("150", "₹150", "Rs. 150", "150 rupees"), in English words ("two
hundred") and in Hindi or Hinglish ("do sau", "paanch sau pachaas", "dedh sau"). Quantities
("do kilo", "2 kg") are not prices. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.enums import OfferAssessment
from schemas.pack import OfferBands

INSULT_BELOW = 0.25  # an offer under a quarter of the quote is an insult (seed 000)
LOWBALL_BELOW = 0.40  # 25-40 % of the quote is a lowball (seed 000)
FAIR_BELOW = 0.70
GOOD_BELOW = 0.90

_UNITS = {
    # Hindi / Hinglish, with common romanisations
    "ek": 1, "do": 2, "teen": 3, "tin": 3, "char": 4, "chaar": 4, "paanch": 5, "panch": 5,
    "paach": 5, "chhe": 6, "chhah": 6, "che": 6, "cheh": 6, "saat": 7, "aath": 8, "aath.": 8,
    "nau": 9, "das": 10, "dus": 10, "gyarah": 11, "barah": 12, "baarah": 12, "terah": 13,
    "chaudah": 14, "pandrah": 15, "pandrah.": 15, "solah": 16, "satrah": 17, "atharah": 18,
    "unnis": 19, "bees": 20, "bis": 20, "pachees": 25, "pachchis": 25, "pachis": 25,
    "tees": 30, "tis": 30, "paintees": 35, "pentis": 35, "chaalis": 40, "chalis": 40,
    "paintalis": 45, "pachaas": 50, "pachas": 50, "pachpan": 55, "saath": 60, "sath": 60,
    "painsath": 65, "sattar": 70, "pachattar": 75, "pachhattar": 75, "assi": 80, "assee": 80,
    "pachasi": 85, "nabbe": 90, "nabbey": 90, "pachanave": 95,
    # English
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}
_FRACTIONS = {"dedh": 1.5, "dhai": 2.5, "adhai": 2.5}  # "dedh sau" = 150, "dhai sau" = 250
_SAADHE = {"saadhe", "sadhe"}  # "saadhe teen sau" = 350
_MULTIPLIERS = {"sau": 100, "so": 100, "hundred": 100, "hazaar": 1000, "hazar": 1000, "thousand": 1000}
_CURRENCY_WORDS = {"rupees", "rupee", "rupaye", "rupaiye", "rupay", "rs", "inr", "₹", "bucks",
                   "yen", "jpy", "¥", "dirham", "dirhams", "dh", "dhs"}
_QUANTITY_WORDS = {
    "kilo", "kilos", "kg", "kgs", "gram", "grams", "dozen", "darjan", "piece", "pieces",
    "pcs", "items", "minute", "minutes", "din", "days", "saal", "years", "baje",
}
# Words that make a small bare number a quantity rather than a price ("do tomato do").
_SMALL_WORDS_NEED_CONTEXT = {"do", "so", "che", "tin", "bis", "tis", "sath", "one", "ek"}
_OFFER_CUES = {"give", "pay", "offer", "doonga", "dunga", "dungi", "lunga", "loonga", "for",
               "mein", "me", "karo", "kar", "final", "last", "how", "about", "accept"}

_TOKEN = re.compile(r"₹|¥|\d[\d,]*(?:\.\d+)?|[a-z]+\.?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Candidate:
    value: int
    start: int  # token index where it begins
    end: int  # token index after it
    explicit: bool  # had a currency marker or a multiplier


def _tokens(text: str) -> list[str]:
    return [t.lower().rstrip(".") if t != "₹" else t for t in _TOKEN.findall(text.replace("rs.", "rs "))]


def _read_words(tokens: list[str], i: int) -> tuple[int, int, bool] | None:
    """Read a spelled-out number starting at token i: (value, next index, had multiplier)."""
    total = 0
    current = 0.0
    j = i
    seen = False
    multiplied = False
    half_more = False
    while j < len(tokens):
        tok = tokens[j]
        if tok in _SAADHE and not seen:
            half_more = True
        elif tok in _FRACTIONS and current == 0:
            current = _FRACTIONS[tok]
            seen = True
        elif tok in _UNITS:
            tens_then_unit = current and current < 100 and current % 10 == 0 and _UNITS[tok] < 10
            if tens_then_unit and tok not in _SMALL_WORDS_NEED_CONTEXT:
                current += _UNITS[tok]  # "twenty five"
            elif current:
                break
            else:
                current = _UNITS[tok] + (0.5 if half_more else 0)
            seen = True
        elif tok in _MULTIPLIERS and (seen or tok in ("hundred", "thousand", "hazaar", "hazar")):
            if tok in ("so",) and not seen:
                break
            mult = _MULTIPLIERS[tok]
            base = current or 1
            if mult == 1000:
                total = int((total + base) * 1000)
                current = 0
            else:
                total += int(base * mult)
                current = 0
            seen = True
            multiplied = True
        elif tok == "and" and seen and multiplied:
            pass  # "a hundred and fifty"
        elif tok == "a" and not seen and j + 1 < len(tokens) and tokens[j + 1] in ("hundred", "thousand"):
            current = 1
        else:
            break
        j += 1
    if not seen:
        return None
    return int(total + current), j, multiplied


def _candidates(tokens: list[str]) -> list[_Candidate]:
    found: list[_Candidate] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        value: int | None = None
        end = i + 1
        multiplied = False
        if tok[0].isdigit():
            try:
                value = int(float(tok.replace(",", "")))
            except ValueError:
                value = None
            if value is not None and end < len(tokens) and tokens[end] in _MULTIPLIERS:
                value *= _MULTIPLIERS[tokens[end]]
                end += 1
                multiplied = True
        else:
            read = _read_words(tokens, i)
            if read is not None:
                value, end, multiplied = read
        if value is None:
            i += 1
            continue
        before = tokens[i - 1] if i > 0 else ""
        after = tokens[end] if end < len(tokens) else ""
        if after in _QUANTITY_WORDS:
            i = end
            continue
        currency = before in _CURRENCY_WORDS or after in _CURRENCY_WORDS
        if not tok[0].isdigit() and not (multiplied or currency):
            # A bare small word ("do", "ek") is far more often grammar than a price.
            if value < 10 or tok in _SMALL_WORDS_NEED_CONTEXT:
                i = end
                continue
        if value > 0:
            found.append(_Candidate(value, i, end, currency or multiplied))
        i = end
    return found


def parse_offer(text: str, current_quote: int | None = None) -> int | None:
    """The price the learner offers in `text`, or None when they name no price.

    Where several prices appear, one that merely repeats the vendor's quote is passed over, a
    number right after an offer cue ("I'll give 200") wins, and otherwise the last one counts.
    """
    tokens = _tokens(text)
    found = _candidates(tokens)
    if not found:
        return None
    if current_quote is not None and len(found) > 1:
        others = [c for c in found if c.value != current_quote]
        found = others or found
    for cand in found:
        if cand.start > 0 and tokens[cand.start - 1] in _OFFER_CUES:
            return cand.value
        if cand.start > 1 and tokens[cand.start - 1] in _CURRENCY_WORDS and tokens[cand.start - 2] in _OFFER_CUES:
            return cand.value
    return found[-1].value


def assess_offer(offer: int | None, quote: int | None, bands: OfferBands | None = None) -> OfferAssessment:
    """Judge an offer by its share of the vendor's current quote: the scenario pack's bands, or
    the seed's (under 25 % an insult, under 40 % a lowball) and ours above them."""
    if offer is None or not quote:
        return OfferAssessment.NONE
    ratio = offer / quote
    insult, lowball, fair, good = (
        (INSULT_BELOW, LOWBALL_BELOW, FAIR_BELOW, GOOD_BELOW) if bands is None
        else (bands.insult_below, bands.lowball_below, bands.fair_below, bands.good_below)
    )
    if ratio < insult:
        return OfferAssessment.INSULT
    if ratio < lowball:
        return OfferAssessment.LOWBALL
    if ratio < fair:
        return OfferAssessment.FAIR
    if ratio < good:
        return OfferAssessment.GOOD
    return OfferAssessment.EXCELLENT
