"""Coaching personas: scripted learners that use the coaching side of the protocol.

Each haggles like `Polite` (personas.py) and, on top of it, exercises one feature of
docs/coaching.md, so the bots' runner (clients/bots/play.py) and the invariant checker meet every
coaching event under load:

- `hinter` asks for hints before its lines: one (level 0) before its first, two (levels 0 and 1)
  before its second, and from then on three (0, 1 and 2), saying the revealed line (the level-2
  `hint` event's `text`) instead of its own.
- `undoer` asks `repeat` once it has a price, opens with an insulting offer, takes it back with
  `undo` (and asks `repeat` again, which must give the line before the undone turn) and offers
  better; later it takes back two turns in a row and plays them again.
- `mumbler` says some lines with a low recogniser `confidence` (0.3), which the vendor must ask to
  hear again (a reply marked `clarify`), then says the same line clearly.
- `silent` falls silent (the `silence` frame, as a client's voice detection sends it) once before
  its second line and twice in a row before its fourth, and gets a nudge each time; never three
  in a row, which would end the session.
- `barger` talks over every turn reply (`playback` with `interrupted: true`): on odd turns before
  the first digit of the line, so a new price goes unheard and unbinds, on even turns just after
  the price.
- `sleeper` haggles three lines, then stays silent until the session ends `timed_out`.
- `quitter` haggles three lines, asks `repeat`, then `stop`s the session (outcome `stopped`).

They are deterministic like the other personas: the same events draw the same moves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clients.bots.personas import PERSONAS, Expectation, LearnerView, Move, Persona, Polite
from schemas.scenario import DEFAULT_SCENARIO

DEALS = Expectation(
    summary="DEAL, like polite, after the coaching moves",
    end_stages=frozenset({"DEAL"}),
    deal=True,
    end_moods=frozenset({"neutral", "friendly", "enthusiastic"}),
    visits=("GREETING", "INQUIRY", "HAGGLING", "DEAL"),
    within_turns=12,
)
MUMBLE_CONFIDENCE = 0.3  # under the server's CONFIDENCE_CLARIFY_THRESHOLD (0.7 by default)


def price_spans(text: str, price: int) -> list[tuple[int, int]]:
    """Where `price` is written in digits in `text` (as `120` or `1,200`), as (start, end) spans."""
    forms = {str(price), f"{price:,}"}
    return sorted((m.start(), m.end()) for form in forms
                  for m in re.finditer(rf"(?<![\d,]){re.escape(form)}(?!\d)", text))


class Hinter(Polite):
    """Asks for more hints as the haggle goes on, and says the revealed line once it has one."""

    name = "hinter"
    expected = DEALS

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        super().__init__(item, scenario)
        self.asked = 0  # hints asked for the coming line
        self.reveal: str | None = None

    def next_move(self, view: LearnerView) -> Move:
        if not view.is_over and self.asked < min(self.lines, 2) + 1:
            self.asked += 1
            return Move("hint")
        line = self.next_line(view)  # keeps the persona's memory (first quote, lines said)
        said = self.reveal if self.reveal and not view.is_over else line
        self.asked, self.reveal = 0, None
        return Move(text=said)

    def observe(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "hint" and isinstance(event.get("level"), int) and event["level"] >= 2:
            self.reveal = str(event.get("text") or "") or None


class Undoer(Polite):
    """Regrets an insulting first offer and takes it back; later takes back two turns at once."""

    name = "undoer"
    expected = DEALS
    LOWBALL = 0.15  # of the first quote: under the pack's insult band

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        super().__init__(item, scenario)
        self.undos_due = 0
        self.triggered: set[int] = set()  # the lines after which an undo was already planned
        self.repeat_due = False

    def line(self, view: LearnerView) -> str:
        if self.lines == 2 and 3 not in self.triggered and view.counter_price is not None:
            self.offer = self.share(self.LOWBALL)
            return f"Bas {self.offer} rupaye, bhaiya."
        return super().line(view)

    def next_move(self, view: LearnerView) -> Move:
        if view.is_over:
            return super().next_move(view)
        if self.undos_due:
            self.undos_due -= 1
            return Move("undo")
        if self.repeat_due or (self.first_quote is None and view.counter_price is not None):
            self.repeat_due = False
            self.first_quote = self.first_quote or view.counter_price
            return Move("repeat")
        for after, count in ((3, 1), (5, 2)):  # after the lowball; later, two turns back at once
            if self.lines == after and after not in self.triggered and view.turn >= count:
                self.triggered.add(after)
                self.undos_due = count - 1
                return Move("undo")
        return super().next_move(view)

    def observe(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "undo":
            self.lines = max(0, self.lines - 1)  # that line is unsaid: it is played again
            self.offer = None
            self.repeat_due = not self.undos_due  # "what did you say before that?"


class Mumbler(Polite):
    """Mumbles its question and some offers; says the line again clearly when asked."""

    name = "mumbler"
    expected = DEALS
    MUMBLED = frozenset({1, 3})  # lines said unclearly first

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        super().__init__(item, scenario)
        self.mumbled: str | None = None
        self.again: str | None = None

    def next_move(self, view: LearnerView) -> Move:
        if self.again is not None and not view.is_over:
            line, self.again = self.again, None
            return Move(text=line)
        mumble = self.lines in self.MUMBLED and not view.is_over
        line = self.next_line(view)
        self.mumbled = line if mumble else None
        return Move(text=line, confidence=MUMBLE_CONFIDENCE if mumble else None)

    def observe(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "reply":
            self.again = self.mumbled if event.get("mark") == "clarify" else None
            self.mumbled = None


class Silent(Polite):
    """Falls silent before some lines and is nudged; speaks before the third silence in a row."""

    name = "silent"
    expected = DEALS
    QUIET = {1: 1, 3: 2}  # before line n, this many silences in a row (the server ends at 3)

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        super().__init__(item, scenario)
        self.quiet: dict[int, int] = {}

    def next_move(self, view: LearnerView) -> Move:
        done = self.quiet.get(self.lines, 0)
        if not view.is_over and done < self.QUIET.get(self.lines, 0):
            self.quiet[self.lines] = done + 1
            return Move("silence")
        return super().next_move(view)


class Barger(Polite):
    """Talks over every turn reply: before its price on odd turns, just after it on even ones."""

    name = "barger"
    expected = Expectation(
        summary="DEAL, like polite, though every other price goes unheard",
        end_stages=frozenset({"DEAL"}),
        deal=True,
        end_moods=frozenset({"neutral", "friendly", "enthusiastic"}),
        within_turns=16,
    )

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        super().__init__(item, scenario)
        self.barged = 0  # the last turn whose reply was talked over

    def next_move(self, view: LearnerView) -> Move:
        if view.is_over or view.turn <= self.barged or not view.last_reply:
            return super().next_move(view)
        self.barged = view.turn
        return Move("playback", heard_chars=self.cut(view), interrupted=True)

    @staticmethod
    def cut(view: LearnerView) -> int:
        """How much of the reply the learner heard before talking over it."""
        text = view.last_reply
        if view.turn % 2:  # before any digit: a price in it goes unheard
            digit = next((i for i, c in enumerate(text) if c.isdigit()), None)
            return digit if digit is not None else len(text) // 2
        spans = price_spans(text, view.counter_price) if view.counter_price is not None else []
        return spans[0][1] if spans else len(text)  # just after the price, or all of it

    def observe(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "heard" and event.get("quote_unbound") is True:
            quote = event.get("vendor_quote")
            if quote is None or self.first_quote is None:
                self.first_quote = quote  # the first quote was never heard


class Sleeper(Polite):
    """Haggles three lines, then stays silent until the vendor gives up (outcome timed_out)."""

    name = "sleeper"
    expected = Expectation(
        summary="falls silent after 3 lines: nudges, then CLOSURE (timed_out)",
        end_stages=frozenset({"CLOSURE"}),
        deal=False,
        end_moods=frozenset({"neutral", "friendly", "enthusiastic", "annoyed", "angry"}),
        within_turns=3,
    )
    AWAKE = 3

    def next_move(self, view: LearnerView) -> Move:
        if self.lines >= self.AWAKE and not view.is_over:
            return Move("silence")
        return super().next_move(view)


class Quitter(Polite):
    """Haggles three lines, asks to hear the last one again, then stops (outcome stopped)."""

    name = "quitter"
    expected = Expectation(
        summary="3 lines, a repeat, then stop: CLOSURE (stopped)",
        end_stages=frozenset({"CLOSURE"}),
        deal=False,
        end_moods=frozenset({"neutral", "friendly", "enthusiastic", "annoyed", "angry"}),
        within_turns=3,
    )
    QUIT_AFTER = 3

    def __init__(self, item: str = "Tomato", scenario: str = DEFAULT_SCENARIO) -> None:
        super().__init__(item, scenario)
        self.repeated = False

    def next_move(self, view: LearnerView) -> Move:
        if self.lines < self.QUIT_AFTER or view.is_over:
            return super().next_move(view)
        if not self.repeated:
            self.repeated = True
            return Move("repeat")
        return Move("stop")


COACH_PERSONAS: dict[str, type[Persona]] = {
    persona.name: persona for persona in (Hinter, Undoer, Mumbler, Silent, Barger, Sleeper, Quitter)
}
ALL_PERSONAS: dict[str, type[Persona]] = {**PERSONAS, **COACH_PERSONAS}
