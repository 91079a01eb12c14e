"""Read the learner's offer as a person would, and judge it against the vendor's quote.

The numbers come from the shared number reader (`session/numbers.py`), in every language the pack
speaks. This module decides which of them is the offer and what it means:

- an absolute price ("150", "₹150", "ek sau pachaas", "一万二千円", "1.5k dirhams");
- a price relative to the standing quote: a percentage ("70 percent of your price", "30% off"),
  a fraction ("half", "aadha", "hanbun"), an amount off ("a hundred less", "100 kam karo"), or
  halfway between the quote and the learner's last offer ("meet me in the middle");
- per unit: "2 kg for 100" is 50 a kilo when the quote is per kilo; "100 a kilo" already is;
- a range ("100 to 150") is read at its top, the reading that never makes an offer worse.

Every reading has a confidence. It is unsure when two different prices compete, when a bare
number is far from the quote ("70" against 18,000: seventy yen, or seventy percent?), when a
quantity is in a unit the item is not sold by, or when a relative offer has nothing to be relative
to. An unsure reading is judged `none`, so no insult clamp fires on it, and the vendor asks what was
meant. Pure functions, no I/O.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from schemas.enums import OfferAssessment
from schemas.pack import OfferBands
from session.numbers import NumberLexicon, NumberMention, Word, number_lexicon, read_numbers

__all__ = [
    "DEFAULT_LANGUAGES",
    "SURE",
    "OfferReading",
    "assess_offer",
    "assess_reading",
    "parse_offer",
    "read_offer",
    "reading_fields",
]

INSULT_BELOW = 0.25  # an offer under a quarter of the quote is an insult (seed 000)
LOWBALL_BELOW = 0.40  # 25-40 % of the quote is a lowball (seed 000)
FAIR_BELOW = 0.70
GOOD_BELOW = 0.90

SURE = 0.8
"""A reading at least this sure is the offer; below it the offer is judged `none` and asked about."""
FAR_BELOW, FAR_ABOVE = 0.1, 3.0
"""A bare number (no currency, no multiplier) outside this share of the quote is far from it:
more likely a percentage, a quantity or a slip than a price."""
DEFAULT_LANGUAGES = ("en-IN", "hi-EN")  # the default scenario's (Jaipur)

# How many of the item's units one said unit is. A unit not listed for the item's unit cannot be
# placed ("2 kg" of a lamp sold by the piece). `None` is a plain count ("two for 100").
_UNIT_SIZES: dict[str, dict[str | None, float]] = {
    "kg": {"kg": 1.0, "g": 0.001, "paav": 0.25},
    "dozen": {"dozen": 1.0, "piece": 1 / 12},
    "piece": {"piece": 1.0, "dozen": 12.0, None: 1.0, "pair": 2.0},
    "pair": {"pair": 1.0, None: 1.0},
    "bottle": {"bottle": 1.0, "piece": 1.0, None: 1.0},
    "l": {"l": 1.0},
}
_LINKS = frozenset({"ka", "ki", "ke", "का", "की", "के", "of", "de", "d", "dyal", "ta3", "no", "の"})
_CLAUSE_END = re.compile("[?!\u3002\uff1f\uff01]|\\.(?=\\s)")


@dataclass(frozen=True, slots=True)
class OfferReading:
    """What the learner offered, as the engine understood it."""

    price: int | None
    """The offer per the item's unit, in the pack's currency; None when no price could be settled."""
    confidence: float
    read_from: str
    """The words the offer was read from, as the learner wrote them ("70 percent")."""
    how: str
    """"price", "percent", "percent_off", "fraction", "fraction_off", "less", "middle", "per_unit",
    "range"."""
    heard: str
    """The number as said ("seventy"), for a line that asks what was meant."""
    why: str = ""
    """Why it is unsure: "two_prices", "far_from_quote", "unit", "currency", "no_quote",
    "no_last_offer", "percent", "too_much_off"."""

    @property
    def sure(self) -> bool:
        return self.price is not None and self.confidence >= SURE


def reading_fields(reading: OfferReading | None) -> dict[str, str | float | bool]:
    """What a brain is told of the reading (`BrainRequest`'s offer_* fields)."""
    if reading is None:
        return {"offer_read_from": "", "offer_heard": "", "offer_confidence": 0.0, "offer_unsure": False}
    return {"offer_read_from": reading.read_from, "offer_heard": reading.heard,
            "offer_confidence": reading.confidence, "offer_unsure": not reading.sure}


@dataclass(frozen=True, slots=True)
class _Context:
    text: str
    quote: int | None
    unit: str | None
    last_offer: int | None
    lex: NumberLexicon
    all_words: list[Word]
    starts: list[int]
    around: dict[tuple[int, int, bool], list[Word]] = field(default_factory=dict)  # _after/_before, remembered

    def words(self, start: int = 0, end: int | None = None) -> list[Word]:
        """The words that lie within `text[start:end]`, as the number reader cut them."""
        stop = len(self.text) if end is None else end
        lo = bisect.bisect_left(self.starts, start)
        hi = bisect.bisect_left(self.starts, stop, lo)
        return [w for w in self.all_words[lo:hi] if w.end <= stop]


def _clause(text: str, mention: NumberMention) -> tuple[int, int]:
    """The bounds of the sentence a number stands in (a decimal point or "Rs." does not end one)."""
    lo = 0
    for m in _CLAUSE_END.finditer(text, 0, mention.start):
        lo = m.end()
    nxt = _CLAUSE_END.search(text, mention.end)
    return lo, nxt.start() if nxt else len(text)


def _after(ctx: _Context, m: NumberMention) -> list[Word]:
    """The words after a number in its sentence, currency and percent words skipped."""
    key = (m.start, m.end, True)
    if key not in ctx.around:
        ctx.around[key] = _words_after(ctx, m)
    return ctx.around[key]


def _words_after(ctx: _Context, m: NumberMention) -> list[Word]:
    _, hi = _clause(ctx.text, m)
    words = ctx.words(m.end, hi)
    while words:
        keys = [w.key for w in words]
        skip = max(ctx.lex.phrase_at(keys, "percent"), 1 if _is_money(ctx.lex, keys[0]) else 0)
        if not skip:
            break
        words = words[skip:]
    return words


def _before(ctx: _Context, m: NumberMention) -> list[Word]:
    key = (m.start, m.end, False)
    if key not in ctx.around:
        ctx.around[key] = _words_before(ctx, m)
    return ctx.around[key]


def _words_before(ctx: _Context, m: NumberMention) -> list[Word]:
    lo, _ = _clause(ctx.text, m)
    words = ctx.words(lo, m.start)
    while words and _is_money(ctx.lex, words[-1].key):
        words = words[:-1]
    return words


def _is_money(lex: NumberLexicon, key: str) -> bool:
    return lex.get(key, "currency") is not None or key in (".", "/-")


def _keys(words: Sequence[Word]) -> list[str]:
    return [w.key for w in words]


def _glued_less(ctx: _Context, at: int) -> int:
    """The end of a "less" cue written onto what precedes it (三割引), or -1."""
    rest = ctx.text[at:at + 8]
    for key in ctx.lex.glued_cues.get("less_after", ()):
        if rest.startswith(key):
            return at + len(key)
    return -1


def _less_after(ctx: _Context, after: list[Word]) -> int:
    """How many words after a number say "off the quote" (one linking word allowed first)."""
    keys = _keys(after)
    size = ctx.lex.phrase_at(keys, "less_after")
    if not size and keys and keys[0] in _LINKS:
        size = ctx.lex.phrase_at(keys[1:], "less_after")
        return size + 1 if size else 0
    return size


def _less_before(ctx: _Context, before: list[Word]) -> bool:
    return ctx.lex.phrase_at(_keys(before), "less_before", backwards=True) > 0


def _span(ctx: _Context, start: int, end: int) -> str:
    return ctx.text[start:end]


def _relative(ctx: _Context, m: NumberMention) -> OfferReading | None:
    """A percentage, a fraction or an amount off the quote, or None when `m` is none of them."""
    after = _after(ctx, m)
    before = _before(ctx, m)
    off_words = _less_after(ctx, after)
    glued_off = _glued_less(ctx, max(m.end, m.beside_end))
    off = bool(off_words) or glued_off >= 0 or _less_before(ctx, before)
    end = after[off_words - 1].end if off_words else max(m.end, glued_off)
    if m.kind == "percent":
        # the percent word itself ends the span when nothing follows it
        pct_end = _percent_end(ctx, m)
        end = max(end, pct_end)
        share = m.value / 100
        how = "percent_off" if off else "percent"
        if not 0 < share < 1:
            return _unsure(ctx, m, end, how, "percent")
    elif m.kind == "fraction" and m.unit is None:
        share = m.value
        how = "fraction_off" if off else "fraction"
    elif m.kind == "amount" and m.unit is None and off:
        if ctx.quote is None:
            return _unsure(ctx, m, end, "less", "no_quote")
        if m.value >= ctx.quote:
            return _unsure(ctx, m, end, "less", "too_much_off")
        price = ctx.quote - m.value
        return OfferReading(round(price), 0.9, _span(ctx, _start(ctx, m, before, off), end), "less",
                            _span(ctx, m.start, m.end))
    else:
        return None
    if ctx.quote is None:
        return _unsure(ctx, m, end, how, "no_quote")
    if m.kind == "percent":  # in whole percent, so 78 % off 5,725 is 1,259.5 as a person reckons it
        value = ctx.quote * ((100 - m.value) if off else m.value) / 100
    else:
        value = ctx.quote * ((1 - share) if off else share)
    return OfferReading(round(value), 0.9, _span(ctx, _start(ctx, m, before, off), end), how,
                        _span(ctx, m.start, m.end))


def _start(ctx: _Context, m: NumberMention, before: list[Word], off: bool) -> int:
    """Where the words of a relative offer begin: at "reduce by", "discount of" when said first."""
    size = ctx.lex.phrase_at(_keys(before), "less_before", backwards=True) if off else 0
    return before[-size].start if size else m.start


def _percent_end(ctx: _Context, m: NumberMention) -> int:
    return max(m.end, m.beside_end)


def _unsure(ctx: _Context, m: NumberMention, end: int, how: str, why: str, price: int | None = None,
            confidence: float = 0.4) -> OfferReading:
    return OfferReading(price, confidence, _span(ctx, m.start, end), how, _span(ctx, m.start, m.end), why)


def _middle(ctx: _Context) -> OfferReading | None:
    """"Meet me in the middle": halfway between the quote and the learner's last offer."""
    if not ctx.lex.middle:
        return None
    words = ctx.words()
    present = {part for w in words for part in w.key.split(" ")}
    phrases = [p for p in ctx.lex.middle if p.split(" ", 1)[0] in present]
    if not phrases:
        return None
    flat = [(part, w) for w in words for part in w.key.split(" ")]  # "let's" is two parts
    parts = [p for p, _ in flat]
    for phrase in phrases:
        want = phrase.split(" ")
        at = next((i for i in range(len(parts) - len(want) + 1) if parts[i:i + len(want)] == want), None)
        if at is None:
            continue
        said = ctx.text[flat[at][1].start:flat[at + len(want) - 1][1].end]
        if ctx.quote is None or ctx.last_offer is None or ctx.last_offer >= ctx.quote:
            return OfferReading(None, 0.3, said, "middle", said, "no_last_offer")
        return OfferReading(round((ctx.quote + ctx.last_offer) / 2), 0.9, said, "middle", said)
    return None


class _Candidate(NamedTuple):
    value: float
    start: int
    end: int
    mention: NumberMention
    cued: bool
    explicit: bool
    how: str = "price"
    per: str | None = "?"  # the unit the price is already per ("?": not said)


def _size(item_unit: str | None, said: str | None) -> float | None:
    if item_unit is None:
        return 1.0 if said in (None, "kg") else None
    if said == item_unit:
        return 1.0
    return _UNIT_SIZES.get(item_unit, {None: 1.0}).get(said)


def _candidate(ctx: _Context, m: NumberMention) -> _Candidate:
    after = _after(ctx, m)
    before = _before(ctx, m)
    keys = _keys(after)
    cued = (ctx.lex.phrase_at(_keys(before), "offer_cues", backwards=True) > 0
            or ctx.lex.phrase_at(keys, "offer_cues_after") > 0)
    explicit = m.currency or m.multiplied or (m.words and m.value >= 10 and not m.colloquial)
    per: str | None = "?"
    end = m.end
    # "100 a kilo", "100 ka kilo", "100 rupaye kilo", "100 each": already a price per unit
    size = ctx.lex.phrase_at(keys, "each_words")
    if size:
        per = "piece"
        end = after[size - 1].end
    else:
        skip = ctx.lex.phrase_at(keys, "rate_words")
        unit_word = keys[skip] if skip < len(keys) else None
        if unit_word is not None and (unit := ctx.lex.get(unit_word, "unit")) is not None:
            per = unit.label
            end = after[skip].end
    return _Candidate(m.value, m.start, end, m, cued, explicit, per=per)


def _ranges(ctx: _Context, cands: list[_Candidate]) -> list[_Candidate]:
    """Two prices joined by "to", "-", "se" are one offer, read at its top; joined by "or", two."""
    out: list[_Candidate] = []
    for cand in cands:
        if out:
            prev = out[-1]
            between = ctx.words(prev.mention.end, cand.mention.start)
            keys = [k for k in _keys(between) if not _is_money(ctx.lex, k)]
            gap = ctx.text[prev.mention.end:cand.mention.start]
            if keys and ctx.lex.phrase_at(keys, "range_words") == len(keys) and not re.search(r"[,?!]", gap):
                top = max(prev.value, cand.value)
                out[-1] = _Candidate(top, prev.start, cand.end, cand.mention, prev.cued or cand.cued,
                                     prev.explicit or cand.explicit, "range", cand.per)
                continue
        out.append(cand)
    return out


def _absolute(ctx: _Context, mentions: list[NumberMention]) -> OfferReading | None:
    prices = [m for m in mentions if m.kind == "amount" and m.unit is None]
    foreign = [m for m in mentions if m.kind == "amount" and m.unit is not None]
    quantities = [m for m in mentions if (m.kind == "count" and (m.value < 100 or m.unit == "g"))
                  or (m.kind == "fraction" and m.unit is not None)]
    # "2 for 100": a small bare number before "for" and a price is how many, not a price
    for a, b in itertools.pairwise(prices):
        between = _keys(ctx.words(a.end, b.start))
        if (a.value < 20 and not (a.currency or a.multiplied) and between
                and ctx.lex.phrase_at(between, "for_words") == len(between)):
            quantities.append(a)
    prices = [m for m in prices if m not in quantities]
    if not prices:
        if foreign:
            m = foreign[-1]
            return _unsure(ctx, m, m.end, "price", "currency", confidence=0.3)
        return None
    cands = _ranges(ctx, [_candidate(ctx, m) for m in prices])
    if ctx.quote is not None and len(cands) > 1:
        others = [c for c in cands if c.value != ctx.quote]
        cands = others or cands
    cued = [c for c in cands if c.cued]
    pool = cued or cands
    values = {c.value for c in pool}
    chosen = pool[-1]
    confidence = 0.95 if chosen.explicit or chosen.cued else 0.9
    why = ""
    if len(values) > 1:
        confidence, why = 0.4, "two_prices"
    price = chosen.value
    how = chosen.how
    # Per unit: a price per another unit, or a price for a quantity.
    if chosen.per != "?":
        size = _size(ctx.unit, chosen.per)
        if size is None:
            confidence, why = min(confidence, 0.4), "unit"
        else:
            price /= size
    elif near := [q for q in quantities if not _separated(ctx.text, q, chosen.mention)]:
        # Only a quantity in the same clause: "2 kg for 100" is 50 a kilo, but in "I'm taking two
        # kilos, 90?" the 90 is the price per kilo the learner asks for.
        q = near[-1] if len(near) == 1 else None
        size = _size(ctx.unit, q.unit) if q is not None else None
        if q is None or size is None or q.value <= 0:
            confidence, why = min(confidence, 0.4), why or "unit"
        elif q.value * size != 1:
            price /= q.value * size
            how = "per_unit"
    if foreign:
        confidence, why = min(confidence, 0.4), why or "currency"
    m = chosen.mention
    if (ctx.quote and not why and not (m.currency or m.multiplied)
            and not FAR_BELOW <= price / ctx.quote <= FAR_ABOVE):
        confidence, why = 0.5, "far_from_quote"
    if m.colloquial and not m.currency:
        confidence, why = min(confidence, 0.6), why or "colloquial"
    near = [q for q in quantities if not _separated(ctx.text, q, chosen.mention)]
    start = min(chosen.start, *(q.start for q in near)) if how == "per_unit" else chosen.start
    end = max(chosen.end, *(max(q.end, q.beside_end) for q in near)) if how == "per_unit" else chosen.end
    return OfferReading(round(price) if price >= 1 else None, confidence, ctx.text[start:end], how,
                        ctx.text[m.start:m.end], why)


def _separated(text: str, a: NumberMention, b: NumberMention) -> bool:
    """Whether a comma or a sentence end stands between two numbers."""
    lo, hi = (a, b) if a.start < b.start else (b, a)
    return bool(re.search("[,;\u3001\u060c]|" + _CLAUSE_END.pattern, text[lo.end:hi.start]))


def read_offer(text: str, quote: int | None, lexicon: NumberLexicon | None = None, *,
               unit: str | None = "kg", last_offer: int | None = None,
               numbers: tuple[list[NumberMention], list[Word]] | None = None) -> OfferReading | None:
    """The learner's offer in `text`, with how sure the reading is; None when no offer is made.

    `quote` is the vendor's standing quote per `unit` (the item's unit: "kg", "piece"...),
    `last_offer` the learner's previous offer (for "meet me in the middle"); `numbers`, what
    `read_numbers` found in `text` with this lexicon, when the caller has it already."""
    lex = lexicon or number_lexicon(DEFAULT_LANGUAGES)
    mentions, words = numbers if numbers is not None else read_numbers(text, lex)
    ctx = _Context(text, quote, unit, last_offer, lex, words, [w.start for w in words])
    middle = _middle(ctx)
    if middle is not None:  # "aadha aadha", "نص نص": the halves are the phrase, not fractions
        lo = text.find(middle.read_from)
        mentions = [m for m in mentions if not lo <= m.start < lo + len(middle.read_from)]
    read = [(m, _relative(ctx, m)) for m in mentions]
    relative = [r for _, r in read if r is not None]
    rest = [m for m, r in read if r is None]
    if middle is not None:
        relative.append(middle)
    absolute = _absolute(ctx, rest) if rest else None
    if absolute is not None and ctx.quote is not None and absolute.price == ctx.quote and relative:
        absolute = None  # "your 18,000? 70 percent of it": the quote repeated, not an offer
    if not relative:
        return absolute
    if len(relative) > 1 or (absolute is not None and absolute.price is not None):
        best = relative[0]
        agree = (absolute is not None and absolute.price is not None and best.price is not None
                 and abs(absolute.price - best.price) <= 0.05 * best.price and len(relative) == 1)
        if agree and absolute is not None:
            return absolute
        return OfferReading(None, 0.3, best.read_from, best.how, best.heard, "two_prices")
    return relative[0]


def parse_offer(text: str, current_quote: int | None = None, lexicon: NumberLexicon | None = None, *,
                unit: str | None = "kg", last_offer: int | None = None) -> int | None:
    """The price the learner surely offers in `text`, or None (no offer, or an unsure reading)."""
    reading = read_offer(text, current_quote, lexicon, unit=unit, last_offer=last_offer)
    return reading.price if reading is not None and reading.sure else None


def assess_reading(reading: OfferReading | None, quote: int | None,
                   bands: OfferBands | None = None) -> OfferAssessment:
    """Judge a reading: an unsure one is `none`, whatever number it may have guessed."""
    if reading is None or not reading.sure:
        return OfferAssessment.NONE
    return assess_offer(reading.price, quote, bands)


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
