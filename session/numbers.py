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
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from schemas.numbers import NumberWords, number_words, number_words_files

__all__ = [
    "KINDS",
    "NumberLexicon",
    "NumberMention",
    "Word",
    "find_numbers",
    "number_lexicon",
    "price_mentions",
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
# The lexicon


@dataclass(frozen=True, slots=True)
class _Word:
    value: float = 0.0
    langs: frozenset[str] = frozenset()
    weak: bool = False
    can_start: bool = True
    after_digits: bool = True
    after_only: bool = False
    label: str = ""


# Categories a key can have (one key may have several, in different languages).
_CATEGORIES = (
    "number", "multiplier", "suffix", "modifier", "one", "joiner", "fraction", "percent",
    "currency", "foreign", "unit", "count", "time_after", "time_before", "date", "year_before",
    "ordinal",
)


@dataclass(frozen=True, slots=True)
class NumberLexicon:
    """Every word the reader knows, for a set of languages. Build it with `number_lexicon`."""

    languages: tuple[str, ...]
    entries: Mapping[str, Mapping[str, _Word]]
    phrase_lengths: tuple[int, ...]  # longest first, over 1
    prefixes: Mapping[str, str]
    glued_latin: frozenset[str]
    glued_other: frozenset[str]
    glued_longest: int
    orders: Mapping[str, str]
    vigesimal: frozenset[str]
    colloquial: frozenset[str]
    glued_langs: frozenset[str]
    mixes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    middle: tuple[str, ...] = ()
    glued_cues: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Cue words of languages written without spaces, to find at the start of a run (割引)."""

    def get(self, key: str, category: str) -> _Word | None:
        found = self.entries.get(key)
        return None if found is None else found.get(category)

    def has(self, key: str) -> bool:
        return key in self.entries

    def phrase_at(self, words: Sequence[str], category: str, *, backwards: bool = False) -> int:
        """How many of `words` (keys from `words_in`), from the front (or, backwards, ending at
        the back), make a phrase of `category` ("less_after", "offer_cues"...); 0 when none."""
        for size in (4, 3, 2, 1):
            if size > len(words):
                continue
            part = words[-size:] if backwards else words[:size]
            if self.get(" ".join(part), category) is not None:
                return size
        return 0


def _norm(text: str) -> str:
    return unicodedata.normalize("NFC", text).lower()


def _phrase_key(text: str) -> str:
    """A lexicon key as the reader sees it: words joined by one space, hyphens and apostrophes
    and dots between words counted as spaces."""
    if not any(c.isalnum() for c in text):
        return _norm(text)
    return " ".join(w for w in re.split("[\\s\\-'\u2019.]+", _norm(text)) if w) or _norm(text)


def _file_for(code: str, available: tuple[str, ...]) -> str | None:
    if code in available:
        return code
    base = code.split("-")[0]
    return base if base in available else None


@lru_cache(maxsize=32)
def _build(files: tuple[str, ...]) -> NumberLexicon:
    entries: dict[str, dict[str, _Word]] = {}
    prefixes: dict[str, str] = {}
    orders: dict[str, str] = {}
    vigesimal: set[str] = set()
    colloquial: set[str] = set()
    middle: set[str] = set()
    glued_cues: dict[str, set[str]] = {}
    mixes: dict[str, set[str]] = {}
    glued_latin: set[str] = set()
    glued_other: set[str] = set()

    def add(key: str, category: str, lang: str, glued: bool, **kw: object) -> None:
        k = _phrase_key(key)
        slot = entries.setdefault(k, {})
        old = slot.get(category)
        word = _Word(langs=frozenset({lang}) | (old.langs if old else frozenset()), **kw)  # type: ignore[arg-type]
        if old is not None and (old.value, old.label) != (word.value, word.label):
            raise ValueError(f"numbers: {key!r} is {category} {old.value or old.label} in one language "
                             f"and {word.value or word.label} in another")
        slot[category] = word
        if glued and " " not in k:
            (glued_latin if all(_script(c) == "latin" for c in k) else glued_other).add(k)

    for name in files:
        data: NumberWords = number_words(name)
        lang = data.language
        orders[lang] = data.order
        if data.vigesimal:
            vigesimal.add(lang)
        if data.colloquial_hundreds:
            colloquial.add(lang)
        mixes.setdefault(lang, set()).update(data.mixes_with)
        for other in data.mixes_with:
            mixes.setdefault(other, set()).add(lang)
        g = data.glued
        weak = {_phrase_key(w) for w in data.weak}
        not_first = {_phrase_key(w) for w in data.multipliers_not_first}
        not_after = {_phrase_key(w) for w in data.multipliers_not_after_digits}
        after_only = {_phrase_key(w) for w in data.currency_after_only}
        for key, value in data.numbers.items():
            add(key, "number", lang, g, value=value, weak=_phrase_key(key) in weak)
        for key, mult in data.multipliers.items():
            pk = _phrase_key(key)
            add(key, "multiplier", lang, g, value=mult, can_start=pk not in not_first,
                after_digits=pk not in not_after, weak=pk in weak)
        for key, mult in data.suffix_multipliers.items():
            add(key, "suffix", lang, g, value=mult)
        for key, value in data.modifiers.items():
            add(key, "modifier", lang, g, value=value)
        for key in data.one_words:
            add(key, "one", lang, g, value=1)
        for key in data.joiners:
            add(key, "joiner", lang, g)
        for key, value in data.fractions.items():
            add(key, "fraction", lang, g, value=value)
        for key, value in data.percent.items():
            add(key, "percent", lang, g, value=value)
        for key in data.currency:
            add(key, "currency", lang, g, after_only=_phrase_key(key) in after_only)
        for key, label in data.foreign_currency.items():
            add(key, "foreign", lang, g, label=label)
        for key, label in data.units.items():
            add(key, "unit", lang, g, label=label)
        for key in data.count_words:
            add(key, "count", lang, g)
        for key in data.time_after:
            add(key, "time_after", lang, g)
        for key in data.time_before:
            add(key, "time_before", lang, g)
        for key in data.date_words:
            add(key, "date", lang, g)
        for key in data.year_before:
            add(key, "year_before", lang, g)
        for key in data.ordinal_suffixes:
            add(key, "ordinal", lang, g)
        for key, role in data.prefixes.items():
            prefixes[_norm(key)] = role
        for category in ("offer_cues", "offer_cues_after", "less_after", "less_before", "rate_words",
                         "each_words", "range_words", "either_words", "for_words"):
            for key in getattr(data, category):
                add(key, category, lang, g)
                if g and not key.isascii():
                    glued_cues.setdefault(category, set()).add(_norm(key))
        middle.update(_phrase_key(p) for p in data.middle)

    lengths = sorted({k.count(" ") + 1 for k in entries if " " in k}, reverse=True)
    return NumberLexicon(
        languages=files,
        entries={k: dict(v) for k, v in entries.items()},
        phrase_lengths=tuple(lengths),
        prefixes=dict(sorted(prefixes.items(), key=lambda kv: -len(kv[0]))),
        glued_latin=frozenset(glued_latin),
        glued_other=frozenset(glued_other),
        glued_longest=max((len(k) for k in glued_other), default=0),
        orders=orders,
        vigesimal=frozenset(vigesimal),
        colloquial=frozenset(colloquial),
        glued_langs=frozenset(n.language for n in map(number_words, files) if n.glued),
        mixes={k: frozenset(v) for k, v in mixes.items()},
        middle=tuple(sorted(middle, key=len, reverse=True)),
        glued_cues={k: tuple(sorted(v, key=len, reverse=True)) for k, v in glued_cues.items()},
    )


def number_lexicon(languages: Iterable[str]) -> NumberLexicon:
    """The lexicon for these language codes (a pack's `vendor.languages`), built once per set.

    Each code finds its data file by its full name or its first part; a code with no file adds
    nothing (digits and signs are always read). English is always included: every pack's learners
    may fall back on it."""
    available = number_words_files()
    files = {"common", "en"}
    for code in languages:
        name = _file_for(str(getattr(code, "value", code)), available)
        if name is not None:
            files.add(name)
    return _build(tuple(sorted(files)))


# ---------------------------------------------------------------------------------------------
# Tokens

_DEVA_MARKS = "\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963"
_WORD_CHARS = rf"\w{_DEVA_MARKS}\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
_RUN = re.compile(rf"[{_WORD_CHARS}]+|/-|\S")
_WORDS = re.compile(rf"[{_WORD_CHARS}]+(?:['\u2019][{_WORD_CHARS}]+)*|/-|\S")
_SPECIAL = re.compile(
    r"(?P<phone>\+\d[\d \-]{6,}\d|(?<![\d.,])\d{4,5}[ \-]\d{5,6}(?![\d.,])|(?<![\d.,])0\d{2,4}-\d{6,8}(?!\d)"
    r"|(?<![\d.,])\d{8,}(?![\d.,]))"
    r"|(?P<time>(?<![\d.,:])\d{1,2}:\d{2}(?::\d{2})?(?![\d:]))"
    r"|(?P<fraction>(?<![\d/])[1-3]/[2-4](?![\d/]))"
    r"|(?P<date>(?<![\d/.-])\d{1,2}[/-]\d{1,2}[/-]\d{2,4}(?![\d/])|(?<![\d/])\d{1,2}/\d{1,2}(?![\d/]))"
)
_SEPARATORS = ".,'\u00a0\u202f"
_CONNECTORS = "-'\u2019."


@dataclass(frozen=True, slots=True)
class _Tok:
    key: str  # normalised, for look-ups
    start: int
    end: int
    kind: str  # "num", "word", "sign", "phone", "time", "date", "fraction"
    script: str
    value: float = 0.0
    glued: bool = False  # a piece of a longer run of letters


def _script(ch: str) -> str:
    o = ord(ch)
    if ch.isdigit():
        return "digit"
    if 0x0900 <= o <= 0x097F:
        return "deva"
    if 0x0600 <= o <= 0x06FF:
        return "arab"
    if 0x3040 <= o <= 0x309F or 0x30A0 <= o <= 0x30FF:
        return "kana"
    if 0x3400 <= o <= 0x9FFF or o == 0x3005:
        return "kanji"
    return "latin" if ch.isalpha() else "sign"


def _digits_value(text: str) -> float | None:
    """The value of digits with separators: "1,200" and "1.500" are thousands, "1.5", "12.50" and
    "1,5" decimals, "1,50,000" Indian grouping; a malformed grouping reads as nothing."""
    plain = "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in text)
    seps = [c for c in plain if not c.isdecimal()]
    if not seps:
        return float(int(plain))
    groups = re.split(r"[.,'\u00a0\u202f]", plain)
    if len(set(seps)) == 2 and seps.count(seps[-1]) == 1:
        whole, frac = plain.rsplit(seps[-1], 1)
        return float(whole.replace(seps[0], "") + "." + frac) if _grouped(whole.split(seps[0])) else None
    if len(set(seps)) > 1:
        return None
    sep = seps[0]
    if len(groups) > 2 or sep in "'\u00a0\u202f":
        return float("".join(groups)) if _grouped(groups) else None
    head, tail = groups
    if len(tail) == 3 and 1 <= len(head) <= 3 and head != "0":
        return float(head + tail)
    return float(head + "." + tail)


def _grouped(groups: list[str]) -> bool:
    """Thousands grouping: 1-3 digits, then groups of 3 (or of 2 then 3, the Indian way)."""
    if not groups or not 1 <= len(groups[0]) <= 3 or len(groups[-1]) != 3:
        return False
    return all(len(g) in (2, 3) for g in groups[1:-1])


def _split_glued_other(run: str, start: int, lex: NumberLexicon, script: str) -> list[_Tok]:
    """A run of kanji or kana, cut into the longest lexicon morphemes; other characters become
    word tokens of their own so they break a number."""
    out: list[_Tok] = []
    i = 0
    stray_kana = False  # the character before was kana the lexicon does not know
    while i < len(run):
        for size in range(min(lex.glued_longest, len(run) - i), 0, -1):
            piece = _norm(run[i:i + size])
            if piece in lex.glued_other:
                kind = _script(run[i])
                # Kana inside a word is not a number: "すみません" holds せん but means "excuse me".
                key = piece if not (stray_kana and kind == "kana") else "\x00" + piece
                out.append(_Tok(key, start + i, start + i + size, "word", kind, glued=True))
                stray_kana = key != piece
                i += size
                break
        else:
            stray_kana = _script(run[i]) == "kana"
            out.append(_Tok(_norm(run[i]), start + i, start + i + 1, "word", script, glued=True))
            i += 1
    return out


def _split_glued_latin(key: str, start: int, lex: NumberLexicon) -> list[_Tok] | None:
    """A Latin run read wholly as glued morphemes ("ichiman" = ichi + man), or None."""
    n = len(key)
    best: list[list[int] | None] = [None] * (n + 1)
    best[0] = []
    for i in range(n):
        path = best[i]
        if path is None:
            continue
        for j in range(n, i, -1):
            if best[j] is None and key[i:j] in lex.glued_latin:
                best[j] = [*path, j]
    cuts = best[n]
    if not cuts or len(cuts) < 2:
        return None
    out, prev = [], 0
    for cut in cuts:
        out.append(_Tok(key[prev:cut], start + prev, start + cut, "word", "latin", glued=True))
        prev = cut
    return out


def _run_tokens(run: str, start: int, lex: NumberLexicon) -> list[_Tok]:
    """One run of word characters as tokens: itself if the lexicon knows it, else cut into digits
    and letters, a known prefix taken off, glued numbers split."""
    key = _norm(run)
    if run == "/-" or (len(run) == 1 and not run.isalnum()):
        return [_Tok(key, start, start + len(run), "sign", "sign")]
    if lex.has(key) or not any(c.isdigit() for c in run):
        return _word_tokens(run, key, start, lex)
    out: list[_Tok] = []
    for m in re.finditer(r"\d+|\D+", run):
        piece = m.group()
        if piece[0].isdecimal():
            out.append(_Tok(piece, start + m.start(), start + m.end(), "num", "digit"))
        else:
            out.extend(_word_tokens(piece, _norm(piece), start + m.start(), lex))
    return out


def _word_tokens(run: str, key: str, start: int, lex: NumberLexicon) -> list[_Tok]:
    script = _script(next((c for c in run if c.isalpha()), run[0]))
    if lex.has(key) or len(key) != len(run):
        return [_Tok(key, start, start + len(run), "word", script)]
    for prefix, role in lex.prefixes.items():
        if key.startswith(prefix) and lex.has(key[len(prefix):]):
            cut = len(prefix)
            kind = "word" if role == "joiner" else "prefix"
            head = _Tok(prefix if role == "joiner" else "", start, start + cut, kind, script, glued=True)
            return [head, _Tok(key[cut:], start + cut, start + len(run), "word", script, glued=True)]
    if script in ("kana", "kanji") and lex.glued_other:
        return _split_glued_other(run, start, lex, script)
    if script == "latin" and lex.glued_latin:
        split = _split_glued_latin(key, start, lex)
        if split is not None:
            return split
    return [_Tok(key, start, start + len(run), "word", script)]


def _tokens(text: str, lex: NumberLexicon) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    for special in _SPECIAL.finditer(text):
        toks.extend(_plain_tokens(text, pos, special.start(), lex))
        kind = special.lastgroup or "date"
        surface = special.group()
        value = _special_value(kind, surface)
        toks.append(_Tok(surface, special.start(), special.end(), kind, "digit", value))
        pos = special.end()
    toks.extend(_plain_tokens(text, pos, len(text), lex))
    return _merge_phrases(text, _merge_digits(text, toks), lex)


def _special_value(kind: str, surface: str) -> float:
    digits = [int("".join(str(unicodedata.decimal(c)) for c in part)) for part in re.findall(r"\d+", surface)]
    if kind == "time":
        return digits[0] + digits[1] / 60
    if kind == "fraction":
        return digits[0] / digits[1]
    if kind == "phone":
        return float("".join(str(d) for d in digits))
    return float(digits[0])


def _plain_tokens(text: str, start: int, end: int, lex: NumberLexicon) -> list[_Tok]:
    out: list[_Tok] = []
    for m in _RUN.finditer(text, start, end):
        out.extend(_run_tokens(m.group(), m.start(), lex))
    return out


def _merge_digits(text: str, toks: list[_Tok]) -> list[_Tok]:
    """Digits joined by one separator with no space ("1,200", "12.50") become one number."""
    out: list[_Tok] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "num":
            j = i
            while (j + 2 < len(toks) and toks[j + 1].kind == "sign" and toks[j + 1].key in _SEPARATORS
                   and toks[j + 2].kind == "num" and toks[j].end == toks[j + 1].start
                   and toks[j + 1].end == toks[j + 2].start):
                j += 2
            surface = text[t.start:toks[j].end]
            value = _digits_value(surface)
            if value is None:  # "1.2.3": read the first part only
                value, j = _digits_value(t.key), i
                surface = t.key
            out.append(_Tok(surface, t.start, toks[j].end, "num", "digit", value or 0.0))
            i = j + 1
        else:
            out.append(t)
            i += 1
    return out


def _gap(text: str, a: _Tok, b: _Tok) -> str:
    return text[a.end:b.start]


def _merge_phrases(text: str, toks: list[_Tok], lex: NumberLexicon) -> list[_Tok]:
    """Words that make one lexicon phrase ("per cent", "quatre-vingt-dix", "a.m") become one
    token; hyphens, apostrophes and dots between them count as spaces."""
    if not lex.phrase_lengths:
        return toks
    out: list[_Tok] = []
    i = 0
    while i < len(toks):
        merged = None
        if toks[i].kind == "word":
            for size in lex.phrase_lengths:
                words: list[_Tok] = []
                j = i
                while j < len(toks) and len(words) < size:
                    t = toks[j]
                    if t.kind == "word":
                        words.append(t)
                    elif not (t.kind == "sign" and t.key in _CONNECTORS and words):
                        break
                    j += 1
                if len(words) == size and lex.has(key := " ".join(w.key for w in words)):
                    merged = (_Tok(key, words[0].start, words[-1].end, "word", words[0].script), j)
                    break
        if merged is None:
            out.append(toks[i])
            i += 1
        else:
            out.append(merged[0])
            i = merged[1]
    return out


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


def _joinable(text: str, a: _Tok, b: _Tok) -> bool:
    gap = _gap(text, a, b)
    if gap and gap.strip():
        return gap.strip() == "-" and a.kind == "word" and b.kind == "word" and len(gap) == 1
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


def _read(text: str, toks: list[_Tok], i: int, lex: NumberLexicon) -> _Expr | None:
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
    prev: _Tok | None = None
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


def _neighbour(text: str, toks: list[_Tok], k: int, step: int) -> _Tok | None:
    """The token beside position k (step -1: before, +1: after) if nothing but spaces (or a dot
    after an abbreviation, a slash) stands between."""
    j = k + step
    if not 0 <= j < len(toks):
        return None
    here = toks[k]
    t = toks[j]
    if t.kind == "sign" and t.key in ".:" and step == -1 and j - 1 >= 0:
        # "Rs. 150", "Rs.150"
        if not _gap(text, t, here).strip():
            return _neighbour(text, toks, j, step)
    gap = _gap(text, t, here) if step == -1 else _gap(text, here, t)
    return t if not gap.strip() else None


def _category(lex: NumberLexicon, tok: _Tok | None, category: str) -> _Word | None:
    if tok is None or tok.kind not in ("word", "sign"):
        return None
    return lex.get(tok.key, category)


def find_numbers(text: str, lexicon: NumberLexicon) -> list[NumberMention]:
    """Every number in `text`, in order, with its kind. Never raises on any text."""
    toks = _tokens(text, lexicon)
    found: list[NumberMention] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind in ("phone", "time", "date", "fraction"):
            found.append(NumberMention(t.value, t.start, t.end, False, None, t.kind))
            i += 1
            continue
        if _hyphenated_name(text, toks, i, lexicon):
            i += 1
            continue
        expr = _read(text, toks, i, lexicon)
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
    return found


def _hyphenated_name(text: str, toks: list[_Tok], i: int, lex: NumberLexicon) -> bool:
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


def _classify(text: str, toks: list[_Tok], expr: _Expr, lex: NumberLexicon) -> NumberMention | None:
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


def _plain_kind(text: str, toks: list[_Tok], expr: _Expr, before: _Tok | None, after: _Tok | None,
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


@dataclass(frozen=True, slots=True)
class Word:
    key: str  # as the lexicon keys it
    start: int
    end: int


_STOPS = ".,!?;:\"()\u3002\u3001\uff1f\uff01\u060c\u061f"


def words_in(text: str, start: int = 0, end: int | None = None) -> list[Word]:
    """The words (and signs) of `text[start:end]` with their spans, keyed as the lexicon keys
    them: for the offer reader to look at what stands around a number. Sentence punctuation is
    left out, so a caller that must not look past it checks the text between."""
    stop = len(text) if end is None else end
    return [Word(_phrase_key(m.group()), m.start(), m.end()) for m in _WORDS.finditer(text, start, stop)
            if m.group() not in _STOPS]


def price_mentions(text: str, lexicon: NumberLexicon) -> list[NumberMention]:
    """The numbers in `text` that read as a price: amounts with no quantity unit (not a time, a
    date, a phone number, a count or a percentage; not a bare small number word)."""
    return [m for m in find_numbers(text, lexicon) if m.kind == "amount" and m.unit is None]
