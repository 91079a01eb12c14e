"""A session's changes: frozen, typed records, one class per kind of change.

Every change of a session's state is one of these. The session machine decides what happens and
says it as a change; `session.fold.apply` applies it, to the live session and, in the Neo4j
mirror, to the mirror's own copy, so each rule of the state exists once. A change carries what
was decided, never what the state will make of it: the learner's offer as the engine read it,
the quote the engine let stand, the checkpoint an undo goes back to.

`version` rises by one per change per session, which lets the mirror write idempotently and say
how far a session is durable. `at` is when the change happened (the wall clock of the frame or
timer that caused it). `kind` names the class on the wire to the mirror and in logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from schemas.brain import Ledger
from schemas.enums import LanguageCode, Level, OfferAssessment, Outcome, Stage
from schemas.learner import LearnerRecall
from session.coaching import Checkpoint
from session.offers import OfferReading

__all__ = [
    "CHANGE_TYPES",
    "Change",
    "ClosingReplied",
    "EndedNow",
    "HintGiven",
    "LearnerTurnTaken",
    "Nudged",
    "PlaybackHeard",
    "Repeated",
    "SceneSet",
        "SessionStarted",
    "SummaryWritten",
    "TurnUndone",
    "UnclearAnswered",
    "VendorTurnTaken",
    "WelcomedBack",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """What every change has: whose, which, and when."""

    kind: ClassVar[str] = ""
    session_id: str
    version: int
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStarted(Change):
    """A new session: its scenario, its learner and where the vendor's mood starts."""

    kind: ClassVar[str] = "session"
    scenario: str
    learner_id: str | None
    input_language: LanguageCode
    target_language: LanguageCode
    level: Level
    stage: Stage
    happiness: int
    recall: LearnerRecall | None = None  # what the vendor remembers of a known learner


@dataclass(frozen=True, slots=True, kw_only=True)
class SceneSet(Change):
    """A `scene` frame: what the learner holds, the item it made current, the languages in play."""

    kind: ClassVar[str] = "scene"
    id: str
    object_grabbed: str | None
    item: str | None
    input_language: LanguageCode
    target_language: LanguageCode


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnerTurnTaken(Change):
    """A learner's turn, as the engine read it, now waiting for the vendor's answer.

    `stage`, `happiness` and `object_grabbed` are the session's as the turn began; `quote` is the
    turn item's standing quote; `session_item` the item under negotiation after it; `before` the
    checkpoint an undo of this turn goes back to."""

    kind: ClassVar[str] = "learner_turn"
    id: str | None
    turn: int
    text: str
    item: str | None
    offer: int | None
    assessment: OfferAssessment
    reading: OfferReading | None
    said: tuple[int, ...]
    session_item: str | None
    quote: int | None
    stage: Stage
    happiness: int
    object_grabbed: str | None
    before: Checkpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class VendorTurnTaken(Change):
    """The vendor's validated answer to learner turn `turn`. `seq` is the session's seq after every
    event of the answer (its tips and report included); `reply_seq` is the reply's own."""

    kind: ClassVar[str] = "vendor_turn"
    turn: int
    text: str
    stage: Stage
    previous_stage: Stage
    happiness: int
    quote: int | None
    item: str | None
    flags: tuple[str, ...]
    assessment: OfferAssessment
    forced: bool
    seq: int
    reply_seq: int
    outcome: Outcome | None
    ledger: Ledger
    suggestion: str = ""
    suggestion_english: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosingReplied(Change):
    """A transcript after the end, answered with a closing line: no turn."""

    kind: ClassVar[str] = "closing_reply"
    id: str
    seq: int
    text: str
    reply: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UnclearAnswered(Change):
    """A transcript too unsure to act on, answered with a request to say it again: no turn."""

    kind: ClassVar[str] = "unclear"
    id: str
    seq: int
    text: str
    confidence: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HintGiven(Change):
    """The `hint` command: a hint of `level` for the learner's next line."""

    kind: ClassVar[str] = "hint"
    id: str
    level: int
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Repeated(Change):
    """The `repeat` command: the vendor's last line again."""

    kind: ClassVar[str] = "repeat"
    id: str
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnUndone(Change):
    """The `undo` command: learner turn `turn` and its answer taken back, `restored` the state before it."""

    kind: ClassVar[str] = "undo"
    id: str
    turn: int
    seq: int
    restored: Checkpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class Nudged(Change):
    """A silence below the limit: the vendor's nudge, and the hint it offered unasked, if any.
    `id`: the `silence` frame that said so (None when the timer ran out)."""

    kind: ClassVar[str] = "nudge"
    id: str | None
    seq: int
    offered_hint: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class EndedNow(Change):
    """The session ended outside a turn: the `stop` command or the last silence in a row."""

    kind: ClassVar[str] = "ended"
    id: str | None
    seq: int
    outcome: Outcome  # STOPPED or TIMED_OUT
    previous_stage: Stage


@dataclass(frozen=True, slots=True, kw_only=True)
class WelcomedBack(Change):
    """A player back after a long absence, greeted with a recap."""

    kind: ClassVar[str] = "welcome_back"
    seq: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaybackHeard(Change):
    """A `playback` frame: how much of the vendor's answer to `turn` the learner heard, and the
    quote that stands again when its price went unheard (`quote_unbound`)."""

    kind: ClassVar[str] = "playback"
    id: str
    turn: int
    heard_chars: int
    interrupted: bool
    seq: int
    quote_unbound: bool
    unbound_item: str | None
    unbound_to: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryWritten(Change):
    """The running summary changed: a refresh, or an undo that took it back."""

    kind: ClassVar[str] = "summary"
    text: str
    turn: int  # the last learner turn it covers
    previous: str
    previous_turn: int


# Every kind of change, for the tables that must cover them all (`session/fold.py`, the mirror's rows).
CHANGE_TYPES: tuple[type[Change], ...] = (
    SessionStarted, SceneSet, LearnerTurnTaken, VendorTurnTaken, ClosingReplied, UnclearAnswered, HintGiven,
    Repeated, TurnUndone, Nudged, EndedNow, WelcomedBack, PlaybackHeard, SummaryWritten,
)
