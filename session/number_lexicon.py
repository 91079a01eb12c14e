"""The words the number reader knows, for a set of languages: built once per set from the
languages' data files (`schemas/data/numbers/`, validated by `schemas/numbers.py`).

Part of the shared number reader (`session/numbers.py`): the lexicon here, the tokens in
`session/number_tokens.py`, the reading of numbers there.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache

from schemas.numbers import NumberWords, number_words, number_words_files

__all__ = ["Entry", "NumberLexicon", "norm", "number_lexicon", "phrase_key", "script_of"]


@dataclass(frozen=True, slots=True)
class Entry:
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
    entries: Mapping[str, Mapping[str, Entry]]
    phrase_lengths: tuple[int, ...]  # longest first, over 1
    phrase_starts: frozenset[str]  # the first words of those phrases
    starters: frozenset[str]  # the words that may begin a number
    triggers: frozenset[str]  # single words without which an ASCII line holds no number and no offer
    longest: Mapping[str, int]  # per category, the most words a phrase of it has
    prefixes: Mapping[str, str]
    glued_latin: frozenset[str]
    glued_heads: frozenset[str]  # first two letters of the glued Latin morphemes
    glued_tails: frozenset[str]  # and last two
    prefix_heads: frozenset[str]  # first letters of `prefixes`
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

    def get(self, key: str, category: str) -> Entry | None:
        found = self.entries.get(key)
        return None if found is None else found.get(category)

    def has(self, key: str) -> bool:
        return key in self.entries

    def phrase_at(self, words: Sequence[str], category: str, *, backwards: bool = False) -> int:
        """How many of `words` (keys from `words_in`), from the front (or, backwards, ending at
        the back), make a phrase of `category` ("less_after", "offer_cues"...); 0 when none."""
        entries = self.entries
        for size in range(min(self.longest.get(category, 0), len(words)), 0, -1):
            part = words[-size:] if backwards else words[:size]
            found = entries.get(part[0] if size == 1 else " ".join(part))
            if found is not None and category in found:
                return size
        return 0


def norm(text: str) -> str:
    if text.isascii():
        return text.lower()  # the common case, and NFC cannot change ASCII
    return unicodedata.normalize("NFC", text).lower()


_PHRASE_SPLIT = re.compile("[\\s\\-'\u2019.]+")
_PHRASE_MARKS = frozenset(" \t\n-'\u2019.")


def phrase_key(text: str) -> str:
    """A lexicon key as the reader sees it: words joined by one space, hyphens and apostrophes
    and dots between words counted as spaces."""
    if _PHRASE_MARKS.isdisjoint(text) or not any(c.isalnum() for c in text):
        return norm(text)
    return " ".join(w for w in _PHRASE_SPLIT.split(norm(text)) if w) or norm(text)


def _longest(entries: Mapping[str, Mapping[str, Entry]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, slots in entries.items():
        words = key.count(" ") + 1
        for category in slots:
            out[category] = max(out.get(category, 0), words)
    return out


def _file_for(code: str, available: tuple[str, ...]) -> str | None:
    if code in available:
        return code
    base = code.split("-")[0]
    return base if base in available else None


@lru_cache(maxsize=32)
def _build(files: tuple[str, ...]) -> NumberLexicon:
    entries: dict[str, dict[str, Entry]] = {}
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
        k = phrase_key(key)
        slot = entries.setdefault(k, {})
        old = slot.get(category)
        word = Entry(langs=frozenset({lang}) | (old.langs if old else frozenset()), **kw)  # type: ignore[arg-type]
        if old is not None and (old.value, old.label) != (word.value, word.label):
            raise ValueError(f"numbers: {key!r} is {category} {old.value or old.label} in one language "
                             f"and {word.value or word.label} in another")
        slot[category] = word
        if glued and " " not in k:
            (glued_latin if all(script_of(c) == "latin" for c in k) else glued_other).add(k)

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
        weak = {phrase_key(w) for w in data.weak}
        not_first = {phrase_key(w) for w in data.multipliers_not_first}
        not_after = {phrase_key(w) for w in data.multipliers_not_after_digits}
        after_only = {phrase_key(w) for w in data.currency_after_only}
        for key, value in data.numbers.items():
            add(key, "number", lang, g, value=value, weak=phrase_key(key) in weak)
        for key, mult in data.multipliers.items():
            pk = phrase_key(key)
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
            add(key, "currency", lang, g, after_only=phrase_key(key) in after_only)
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
            prefixes[norm(key)] = role
        cues = {"offer_cues": data.offer_cues, "offer_cues_after": data.offer_cues_after,
                "less_after": data.less_after, "less_before": data.less_before, "rate_words": data.rate_words,
                "each_words": data.each_words, "range_words": data.range_words,
                "either_words": data.either_words, "for_words": data.for_words}
        for category, keys in cues.items():
            for key in keys:
                add(key, category, lang, g)
                if g and not key.isascii():
                    glued_cues.setdefault(category, set()).add(norm(key))
        middle.update(phrase_key(p) for p in data.middle)

    lengths = sorted({k.count(" ") + 1 for k in entries if " " in k}, reverse=True)
    starts = frozenset(k.split(" ")[0] for k in entries if " " in k)
    return NumberLexicon(
        languages=files,
        entries={k: dict(v) for k, v in entries.items()},
        phrase_lengths=tuple(lengths),
        phrase_starts=starts,
        longest=_longest(entries),
        triggers=frozenset(w for k, v in entries.items()
                           if {"number", "multiplier", "one", "modifier", "fraction"} & v.keys()
                           for w in k.split(" ")) | frozenset(p.split(" ")[0] for p in middle),
        starters=frozenset(k for k, v in entries.items()
                           if {"number", "multiplier", "one", "modifier"} & v.keys()),
        prefixes=dict(sorted(prefixes.items(), key=lambda kv: -len(kv[0]))),
        glued_latin=frozenset(glued_latin),
        glued_heads=frozenset(k[:2] for k in glued_latin),
        glued_tails=frozenset(k[-2:] for k in glued_latin),
        prefix_heads=frozenset(k[:1] for k in prefixes),
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
    return _lexicon_for(tuple(code.value if isinstance(code, Enum) else str(code) for code in languages))


@lru_cache(maxsize=64)
def _lexicon_for(codes: tuple[str, ...]) -> NumberLexicon:
    available = number_words_files()
    files = {"common", "en"}
    for code in codes:
        name = _file_for(code, available)
        if name is not None:
            files.add(name)
    return _build(tuple(sorted(files)))



def script_of(ch: str) -> str:
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
