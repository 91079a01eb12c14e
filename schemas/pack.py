"""What a scenario pack's manifest holds beyond items and prices: the vendor, the culture's rules,
the vendor's lines, the words learners use, and the response policy's data.

A pack is a folder, `schemas/data/<scenario>/`: `manifest.json` (validated into
`schemas.scenario.Scenario`, which uses the models here) and `knowledge/` (docs/scenarios.md).
Everything that differs between cultures is data here, not a branch in code: how much a lowball
costs, how fast the vendor gives ground, whether walking away is part of the game, the forms of
address that earn respect and the phrases that give offence.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.enums import LanguageCode, Outcome
from schemas.policy import DEFAULT_MAX_MOOD_DELTA, INSULT_MIN_DROP, LOWBALL_MIN_DROP

__all__ = [
    "HINT_KEYS",
    "INVITE_FIELDS",
    "LINE_FIELDS",
    "LINE_KEYS",
    "Cues",
    "GenericTip",
    "HintHelp",
    "LevelParams",
    "Objection",
    "OfferBands",
    "Persona",
    "ResponsePolicy",
    "Returning",
    "RuleParams",
    "SafetyRule",
    "check_turn_words",
]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# Every line pool the rule-based vendor draws on, with the fields its lines may use: a pack must
# give each pool in every language it speaks. Any line may use `{items}` (how the vendor says the
# item), `{unit}` and `{quality}` (what marks a good one); `{price}` (his price), `{offer}` (the
# learner's) and `{qty}` (the quantity asked for) only where the pool has them.
_ALWAYS = "items unit quality "
LINE_FIELDS: dict[str, frozenset[str]] = {
    key: frozenset((_ALWAYS + fields).split()) for key, fields in {
        "greet": "", "greet_item": "", "greet_cold": "", "which_item": "", "quote": "price",
        "repeat_quote": "price", "inquiry_accept": "price", "counter_insult": "price offer",
        "counter_lowball": "price offer", "counter_fair": "price offer", "counter_good": "price offer",
        "last_price": "price", "pushback": "price", "bulk": "price qty", "deal": "price",
        "callback": "price", "walk_wait": "price", "reengage": "price", "agree_pending": "price",
        "callback_plain": "", "close_walk": "", "close_angry": "", "close_late": "", "shoo": "",
        "rude_hold": "price", "hold": "price", "wrap_final": "price", "over": "", "clarify": "",
        "nudge": "", "welcome_back": "price", "welcome_back_cool": "price", "welcome_back_plain": "",
        # The engine read a number but is not sure what offer it is (session/offers.py): `{heard}` is
        # the number as the learner said it ("seventy"), `{price}` the standing quote.
        "offer_unclear": "price heard",
        # A known learner's first greeting of a new session (docs/memory.md): `{last_items}` is how
        # the vendor says last time's item, `{price}` what the learner paid for it.
        "remember_deal": "price last_items", "remember_item": "last_items", "remember_plain": "",
    }.items()
}
LINE_KEYS = tuple(LINE_FIELDS)
# Optional pools: the rule vendor's invitations to say what a learner is practising (docs/learning.md),
# an opening for the phrase or the behaviour, never the words themselves. A pack (or a language)
# without a pool simply does not invite that kind of review item; the LLM vendor needs none.
INVITE_FIELDS: dict[str, frozenset[str]] = {
    key: frozenset((_ALWAYS + fields).split()) for key, fields in {
        "invite_greet": "", "invite_ask": "", "invite_respect": "", "invite_offer": "price",
        "invite_accept": "price",
    }.items()
}
LINE_FIELDS.update(INVITE_FIELDS)

# The learner's next line that the rule-based vendor suggests (`suggested_user_response`), by
# situation; also the hint templates coaching reveals. `{local}` is the item's local name, `{items}`
# how the vendor says it, `{offer}` a suggested offer and `{price}` the vendor's price.
HINT_KEYS = (
    "greet", "ask", "open", "counter", "accept", "take_callback", "apologise", "goodbye",
    "goodbye_late", "return", "thanks",
)


class HintHelp(_Data):
    """What the `hint` command says in one situation (a `HINT_KEYS` key; docs/coaching.md).

    `context` is level 0: what is going on and what this culture expects here, in English.
    `frame` is level 1: the shape of a good next line in the target language, with `____` for
    the blanks, and `frame_english` its English. `english` is the English of the situation's
    reveal line (`Scenario.hints`), with the same fields ({local}, {items}, {offer}, {price})."""

    context: str = Field(min_length=20, max_length=400)
    frame: str = Field(min_length=3, max_length=200, pattern=r"____")
    frame_english: str = Field(min_length=3, max_length=200, pattern=r"____")
    english: str = Field(min_length=2, max_length=200)


class LevelParams(_Data):
    """What one learner level changes (docs/coaching.md, learner levels). Data, not code branches:
    the rule vendor, the LLM prompt, the rules engine and the silence handling read it."""

    description: str = Field(min_length=10, max_length=300)
    max_sentences: int = Field(2, ge=1, le=2)
    """The most sentences a vendor line may have (a longer one is cut, flagged `too_long`)."""
    lowball_cost: int | None = Field(None, ge=1, le=DEFAULT_MAX_MOOD_DELTA)
    """Happiness a lowball costs at this level (None: the scenario's). Below the engine's usual
    minimum it lowers that minimum for the session: a gentler vendor for a beginner."""
    concession: float = Field(1.0, gt=0, le=2)
    """A multiplier on the scenario's concession speed: under 1 a firmer vendor."""
    hint_after_timeouts: int | None = Field(None, ge=1, le=3)
    """After this many silences in a row the vendor offers a level-0 hint unasked (None: never)."""
    unprompted_hints: bool = True
    """Whether replies carry a `suggested_user_response` the client may show unasked. The hint
    command still reveals one at level 2 either way."""
    lines: dict[LanguageCode, dict[str, tuple[str, ...]]] = Field(default_factory=dict)
    """Pools that replace the scenario's at this level (simpler lines, more English, idioms)."""
    prompt: str = Field(min_length=10, max_length=400)
    """What an LLM brain is told about the learner's level."""


class Persona(_Data):
    """The vendor. `description` and `speech` are what an LLM brain is told to be."""

    name: str = Field(min_length=1, max_length=40)
    role: str = Field(min_length=1, max_length=120)
    age: int = Field(ge=16, le=100)
    stall: str = Field(min_length=1, max_length=200)
    place: str = Field(min_length=1, max_length=120)
    languages: tuple[LanguageCode, ...] = Field(min_length=1)
    voice: str = Field(min_length=1, max_length=80)
    """The text-to-speech voice the vendor speaks with (a voice name the TTS engine knows)."""
    description: str = Field(min_length=20, max_length=1200)
    speech: str = Field(min_length=10, max_length=600)


class OfferBands(_Data):
    """How the server labels an offer, as a share of the vendor's standing quote."""

    insult_below: float = Field(0.25, gt=0, lt=1)
    lowball_below: float = Field(0.40, gt=0, lt=1)
    fair_below: float = Field(0.70, gt=0, lt=1)
    good_below: float = Field(0.90, gt=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> OfferBands:
        if not self.insult_below < self.lowball_below < self.fair_below < self.good_below:
            raise ValueError("the bands must rise: insult_below < lowball_below < fair_below < good_below")
        return self


class RuleParams(_Data):
    """The negotiation rules that differ between cultures (the engine's limits bound them)."""

    offer_bands: OfferBands = Field(default_factory=OfferBands)
    insult_cost: int = Field(12, ge=INSULT_MIN_DROP, le=DEFAULT_MAX_MOOD_DELTA)
    """Happiness an insulting offer or an abusive line costs."""
    lowball_cost: int = Field(LOWBALL_MIN_DROP, ge=LOWBALL_MIN_DROP, le=DEFAULT_MAX_MOOD_DELTA)
    concession: float = Field(1.0, gt=0, le=2)
    """How fast the vendor gives ground: a multiplier on the share of the gap conceded per turn."""
    walkaway_expected: bool = True
    """Whether walking away is part of the game: the vendor calls the learner back with a better
    price. When false, he lets them go politely and the haggle ends."""
    rapport: int = Field(2, ge=0, le=6)
    """Happiness a respectful form of address or a polite word earns per turn."""
    respectful_address: tuple[str, ...] = ()
    """Forms of address that show respect here (bhaiya, -san, sidi); the report counts them."""
    taboo_phrases: tuple[str, ...] = ()
    """What gives offence here beyond plain rudeness; costs `insult_cost`, the report counts them."""


class Cues(_Data):
    """The learner's words for each intent in this culture, added to the English and Hinglish
    ones every pack understands (brain/intents.py)."""

    greeting: tuple[str, ...] = ()
    polite: tuple[str, ...] = ()
    inquiry: tuple[str, ...] = ()
    pushback: tuple[str, ...] = ()
    walk: tuple[str, ...] = ()
    accept: tuple[str, ...] = ()
    compliment: tuple[str, ...] = ()
    reengage: tuple[str, ...] = ()


class SafetyRule(_Data):
    """P0: what the learner may say that the vendor answers with fixed lines and no model call.

    `phrases` are matched as whole words, case-insensitively; a trailing `*` matches any ending
    (`diagnos*`). `effect` says what the turn does to the negotiation: `insult` costs happiness as
    an insult does, `none` changes nothing, `care` changes nothing and drops the haggle."""

    phrases: tuple[str, ...] = Field(min_length=1)
    lines: tuple[str, ...] = Field(min_length=1)
    effect: Literal["insult", "none", "care"] = "none"


class Objection(_Data):
    """P2: a recognised objection and the vendor's answers to it. `{price}` and `{item}` in a
    template are filled with the vendor's standing quote and the item; a template that needs a
    value the turn lacks is skipped."""

    phrases: tuple[str, ...] = Field(min_length=1)
    templates: tuple[str, ...] = Field(min_length=1)


class GenericTip(_Data):
    title: str = "Keep the conversation going"
    body: str = "Listen, answer what was asked, and ask one question back."


SafetyCategory = Literal["abuse", "sexual", "self_harm", "legal", "medical", "financial"]
ObjectionKind = Literal["too_expensive", "cheaper_elsewhere", "come_back_later"]
SAFETY_CATEGORIES: tuple[SafetyCategory, ...] = ("abuse", "sexual", "self_harm", "legal", "medical", "financial")


class ResponsePolicy(_Data):
    """The scenario's P0-P3 data (docs/knowledge.md, the response policy)."""

    safety: dict[SafetyCategory, SafetyRule] = Field(default_factory=dict)
    objections: dict[ObjectionKind, Objection] = Field(default_factory=dict)
    generic_tip: GenericTip = Field(default_factory=GenericTip)


class Returning(_Data):
    """How a known learner's last session here sets the vendor's mood at the start of the next one
    (docs/memory.md). Data, not code branches: each culture remembers differently."""

    start_offset: dict[Outcome, int] = Field(default_factory=dict)
    """Happiness added to the usual start for the outcome of the learner's last session here
    (none for an outcome not listed)."""
    start_bounds: tuple[int, int] = (40, 60)
    """The start never leaves this range, whatever the history."""

    @model_validator(mode="after")
    def _sane(self) -> Returning:
        low, high = self.start_bounds
        if not 0 <= low <= high <= 100:
            raise ValueError("start_bounds must be a range within 0-100")
        if any(abs(v) > DEFAULT_MAX_MOOD_DELTA for v in self.start_offset.values()):
            raise ValueError(f"a start_offset is at most {DEFAULT_MAX_MOOD_DELTA} either way")
        return self

    def start_happiness(self, usual: int, last_outcome: Outcome | None) -> int:
        """The vendor's happiness at the start of a session, after the learner's last outcome here."""
        if last_outcome is None:
            return usual
        low, high = self.start_bounds
        return max(low, min(high, usual + self.start_offset.get(last_outcome, 0)))


# A filler or backchannel is a few words of letters (an apostrophe inside: "ya'ni", "d'accord"),
# lower case, as a recogniser's partial text spells them after `voice.turn_words.words`.
_TURN_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?(?: [a-z]+(?:'[a-z]+)?){0,3}")


def check_turn_words(where: str, table: dict[LanguageCode, tuple[str, ...]],
                     languages: tuple[LanguageCode, ...]) -> list[tuple[str, str]]:
    """`fillers` and `backchannels` (docs/voice.md, End of turn): words for every language the vendor
    speaks, none for a language he does not, each one to four lower-case words, no repeats. Returns
    what is wrong, as (field, message) pairs."""
    problems: list[tuple[str, str]] = []
    unknown = sorted(language.value for language in table if language not in languages)
    if unknown:
        problems.append((where, f"{', '.join(unknown)} is not a language the vendor speaks"))
    missing = [language.value for language in languages if not table.get(language)]
    if missing:
        problems.append((where, f"missing {', '.join(missing)} (every language the vendor speaks needs some)"))
    for language, found in table.items():
        bad = [word for word in found if not _TURN_WORD.fullmatch(word)]
        if bad:
            problems.append((f"{where}.{language.value}", f"{bad[0]!r} is not one to four lower-case words"))
        repeated = sorted({word for word in found if found.count(word) > 1})
        if repeated:
            problems.append((f"{where}.{language.value}", f"{', '.join(repeated)} given twice"))
    return problems


def check_thinking_sounds(table: dict[LanguageCode, tuple[str, ...]],
                          languages: tuple[LanguageCode, ...]) -> list[tuple[str, str]]:
    """`thinking_sounds` (docs/voice.md, Thinking sounds): optional, but only for languages the
    vendor speaks, each a short spoken sound (1-40 characters, at most four words), no repeats."""
    problems: list[tuple[str, str]] = []
    unknown = sorted(language.value for language in table if language not in languages)
    if unknown:
        problems.append(("thinking_sounds", f"{', '.join(unknown)} is not a language the vendor speaks"))
    for language, found in table.items():
        where = f"thinking_sounds.{language.value}"
        bad = [sound for sound in found if not 0 < len(sound.strip()) <= 40 or len(sound.split()) > 4]
        if bad:
            problems.append((where, f"{bad[0]!r} is not a short sound (1-40 characters, at most four words)"))
        repeated = sorted({sound for sound in found if found.count(sound) > 1})
        if repeated:
            problems.append((where, f"{', '.join(repeated)} given twice"))
    return problems
