"""Scripted learners for tests and load-test bots.

A persona reads a `LearnerView` (what a client learns from the server's `reply` events) and says
its next line. Personas are deterministic: the same replies always draw the same lines, so a test
can pin an outcome and a load test can replay a mix. Each persona keeps a little memory of its own
(the first quote it heard, its last offer), so use one instance per session.

Lines mix English and Hinglish the way learners at the stall talk, with prices in digits and
sometimes in Hindi words ("dedh sau"). They avoid words that contain another item's Hindi name
(such as "daam", which holds "aam", mango), because the server's item spotting matches substrings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from schemas.scenario import DEFAULT_SCENARIO, load_scenario

SCENE_ITEMS = ("Tomato", "Apple", "Orange", "Pumpkin", "Watermelon")  # the Jaipur scene's


def scene_items(scenario: str = DEFAULT_SCENARIO) -> tuple[str, ...]:
    """The items a learner can pick up in a scenario's scene (all its items if none is marked)."""
    items = load_scenario(scenario).items
    return tuple(i.name for i in items if i.in_scene) or tuple(i.name for i in items)
TERMINAL = frozenset({"DEAL", "CLOSURE"})

# Prices a learner might say in Hindi; anything else is said in digits.
HINDI_PRICES = {
    20: "bees", 25: "pachees", 30: "tees", 35: "paintees", 40: "chaalis", 50: "pachaas",
    70: "sattar", 75: "pachattar", 80: "assi", 90: "nabbe", 100: "ek sau", 120: "ek sau bees",
    150: "dedh sau", 200: "do sau", 250: "dhai sau",
}


def round_offer(value: float) -> int:
    """Round an offer the way people say it: to 5 rupees from 50 up, else to the rupee."""
    if value >= 50:
        return 5 * round(value / 5)
    return max(1, round(value))


def price_words(price: int, hindi: bool) -> str:
    """`price` in Hindi words when asked and known, else in digits."""
    return HINDI_PRICES.get(price, str(price)) if hindi else str(price)


@dataclass(frozen=True, slots=True)
class LearnerView:
    """What the learner knows after the vendor's last reply."""

    stage: str = "GREETING"
    happiness: int = 50
    counter_price: int | None = None
    item: str | None = None
    turn: int = 0
    last_reply: str = ""

    @classmethod
    def from_reply(cls, event: Mapping[str, Any]) -> LearnerView:
        """Build a view from a `reply` event in its wire (JSON) form."""
        stage = event["negotiation_state"]
        return cls(
            stage=str(getattr(stage, "value", stage)),
            happiness=int(event["happiness_score"]),
            counter_price=event.get("counter_price"),
            item=event.get("item"),
            turn=int(event["turn"]),
            last_reply=str(event.get("text", "")),
        )

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> LearnerView:
        """Build a view from a `SessionState` (a `welcome`, a `snapshot`, an `undo`)."""
        vendor = [line for line in state.get("transcript") or () if line.get("role") == "vendor"]
        return cls(
            stage=str(state["stage"]),
            happiness=int(state["happiness_score"]),
            counter_price=state.get("vendor_quote"),
            item=state.get("item"),
            turn=int(state["turn"]),
            last_reply=str(vendor[-1]["text"]) if vendor else "",
        )

    @property
    def is_over(self) -> bool:
        return self.stage in TERMINAL


MoveKind = Literal["say", "hint", "repeat", "undo", "stop", "silence", "playback"]


@dataclass(frozen=True, slots=True)
class Move:
    """What a learner does next: say a line (a `transcript`), or a coaching frame (docs/protocol.md
    §3): a `command` (hint, repeat, undo, stop), a `silence`, or a `playback` report of the last reply."""

    kind: MoveKind = "say"
    text: str = ""
    confidence: float | None = None  # on a `say`: the recogniser's confidence (under 0.7: unclear)
    heard_chars: int = 0  # on a `playback`, for the reply to the view's turn
    interrupted: bool = True


@dataclass(frozen=True, slots=True)
class Expectation:
    """Where a persona should end up against the rule-based vendor."""

    summary: str
    end_stages: frozenset[str]
    deal: bool
    end_moods: frozenset[str]  # allowed moods at the end
    visits: tuple[str, ...] = ()  # stages the run passes through, in this order
    within_turns: int = 30


class Persona:
    """Base class: item facts, memory of the first quote, and the turn counter."""

    name: ClassVar[str] = ""
    expected: ClassVar[Expectation]

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        found = load_scenario(scenario).item(item)
        if found is None:
            raise ValueError(f"unknown item {item!r}")
        self.item = found.name
        self.word = found.name.lower()
        self.hindi = found.local
        self.first_quote: int | None = None
        self.offer: int | None = None
        self.lines = 0  # lines said so far

    def next_line(self, view: LearnerView) -> str:
        if self.first_quote is None and view.counter_price is not None:
            self.first_quote = view.counter_price
        line = "Dhanyavaad, bhaiya." if view.is_over else self.line(view)
        self.lines += 1
        return line

    def line(self, view: LearnerView) -> str:
        raise NotImplementedError

    def next_move(self, view: LearnerView) -> Move:
        """What to do next: these personas only talk; the coaching ones (coach_personas.py) do more."""
        return Move(text=self.next_line(view))

    def observe(self, event: Mapping[str, Any]) -> None:
        """An event one of this persona's moves drew: a reply, or a `hint`, `repeat`, `undo` or `heard`."""

    def share(self, fraction: float) -> int:
        """An offer as a share of the first quote heard."""
        assert self.first_quote is not None
        return round_offer(self.first_quote * fraction)


class Polite(Persona):
    """Greets, asks, opens near 30 % of the quote and comes up in steps until the prices meet."""

    name = "polite"
    expected = Expectation(
        summary="DEAL within 8 turns, at 40-55 % of the first quote, vendor neutral or better",
        end_stages=frozenset({"DEAL"}),
        deal=True,
        end_moods=frozenset({"neutral", "friendly", "enthusiastic"}),
        visits=("GREETING", "INQUIRY", "HAGGLING", "DEAL"),
        within_turns=8,
    )
    OPEN, STEP, LIMIT = 0.30, 0.07, 0.55

    def line(self, view: LearnerView) -> str:
        if self.lines == 0:
            return "Namaste bhaiya! Aap kaise ho?"
        if self.first_quote is None or view.counter_price is None:
            return f"Bhaiya, ye {self.hindi} kitne ka hai?"
        counter = view.counter_price
        planned = self.share(min(self.LIMIT, self.OPEN + self.STEP * self._offers()))
        if counter <= max(planned, self.share(0.5)) or self.lines >= 12:
            return ("Theek hai bhaiya, pakka!", "Chalo, theek hai, pakka.")[self.lines % 2]
        self.offer = planned
        return self._offer_line(planned)

    def _offers(self) -> int:
        return max(0, self.lines - 2)  # greeting and question come first

    def _offer_line(self, price: int) -> str:
        said = price_words(price, hindi=self.lines % 3 == 0)
        options = (
            f"Bahut mehenga hai, bhaiya. {said} mein de do?",
            f"Thoda kam karo na bhaiya, {said} rupaye?",
            f"Bhaiya, aapke {self.hindi} bahut fresh hain, par {said} mein de do, please.",
            f"Do kilo le raha hoon bhaiya, {said} mein doge?",
        )
        return options[self.lines % len(options)]


class Lowballer(Persona):
    """Asks the price, then offers an eighth of whatever is quoted, turn after turn."""

    name = "lowballer"
    expected = Expectation(
        summary="no deal: every offer is an insult, the vendor sours and closes (CLOSURE, angry)",
        end_stages=frozenset({"CLOSURE"}),
        deal=False,
        end_moods=frozenset({"angry"}),
        visits=("GREETING", "INQUIRY", "HAGGLING", "CLOSURE"),
        within_turns=8,
    )

    def line(self, view: LearnerView) -> str:
        if view.counter_price is None:
            return f"Hello, {self.word} kitne ka?"
        price = round_offer(view.counter_price * 0.12)
        self.offer = price
        options = (
            f"{price} rupees, that is all it is worth.",
            f"Itna? {price} dunga, bas.",
            f"I will give you {price}, final.",
            f"Come on, {price} rupees for the lot.",
        )
        return options[self.lines % len(options)]


class Walker(Persona):
    """Haggles once, says "Chalo, rehne do", and comes back when Ramesh calls after them."""

    name = "walker"
    expected = Expectation(
        summary="walks once, is called back, then DEAL within 8 turns at <= 60 % of the quote",
        end_stages=frozenset({"DEAL"}),
        deal=True,
        end_moods=frozenset({"neutral", "friendly", "enthusiastic"}),
        visits=("GREETING", "INQUIRY", "HAGGLING", "WALKAWAY", "HAGGLING", "DEAL"),
        within_turns=8,
    )
    TARGET = 0.6  # takes any price at or under this share of the first quote

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        super().__init__(item, scenario)
        self.walked = False

    def line(self, view: LearnerView) -> str:
        if view.counter_price is None:
            return f"Namaste bhaiya, {self.hindi} kitne ka hai?"
        counter = view.counter_price
        if view.stage == "INQUIRY":
            self.offer = self.share(0.4)
            return f"Bhaiya, {self.offer} mein de do?"
        if view.stage == "WALKAWAY":
            if counter <= self.share(self.TARGET):
                return f"Acha, theek hai bhaiya, {counter} mein de do."
            self.offer = self.share(0.5)
            return f"Ruko bhaiya, {self.offer} mein?"
        if not self.walked:
            self.walked = True
            return "Bahut mehenga hai bhaiya. Chalo, rehne do."
        if counter <= self.share(self.TARGET):
            return "Theek hai, pakka."
        self.offer = self.share(0.5)
        return f"{self.offer} rupaye, last offer bhaiya."


class Rude(Persona):
    """Sneers at the goods and calls Ramesh names until he sends them off."""

    name = "rude"
    expected = Expectation(
        summary="CLOSURE within 6 turns with the vendor angry; never a deal",
        end_stages=frozenset({"CLOSURE"}),
        deal=False,
        end_moods=frozenset({"angry", "annoyed"}),
        visits=("GREETING", "INQUIRY", "HAGGLING", "CLOSURE"),
        within_turns=6,
    )

    def line(self, view: LearnerView) -> str:
        if view.counter_price is None:
            return f"Oye, {self.word} kitne ka?"
        if view.stage == "WALKAWAY":
            return "Bye, the next stall is better, chor."
        if self.offer is None:
            self.offer = round_offer(view.counter_price * 0.15)
            return f"Kya bakwas hai, these {self.hindi} are rotten. {self.offer} rupees."
        options = (
            "You are a chor, a cheat!",
            "Rubbish stall, stupid prices.",
            "Loot macha rakhi hai, you thief.",
        )
        return options[self.lines % len(options)]


class Relative(Persona):
    """Haggles in relative terms, never naming a price: half of the quote, then a share off it, then
    "meet me in the middle". The engine must read each against the standing quote (issue 40)."""

    name = "relative"
    expected = Expectation(
        summary="DEAL within 10 turns, every offer made relative to the quote (half, percent off, the middle)",
        end_stages=frozenset({"DEAL"}),
        deal=True,
        end_moods=frozenset({"neutral", "friendly", "enthusiastic"}),
        visits=("GREETING", "INQUIRY", "HAGGLING", "DEAL"),
        within_turns=10,
    )
    LIMIT = 0.6  # takes any price at or under this share of the first quote

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        super().__init__(item, scenario)
        self.made = 0  # relative offers made so far

    def line(self, view: LearnerView) -> str:
        if self.lines == 0:
            return "Namaste bhaiya!"
        if view.counter_price is None:
            return f"Bhaiya, ye {self.hindi} kitne ka hai?"
        counter = view.counter_price
        if self.offer is not None and (counter <= self.share(self.LIMIT) or self.lines >= 9):
            return ("Theek hai bhaiya, pakka!", "Chalo, theek hai, pakka.")[self.lines % 2]
        last, made = self.offer, self.made
        self.made += 1
        if last is None or made == 0:
            self.offer = round(counter * 0.5)
            return ("That is a lot, bhaiya. Could you do half of that?", "Bhaiya, aadha kar do na?")[made % 2]
        if made == 1:
            self.offer = round(counter * 0.7)
            return "Okay, 30 percent off, then?"
        self.offer = round((counter + last) / 2)
        return ("Chalo bhaiya, meet me in the middle?", "Let us split the difference, bhaiya.")[made % 2]


PERSONAS: dict[str, type[Persona]] = {
    persona.name: persona for persona in (Polite, Lowballer, Walker, Rude, Relative)
}
EXPECTED_OUTCOMES: dict[str, str] = {name: p.expected.summary for name, p in PERSONAS.items()}
