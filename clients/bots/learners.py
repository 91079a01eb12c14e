"""Simulated learners for `samvad eval` (issue #36): bots shaped by level that learn, forget and speak.

A `SimulatedLearner` plays one learner over several sessions of one pack. It is deterministic for
its seed. Its shape (`SHAPES`) says how a learner of that level behaves:

- **pace**: words a minute when it speaks, growing a little each session, and the pause it leaves
  in a line, shrinking (practice makes speech quicker and smoother);
- **help**: how often it asks for hints before a line, and whether it then says the revealed line
  (hint uptake);
- **learning**: how likely a revealed line sticks in its memory, and how likely a remembered one is
  forgotten before the next session;
- **speech**: how often a line comes out mumbled (a low recogniser confidence), and how often it
  mixes in the place's words (code switching: the pack's cue words and phrases);
- **using what it knows**: a remembered line is said in its situation by itself now and then, and
  most times the vendor invites it (the practice targets the server brings back);
- **the testing effect**: a line said from memory (retrieved, not read off a hint) is harder to
  forget by the next session: each retrieval halves the chance (`RETRIEVAL_KEEP`). Both conditions
  of `samvad eval` play the same learner; only how often the vendor's words cue a retrieval differs.

What it says is drawn from the pack: its own English lines with the pack's respectful address and
currency, the place's cue words and phrases when it switches code, and the lines hints revealed.
It never reads the server's state; it knows only what the events told it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from schemas.enums import Level
from schemas.scenario import Item, Scenario

__all__ = ["RETRIEVAL_KEEP", "SHAPES", "Line", "Shape", "SimulatedLearner", "situation_for"]


@dataclass(frozen=True, slots=True)
class Shape:
    words_per_minute: float
    pause_ms: int  # left in the middle of a spoken line
    hint_p: float  # asks for hints (up to the whole line) before a line
    use_hint_p: float  # then says the revealed line
    learn_p: float  # a revealed line sticks
    forget_p: float  # a remembered line is gone by the next session
    mumble_p: float
    switch_p: float  # mixes in the place's words
    spontaneous_p: float  # says a remembered line in its situation unasked
    first_offer: float  # of the vendor's first quote
    step: float  # each counter-offer rises by this share of the first quote
    patience: int  # lines of haggling before it walks away


SHAPES: dict[Level, Shape] = {
    Level.BEGINNER: Shape(105, 900, 0.6, 0.8, 0.5, 0.45, 0.15, 0.2, 0.15, 0.75, 0.07, 8),
    Level.INTERMEDIATE: Shape(135, 500, 0.35, 0.6, 0.6, 0.3, 0.08, 0.4, 0.2, 0.6, 0.06, 9),
    Level.ADVANCED: Shape(165, 200, 0.15, 0.4, 0.7, 0.2, 0.03, 0.6, 0.25, 0.5, 0.05, 10),
}
GROWTH_WPM = 6.0  # a session's practice
CHAT_P = 0.5  # a line of small talk instead of the next move ("Your shop is lovely"), at most `CHATS` a session
CHATS = 2
SMALL_TALK = ("Your shop is lovely, {address}.", "How is business today, {address}?",
              "It is very hot today, {address}.", "Everything looks so fresh, {address}.")
PAUSE_SHRINK = 0.85
INVITED_P = 0.9  # says a remembered line when the vendor invites it
# Retrieval practice strengthens memory more than re-reading (the testing effect: Roediger and
# Karpicke 2006): each time a line is said from memory, its chance of being forgotten by the next
# session is multiplied by this. The size is an assumption, not fitted to learners.
RETRIEVAL_KEEP = 0.5

_NUMBER = re.compile(r"\d[\d,]*")


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    confidence: float  # what a typed line claims; a mumbled one is under the clarify threshold
    situation: str
    recalled: bool = False  # a remembered line said again
    from_hint: bool = False  # the line a hint just revealed


def situation_for(stage: str, quote: int | None, offered: bool) -> str:
    """The pack's hint situation the learner is in (schemas.pack.HINT_KEYS)."""
    if stage == "GREETING":
        return "greet"
    if quote is None:
        return "ask"
    return "counter" if offered else "open"


@dataclass(slots=True)
class SimulatedLearner:
    learner_id: str
    level: Level
    pack: Scenario
    seed: int
    memory: dict[str, str] = field(default_factory=dict)  # situation -> a line a hint revealed
    retrievals: dict[str, int] = field(default_factory=dict)  # situation -> times said from memory
    sessions: int = 0
    chats: int = 0  # small talk this session
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"{self.seed}:{self.learner_id}")

    @property
    def shape(self) -> Shape:
        return SHAPES[self.level]

    # ------------------------------------------------------------------ sessions

    def start_session(self) -> Item:
        """Forget what did not stick since last time; pick the item to haggle for."""
        if self.sessions:
            self.memory = {k: v for k, v in self.memory.items() if self._rng.random() >= self.forget_p(k)}
            self.retrievals = {k: n for k, n in self.retrievals.items() if k in self.memory}
        self.sessions += 1
        self.chats = 0
        in_scene = [i for i in self.pack.items if i.in_scene] or list(self.pack.items)
        return self._rng.choice(in_scene)

    def forget_p(self, situation: str) -> float:
        """The chance the line for `situation` is gone by the next session (the testing effect)."""
        return self.shape.forget_p * RETRIEVAL_KEEP ** self.retrievals.get(situation, 0)

    @property
    def words_per_minute(self) -> float:
        return self.shape.words_per_minute + GROWTH_WPM * (self.sessions - 1)

    @property
    def pause_ms(self) -> int:
        return round(self.shape.pause_ms * PAUSE_SHRINK ** (self.sessions - 1))

    def small_talk(self) -> Line | None:
        """Now and then a line that moves nothing (a learner being friendly): what a vendor who
        brings review items back answers with an opening for one (docs/learning.md)."""
        if self.chats >= CHATS or self._rng.random() >= CHAT_P:
            return None
        self.chats += 1
        address = self.pack.rules.respectful_address[0] if self.pack.rules.respectful_address else "sir"
        return Line(self._rng.choice(SMALL_TALK).format(address=address), 0.95, "chat")

    def wants_hint(self, situation: str) -> bool:
        """Whether it asks for help before its line: not when it remembers a line for the moment (it
        has something to say, even if it does not think to say it)."""
        return situation not in self.memory and self._rng.random() < self.shape.hint_p

    def heard_hint(self, situation: str, text: str) -> bool:
        """A revealed line: it may stick; returns whether the learner will say it now."""
        if self._rng.random() < self.shape.learn_p:
            self.memory[situation] = text
        return self._rng.random() < self.shape.use_hint_p

    def mumbles(self) -> bool:
        return self._rng.random() < self.shape.mumble_p

    # ------------------------------------------------------------------ lines

    def offer(self, first_quote: int, offers_made: int, quote: int) -> int:
        """What it offers next: its opening share of the first quote, rising, never over the quote."""
        share = self.shape.first_offer - 0.25 + self.shape.step * offers_made  # opens a quarter under
        return max(1, min(quote, _round(first_quote * share)))

    def ready_to_accept(self, first_quote: int, quote: int, offers_made: int) -> bool:
        return quote <= first_quote * self.shape.first_offer or offers_made >= self.shape.patience - 2

    def gives_up(self, offers_made: int) -> bool:
        return offers_made >= self.shape.patience

    def line(self, situation: str, item: Item, *, offer: int | None = None, price: int | None = None,
             invited: tuple[str, ...] = (), revealed: str | None = None) -> Line:
        """The next line in `situation`; `invited`: the situations whose remembered lines the vendor's
        last words opened the way for; `revealed`: the line a hint just revealed, to say as it is."""
        if revealed is not None:
            return Line(revealed, 0.95, situation, from_hint=True)
        number = offer if offer is not None else price
        # The invited line for this moment, else another the invitation opens the way for.
        asked = situation if situation in invited and situation in self.memory else next(
            (s for s in invited if s in self.memory), None)
        if asked is not None and self._rng.random() < INVITED_P:
            return self._recall(asked, number)
        if situation in self.memory and self._rng.random() < self.shape.spontaneous_p:
            return self._recall(situation, number)
        return Line(self._own(situation, item, offer, price), 0.95, situation)

    def _recall(self, situation: str, number: int | None) -> Line:
        """A remembered line said again, with today's number in it: a retrieval (the testing effect)."""
        remembered = self.memory[situation]
        self.retrievals[situation] = self.retrievals.get(situation, 0) + 1
        text = _NUMBER.sub(str(number), remembered) if number is not None else remembered
        return Line(text, 0.95, situation, recalled=True)

    def _own(self, situation: str, item: Item, offer: int | None, price: int | None) -> str:
        """The learner's own words: English with the pack's address and currency, and now and then
        the place's words."""
        pack, rng = self.pack, self._rng
        address = rng.choice(pack.rules.respectful_address[:2]) if pack.rules.respectful_address else "sir"
        money = pack.currency_word
        switch = rng.random() < self.shape.switch_p
        cue = _cue(pack, situation, rng) if switch else ""
        name = item.local if switch else (item.spoken or f"{item.name.lower()}s")
        text = {
            "greet": f"Hello {address}, good day. How much is the {name}?",
            "ask": f"{address.capitalize()}, how much for the {name}?",
            "open": f"That is too expensive, {address}. I can give {offer} {money}.",
            "counter": f"Please, {address}, {offer} {money} is fair.",
            "accept": f"Okay {address}, {price} {money}, deal.",
            "goodbye": f"No thank you {address}, it is too much. Goodbye.",
        }[situation]
        return f"{cue} {text}" if cue else text


_CUES = {"greet": "greeting", "ask": "inquiry", "open": "pushback", "counter": "pushback", "accept": "accept",
         "goodbye": "walk"}
_PHRASE_USES = {"greet": "greeting", "ask": "inquiry", "open": "haggling", "counter": "haggling", "accept": "deal",
                "goodbye": "walkaway"}


def _cue(pack: Scenario, situation: str, rng: random.Random) -> str:
    """A few words of the place's language for the situation: a cue word, or a phrase of the pack."""
    words: tuple[str, ...] = pack.cues.model_dump()[_CUES[situation]]
    phrases = [p.text for p in pack.phrases if p.use == _PHRASE_USES[situation]]
    choices = [*words, *phrases]
    return rng.choice(choices).capitalize() + "," if choices else ""


def _round(value: float) -> int:
    step = 5 if value < 1000 else 50 if value < 10000 else 500
    return max(step, step * round(value / step))
