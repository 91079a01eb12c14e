"""The shared number reader: every number in a line of free text, in the pack's languages, with
where it stands in the text and what it is (a price, a percentage, a time, a quantity...).

Two callers read text with it: the offer reader (the learner's offer, `session/offers.py`) and the
reply check that finds the prices a vendor states so the engine can set them to the validated
price. Both need exact character spans into the original text, so the reader never rewrites the
text: it tokenises it in place, looks each token up in a `NumberLexicon` built from the languages'
data files (`schemas/data/numbers/`, docs/scenarios.md), and builds numbers the way each language
builds them:

- digits in any script (Devanagari, Arabic-Indic, full-width), with separators and decimals ("1,200", "1.500",
  "12.50", "1,50,000") and a `k` ("1.5k");
- number words, with multipliers applied to everything smaller before them, so "a hundred and
  fifty", "do sau pachaas", "डेढ़ सौ", "一万二千", "ichiman nisen", "mya u khamsin" and "cent
  cinquante" all come out right, and "do sau teen sau" is two numbers, not one;
- glued numbers (Japanese) split morpheme by morpheme, Arabic prefixes (و, ب) taken off.

What stands beside a number decides its kind: a currency word or sign, a quantity unit, a percent
word, a time or date word; phone numbers, clock times and dates in digits are recognised by their
shape. A bare small number word with nothing beside it ("one", "do") is a count, not a price; one
that is also an ordinary word is not read at all. Pure functions, no I/O past loading the data
once per language set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from session.number_lexicon import Entry, NumberLexicon, number_lexicon
from session.number_tokens import STOPS, Tok, Word, gap, tokenize, words_in

__all__ = [
    "KINDS",
    "NumberLexicon",
    "NumberMention",
    "Word",
    "find_numbers",
    "number_lexicon",
    "price_mentions",
    "read_numbers",
    "words_in",
]

KINDS = ("amount", "percent", "fraction", "time", "date", "phone", "count", "ordinal")


@dataclass(frozen=True, slots=True)
class NumberMention:
    """One number in the text. `start:end` covers the number itself (digits or number words, a
    `k` or a multiplier included), never a currency word or sign, unit or percent word beside it."""

    value: float
    start: int
    end: int
    currency: bool
    unit: str | None
    kind: str
    words: bool = False
    """Written (at least partly) in words rather than digits."""
    multiplied: bool = False
    """Has a multiplier ("sau", "hundred", "千", "k")."""
    percent_scale: float = 1.0
    """For a percentage, what one of its word is in percent (割 = 10): value is already scaled."""
    colloquial: bool = False
    """Hundreds said without the word ("one fifty" = 150): a common but less certain reading."""
    beside_end: int = -1
    """Where the word after the number that gave its kind (percent, unit, currency) ends; -1: none."""




# ---------------------------------------------------------------------------------------------
# Reading numbers


@dataclass(slots=True)
class _Expr:
    value: float
    first: int  # token indices, end exclusive
    end: int
    words: bool
    multiplied: bool
    weak_only: bool
    digits: bool
    colloquial: bool


def _compatible(lex: NumberLexicon, a: frozenset[str], b: frozenset[str]) -> bool:
    for la in a:
        if la in b or lex.mixes.get(la, frozenset()) & b:
            return True
    return False


def _joinable(text: str, a: Tok, b: Tok) -> bool:
    between = gap(text, a, b)
    if between and between.strip():
        return between.strip() == "-" and a.kind == "word" and b.kind == "word" and len(between) == 1
    if a.kind == "word" and b.kind == "word" and a.script != b.script:
        return False
    return True


def _combinable(lex: NumberLexicon, langs: frozenset[str], cur: float, value: float, joined: bool) -> bool:
    orders = {lex.orders.get(lang, "atomic") for lang in langs}
    if "tens_first" in orders and 20 <= cur <= 90 and cur % 10 == 0:
        if 0 < value < 10:
            return True
        if langs & lex.vigesimal and cur in (60, 80) and 10 <= value < 20:
            return True
    if "units_first" in orders and joined and 0 < cur < 10 and 20 <= value <= 90 and value % 10 == 0:
        return True
    return False


def _read(text: str, toks: list[Tok], i: int, lex: NumberLexicon) -> _Expr | None:
    """The longest number that starts at token i, or None."""
    parts: list[tuple[float, float]] = []  # (value, place), places falling
    cur: float | None = None
    cur_words = False
    cur_langs: frozenset[str] = frozenset()
    mod = 0.0
    need_mult = False
    joined = False
    words = multiplied = digits = False
    weak_only = True
    colloquial = False
    commit: _Expr | None = None
    before_cur: _Expr | None = None
    prev: Tok | None = None
    started = False
    j = i
    while j < len(toks):
        t = toks[j]
        if prev is not None and not _joinable(text, prev, t):
            break
        if t.kind == "prefix":
            if j != i:
                break
            j += 1
            continue
        if (t.kind == "sign" and t.key == "-" and prev is not None and prev.kind == "word" and j + 1 < len(toks)
                and toks[j + 1].kind == "word" and prev.end == t.start and t.end == toks[j + 1].start):
            j += 1  # "vingt-cinq", "twenty-five": the hyphen joins, it does not end the number
            continue
        smallest = parts[-1][1] if parts else float("inf")
        if t.kind == "num":
            if cur is not None or mod or need_mult or t.value >= smallest:
                break
            before_cur = commit
            cur, cur_words, cur_langs = t.value, False, frozenset()
            digits = True
            weak_only = False
        elif (w := lex.get(t.key, "number")) is not None and (not cur_langs or _compatible(lex, cur_langs, w.langs)):
            if cur is not None:
                langs = cur_langs & w.langs or w.langs
                if cur_words and _combinable(lex, langs, cur, w.value, joined):
                    cur += w.value
                elif (cur_words and not parts and not joined and langs & lex.colloquial and 0 < cur < 10
                      and cur == int(cur) and 10 <= w.value < 100):
                    # "one fifty", "two twenty five": hundreds said the way Indian English says them
                    parts = [(cur * 100, 100.0)]
                    cur = w.value
                    colloquial = True
                else:
                    break
            elif w.value >= 100 and not mod and not need_mult:
                # A word that is a whole hundred or thousand ("mitin" 200, "sanbyaku" 300) stands
                # as a multiplied part, so smaller numbers may follow: "mitin u 3ichrin" is 220.
                place = float(10 ** (len(str(int(w.value))) - 1))
                if place >= smallest:
                    break
                before_cur = commit
                parts = [*parts, (w.value, place)]
                multiplied = True
            else:
                if w.value + mod >= smallest or need_mult:
                    break
                before_cur = commit
                cur = w.value + mod
                mod = 0.0
            cur_words, cur_langs = True, w.langs
            words = True
            weak_only = weak_only and w.weak
        elif ((s := lex.get(t.key, "suffix")) is not None and cur is not None and not cur_words
              and prev is not None and prev.end == t.start):
            cur *= s.value
            multiplied = True
        elif ((m := lex.get(t.key, "multiplier")) is not None
              and (not cur_langs or _compatible(lex, cur_langs, m.langs))):
            mult = m.value
            if cur is not None and not cur_words and not m.after_digits:
                break
            popped = sum(v for v, place in parts if place < mult)
            kept = [(v, place) for v, place in parts if place >= mult]
            if any(place <= mult for _, place in kept):
                if before_cur is not None or cur is None:
                    return before_cur if cur is not None else commit
                break
            base = popped + (cur or 0.0)
            if cur is None and not popped:
                if started and not need_mult and not mod and not (m.can_start and m.langs & lex.glued_langs):
                    break  # "hundred thousand" is fine, "thousand thousand" is not; 二百十 is 210
                if not started and not m.can_start:
                    break
                base = 1.0 + mod
                mod = 0.0
            need_mult = False
            parts = [*kept, (base * mult, mult)]
            cur, cur_words = None, False
            cur_langs = cur_langs or m.langs
            multiplied = True
            words = True
            weak_only = weak_only and m.weak
        elif lex.get(t.key, "one") is not None and not started:
            need_mult = True
            cur_langs = lex.get(t.key, "one").langs  # type: ignore[union-attr]
        elif lex.get(t.key, "modifier") is not None and cur is None and not mod and not need_mult:
            mod = lex.get(t.key, "modifier").value  # type: ignore[union-attr]
            before_cur = commit
        elif lex.get(t.key, "joiner") is not None and (cur is not None or parts) and not joined:
            joined = True
            prev = t
            j += 1
            continue
        else:
            break
        joined = False
        started = True
        prev = t
        j += 1
        if not mod and not need_mult and (cur is not None or parts):
            start = i + 1 if toks[i].kind == "prefix" else i
            commit = _Expr(sum(v for v, _ in parts) + (cur or 0.0), start, j, words, multiplied, weak_only, digits,
                           colloquial)
    return commit


def _neighbour(text: str, toks: list[Tok], k: int, step: int) -> Tok | None:
    """The token beside position k (step -1: before, +1: after) if nothing but spaces (or a dot
    after an abbreviation, a slash) stands between."""
    j = k + step
    if not 0 <= j < len(toks):
        return None
    here = toks[k]
    t = toks[j]
    if t.kind == "sign" and t.key in ".:" and step == -1 and j - 1 >= 0:
        # "Rs. 150", "Rs.150"
        if not gap(text, t, here).strip():
            return _neighbour(text, toks, j, step)
    between = gap(text, t, here) if step == -1 else gap(text, here, t)
    return t if not between.strip() else None


def _category(lex: NumberLexicon, tok: Tok | None, category: str) -> Entry | None:
    if tok is None or tok.kind not in ("word", "sign"):
        return None
    return lex.get(tok.key, category)


_DIGIT = re.compile(r"\d")
_ASCII_WORD = re.compile(r"[a-z0-9]+")


def _may_hold_numbers(text: str, lex: NumberLexicon) -> bool:
    """A quick look before the full reading: a line in ASCII with no digit and no word that could
    be or start a number (or a glued one, or one behind a prefix) holds none. Most lines without
    a price are let go here, at a fraction of the cost of reading them."""
    if not text.isascii() or _DIGIT.search(text):
        return True
    for word in _ASCII_WORD.findall(text.lower()):
        if word in lex.triggers or (word[:1] in lex.prefix_heads and word[1:] in lex.triggers):
            return True
        if word[:2] in lex.glued_heads and len(word) > 3:
            return True
    return False


def find_numbers(text: str, lexicon: NumberLexicon) -> list[NumberMention]:
    """Every number in `text`, in order, with its kind. Never raises on any text."""
    return read_numbers(text, lexicon)[0]


def read_numbers(text: str, lexicon: NumberLexicon) -> tuple[list[NumberMention], list[Word]]:
    """`find_numbers`, and the words of the text as the reader cut them (keyed as the lexicon
    keys them, sentence punctuation left out): the offer reader looks at the words around each
    number without cutting the text a second time."""
    if not _may_hold_numbers(text, lexicon):
        return [], []
    toks = tokenize(text, lexicon)
    found: list[NumberMention] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind in ("phone", "time", "date", "fraction"):
            found.append(NumberMention(t.value, t.start, t.end, False, None, t.kind))
            i += 1
            continue
        if t.kind == "word" and t.key not in lexicon.starters and t.key not in lexicon.entries:
            i += 1  # most words: neither a number nor anything beside one
            continue
        if _hyphenated_name(text, toks, i, lexicon):
            i += 1
            continue
        expr = _read(text, toks, i, lexicon) if t.kind != "word" or t.key in lexicon.starters else None
        if expr is None:
            frac = _category(lexicon, t, "fraction")
            if frac is not None:
                after = _neighbour(text, toks, i, 1)
                if _category(lexicon, after, "one") is not None and after is not None:  # "half a kilo"
                    after = _neighbour(text, toks, toks.index(after), 1)
                unit = _category(lexicon, after, "unit")
                label = unit.label if unit else None
                found.append(NumberMention(frac.value, t.start, t.end, False, label, "fraction", words=True,
                                           beside_end=after.end if unit and after else -1))
            i += 1
            continue
        mention = _classify(text, toks, expr, lexicon)
        if mention is not None:
            found.append(mention)
        i = expr.end
    return found, [Word(t.key, t.start, t.end) for t in toks if t.key not in STOPS and t.key not in ("'", "\u2019")]


def _hyphenated_name(text: str, toks: list[Tok], i: int, lex: NumberLexicon) -> bool:
    """"Tanaka-san": a number word hyphened onto a word that is not a number starts no number."""
    if i == 0 or toks[i].kind != "word":
        return False
    prev = toks[i - 1]
    if (prev.kind == "sign" and prev.key == "-" and i >= 2 and toks[i - 2].end == prev.start
            and prev.end == toks[i].start):
        before = toks[i - 2]
        return before.kind == "word" and not any(
            lex.get(before.key, c) for c in ("number", "multiplier", "modifier", "one", "joiner"))
    return False


def _classify(text: str, toks: list[Tok], expr: _Expr, lex: NumberLexicon) -> NumberMention | None:
    first, last = toks[expr.first], toks[expr.end - 1]
    value = expr.value
    before = _neighbour(text, toks, expr.first, -1)
    after = _neighbour(text, toks, expr.end - 1, 1)
    cur_before = _category(lex, before, "currency")
    cur_after = _category(lex, after, "currency")
    currency = (cur_before is not None and not cur_before.after_only) or cur_after is not None
    foreign = _category(lex, after, "foreign") or _category(lex, before, "foreign")
    unit = _category(lex, after, "unit")
    percent = _category(lex, after, "percent")
    scale = 1.0
    if percent is not None:
        kind, scale, currency, label = "percent", percent.value, False, None
    elif expr.weak_only and not (currency or unit or foreign):
        return None  # "do you", "one of", "Tanaka san": ordinary words, not numbers
    elif foreign is not None:
        kind, currency, label = "amount", False, foreign.label
    elif unit is not None:
        kind, label = "count", unit.label
    else:
        kind = "amount" if currency else _plain_kind(text, toks, expr, before, after, lex)
        label = None
    beside = after if after is not None and (percent or unit or foreign or cur_after) else None
    return NumberMention(value * scale, first.start, last.end, currency, label, kind, words=expr.words,
                         multiplied=expr.multiplied, percent_scale=scale, colloquial=expr.colloquial,
                         beside_end=beside.end if beside is not None else -1)


def _plain_kind(text: str, toks: list[Tok], expr: _Expr, before: Tok | None, after: Tok | None,
                lex: NumberLexicon) -> str:
    value = expr.value
    if _category(lex, after, "time_after") is not None:
        return "time"
    attached = after is not None and after.start == toks[expr.end - 1].end
    if attached and _category(lex, after, "ordinal") is not None:
        return "ordinal"
    if attached and after is not None and after.key == "s" and expr.digits and value % 10 == 0:
        return "date"  # "the 1800s", "the 90s"
    if (_category(lex, after, "date") or _category(lex, before, "date")) and value <= 31:
        return "date"
    if (expr.digits and not expr.words and 1900 <= value <= 2100 and value == int(value)
            and _category(lex, before, "year_before") is not None):
        return "date"
    if _category(lex, before, "time_before") is not None and value <= 24 and not expr.multiplied:
        return "time"
    if _category(lex, after, "count") is not None:
        return "count"
    if expr.words and not expr.digits and not expr.multiplied and value < 10:
        return "count"
    return "amount"


def price_mentions(text: str, lexicon: NumberLexicon) -> list[NumberMention]:
    """The numbers in `text` that read as a price: amounts with no quantity unit (not a time, a
    date, a phone number, a count or a percentage; not a bare small number, word or digit: "only
    2 left at 150" states one price, "Okay, 5 rupees" one too)."""
    return [m for m in find_numbers(text, lexicon) if m.kind == "amount" and m.unit is None
            and (m.currency or m.multiplied or m.value >= 10)]
