"""What the learner meant, read from keywords in English and Hinglish.

The rule-based vendor does not understand language; it spots cue words. Every table is built once
at import, and a transcript is read with one regex pass plus a set look-up and one compiled
search per intent (its phrases as one alternation), so a turn costs a few microseconds. Prices
are not read here: the server parses the offer itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from schemas.pack import Cues
from schemas.scenario import Scenario

_WORD = re.compile(r"[a-z]+|\d+")


@dataclass(frozen=True, slots=True)
class Cue:
    """An intent's cue phrases: single words for a set look-up, and the multi-word phrases (padded
    with spaces, so they match whole words) searched for as one compiled alternation, which finds
    one if any is in the text, as a scan of each would, in one pass of C."""

    singles: frozenset[str]
    multis: tuple[str, ...]
    search: re.Pattern[str] | None

    @classmethod
    def of(cls, singles: frozenset[str], multis: tuple[str, ...]) -> Cue:
        pattern = re.compile("|".join(re.escape(m) for m in multis)) if multis else None
        return cls(singles, multis, pattern)

    def __add__(self, other: Cue) -> Cue:
        return Cue.of(self.singles | other.singles, self.multis + other.multis)


def _cues(*phrases: str) -> Cue:
    """Split cue phrases into single words (set look-up) and padded multi-word phrases."""
    singles = frozenset(p for p in phrases if " " not in p)
    multis = tuple(f" {p} " for p in phrases if " " in p)
    return Cue.of(singles, multis)


# Apostrophes are dropped before matching, so "i'll" is written "ill" here.
_GREETING = _cues(
    "namaste", "namaskar", "pranam", "hello", "hi", "hey", "salaam", "ram ram",
    "good morning", "good evening", "good afternoon",
)
_POLITE = _cues(
    "bhaiya", "bhaia", "bhai", "didi", "ji", "please", "plz", "kripya", "thanks", "thank you",
    "dhanyavaad", "dhanyavad", "shukriya", "uncle", "sir",
)
_INQUIRY = _cues(
    "kitne", "kitna", "kitni", "how much", "price", "prices", "daam", "rate", "cost", "bhav",
    "what about", "kya hai",
)
_PUSHBACK = _cues(
    "mehenga", "mehnga", "mahanga", "mehengi", "expensive", "costly", "too much", "too high",
    "zyada", "jyada", "kam karo", "kam kijiye", "kam kar", "thoda kam", "discount", "cheaper",
    "reduce", "lower", "less", "sasta", "last price", "best price", "final price", "fair price",
    "right price",
)
_WALK = _cues(
    "rehne do", "rehne de", "rehne dijiye", "leave it", "ill go", "i will go", "im leaving",
    "i am leaving", "im going", "i am going", "bye", "goodbye", "another shop", "other shop",
    "another stall", "other stall", "next stall", "next shop", "dusri dukaan", "doosri dukaan",
    "forget it", "no thanks", "not interested", "no deal", "im done", "i am done", "chalta hoon",
    "chalti hoon", "jaata hoon", "jaati hoon", "ja raha", "ja rahi", "walk away", "walking away",
    "nahi chahiye", "mat do",
)
_WEAK_WALK = _cues("chalo", "chaliye")  # "chalo" alone leaves; "chalo, theek hai" agrees
_ACCEPT = _cues(
    "deal", "theek hai", "thik hai", "theek h", "pakka", "done", "ill take it", "i will take it",
    "ill take", "agreed", "agree", "chalega", "sold", "le lunga", "le lungi", "le leta",
    "de dijiye", "pack it", "sounds good", "haan ji",
)
_REFUSE = _cues(
    "no deal", "not a deal", "not done", "im done", "i am done", "nahi chalega", "not ok",
    "no way", "nahi", "nahin", "not agreed",
)
_RUDE = _cues(
    "cheat", "cheater", "cheating", "thief", "thieves", "chor", "loot", "looting", "lootera",
    "rubbish", "bakwas", "bakwaas", "stupid", "idiot", "rotten", "fraud", "liar", "ghatiya",
    "bekaar", "bekar", "garbage", "trash", "rip off", "ripoff", "scam", "scammer", "useless",
    "pagal", "shut up", "disgusting", "sada hua", "sade hue", "sadi hui", "worst", "bewakoof",
)
_COMPLIMENT = _cues(
    "fresh", "beautiful", "nice", "lovely", "sundar", "badhiya", "bahut accha", "accha maal",
    "achha maal", "juicy", "tasty", "sweet", "good quality", "best quality", "mast", "taaza",
    "taza", "shandaar", "wonderful", "look good", "looks good", "great",
)
_REENGAGE = _cues(
    "wait", "ruko", "ruk", "ok ok", "okay okay", "come back", "fine", "acha", "accha", "achha",
    "acchha", "theek", "thik", "haan", "alright", "all right", "ok", "okay", "sure", "suno",
    "sunno", "let me see", "maybe", "sorry", "maaf",
)
_CASH = _cues("cash", "nakad", "nakdi", "nagad", "notes")

_COUNT_WORDS = {
    "ek": 1, "one": 1, "a": 1, "do": 2, "two": 2, "teen": 3, "tin": 3, "three": 3, "char": 4,
    "chaar": 4, "four": 4, "paanch": 5, "panch": 5, "five": 5, "chhe": 6, "six": 6, "das": 10,
    "ten": 10, "dedh": 1, "dhai": 2, "adhai": 2,
}
_KILO_WORDS = frozenset({"kilo", "kilos", "kg", "kgs", "kilogram", "kilograms", "dozen"})


@dataclass(frozen=True, slots=True)
class Intents:
    """The cues found in one learner turn."""

    greeting: bool = False
    polite: bool = False
    inquiry: bool = False
    pushback: bool = False
    walk: bool = False
    accept: bool = False
    rude: bool = False
    compliment: bool = False
    reengage: bool = False
    cash: bool = False
    quantity: int = 1  # kilos (or dozens) asked for; 1 when none is said
    padded: str = " "  # the transcript's words joined by single spaces, padded at both ends

    def mentions(self, name: str) -> bool:
        """Whether the learner said `name` (one or more words) as whole words."""
        return f" {name.lower()} " in self.padded

    @property
    def bulk(self) -> bool:
        return self.quantity > 1


def _has(cue: Cue, words: frozenset[str], padded: str) -> bool:
    if not cue.singles.isdisjoint(words):
        return True
    return cue.search is not None and cue.search.search(padded) is not None


def _quantity(tokens: list[str]) -> int:
    """The largest count said right before a unit word: "do kilo", "3 kg"."""
    best = 1
    for i, tok in enumerate(tokens):
        if tok in _KILO_WORDS and i > 0:
            before = tokens[i - 1]
            count = int(before) if before.isdigit() else _COUNT_WORDS.get(before, 1)
            best = max(best, count)
    return best


_BASE: dict[str, Cue] = {
    "greeting": _GREETING, "polite": _POLITE, "inquiry": _INQUIRY, "pushback": _PUSHBACK,
    "walk": _WALK, "accept": _ACCEPT, "compliment": _COMPLIMENT, "reengage": _REENGAGE,
}


@lru_cache(maxsize=64)
def _tables(cues: Cues | None) -> dict[str, Cue]:
    """The English and Hinglish cues, with a scenario pack's own words for each intent added."""
    if cues is None:
        return _BASE
    tables = {}
    words: dict[str, tuple[str, ...]] = dict(cues)  # intent -> the pack's words (pydantic models iterate so)
    for intent, base in _BASE.items():
        tables[intent] = base + _cues(*(w.lower().replace("'", "") for w in words[intent]))
    return tables


LINES_REMEMBERED = 4096  # learner lines whose intents are kept, per pack's cue words


def read_intents(text: str, scenario: Scenario | None = None) -> Intents:
    """Spot the learner's intents in a transcript (with the scenario pack's cue words, if given)."""
    return _read(text, scenario.cues if scenario is not None else None)


@lru_cache(maxsize=LINES_REMEMBERED)
def _read(text: str, cues: Cues | None) -> Intents:
    """`read_intents`, kept per line and cue words (the intents are frozen): learners say the same
    short lines again and again."""
    tables = _tables(cues)
    tokens = _WORD.findall(text.lower().replace("'", "").replace("\u2019", ""))
    words = frozenset(tokens)
    padded = f" {' '.join(tokens)} "
    refuse = _has(_REFUSE, words, padded)
    accept = _has(tables["accept"], words, padded) and not refuse
    pushback = _has(tables["pushback"], words, padded)
    walk = _has(tables["walk"], words, padded)
    if not walk and not accept and not pushback and _has(_WEAK_WALK, words, padded):
        walk = True
    return Intents(
        greeting=_has(tables["greeting"], words, padded),
        polite=_has(tables["polite"], words, padded),
        inquiry=_has(tables["inquiry"], words, padded),
        pushback=pushback,
        walk=walk,
        accept=accept and not walk,
        rude=_has(_RUDE, words, padded),
        compliment=_has(tables["compliment"], words, padded),
        reengage=_has(tables["reengage"], words, padded) and not walk,
        cash=_has(_CASH, words, padded),
        quantity=_quantity(tokens),
        padded=padded,
    )
