"""A session's changes: frozen, typed records, one class per kind of change.

Every change of a session's state is one of these. The session machine decides what happens and
says it as a change; `session.fold.apply` applies it, to the live session and, in the Neo4j
mirror, to the mirror's own copy, so each rule of the state exists once. A change carries what
was decided, never what the state will make of it: the learner's offer as the engine read it,
the quote the engine let stand, the checkpoint an undo goes back to.

Every change has `session_id`, `version` and `at`. `version` rises by one per change per session,
which lets the mirror write idempotently and say how far a session is durable. `at` is when the
change happened (the wall clock of the frame or timer that caused it). `kind` names the class in
logs. They are named tuples, not frozen dataclasses: a turn makes two with some twenty fields each,
and a named tuple is made in a third of a frozen dataclass's time.
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

from schemas.brain import Ledger
from schemas.enums import LanguageCode, Level, OfferAssessment, Outcome, Stage
from schemas.fluency import Fluency
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
    "SpeechHeard",
    "SummaryWritten",
    "TurnUndone",
    "UnclearAnswered",
    "VendorTurnTaken",
    "WelcomedBack",
    "for_every_kind",
]


class SessionStarted(NamedTuple):
    """A new session: its scenario, its learner and where the vendor's mood starts."""

    session_id: str
    version: int
    at: float
    scenario: str
    learner_id: str | None
    input_language: LanguageCode
    target_language: LanguageCode
    level: Level
    stage: Stage
    happiness: int
    recall: LearnerRecall | None = None  # what the vendor remembers of a known learner
    scenario_version: int = 1  # the version of the scenario's pack it plays, for its whole life (docs/studio.md)

    @property
    def kind(self) -> str:
        return "session"


class SceneSet(NamedTuple):
    """A `scene` frame: what the learner holds, the item it made current, the languages in play."""

    session_id: str
    version: int
    at: float
    id: str | None  # the frame that asked (None: the session itself, as in a test)
    object_grabbed: str | None
    item: str | None
    input_language: LanguageCode
    target_language: LanguageCode

    @property
    def kind(self) -> str:
        return "scene"


class LearnerTurnTaken(NamedTuple):
    """A learner's turn, as the engine read it, now waiting for the vendor's answer.

    `stage`, `happiness` and `object_grabbed` are the session's as the turn began; `quote` is the
    turn item's standing quote; `session_item` the item under negotiation after it; `before` the
    checkpoint an undo of this turn goes back to."""

    session_id: str
    version: int
    at: float
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

    @property
    def kind(self) -> str:
        return "learner_turn"


class VendorTurnTaken(NamedTuple):
    """The vendor's validated answer to learner turn `turn`. `seq` is the session's seq after every
    event of the answer (its tips and report included); `reply_seq` is the reply's own."""

    session_id: str
    version: int
    at: float
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

    @property
    def kind(self) -> str:
        return "vendor_turn"


class ClosingReplied(NamedTuple):
    """A transcript after the end, answered with a closing line: no turn."""

    session_id: str
    version: int
    at: float
    id: str
    seq: int
    text: str
    reply: str

    @property
    def kind(self) -> str:
        return "closing_reply"


class UnclearAnswered(NamedTuple):
    """A transcript too unsure to act on, answered with a request to say it again: no turn."""

    session_id: str
    version: int
    at: float
    id: str
    seq: int
    text: str
    confidence: float | None

    @property
    def kind(self) -> str:
        return "unclear"


class HintGiven(NamedTuple):
    """The `hint` command: a hint of `level` for the learner's next line."""

    session_id: str
    version: int
    at: float
    id: str
    level: int
    seq: int
    situation: str = ""  # the hint's situation and, for a reveal (level 2+), its line: a review item
    text: str = ""
    english: str = ""

    @property
    def kind(self) -> str:
        return "hint"


class Repeated(NamedTuple):
    """The `repeat` command: the vendor's last line again."""

    session_id: str
    version: int
    at: float
    id: str
    seq: int

    @property
    def kind(self) -> str:
        return "repeat"


class TurnUndone(NamedTuple):
    """The `undo` command: learner turn `turn` and its answer taken back, `restored` the state before it."""

    session_id: str
    version: int
    at: float
    id: str | None  # the frame that asked (None: the session itself, as in a test)
    turn: int
    seq: int
    restored: Checkpoint

    @property
    def kind(self) -> str:
        return "undo"


class Nudged(NamedTuple):
    """A silence below the limit: the vendor's nudge, and the hint it offered unasked, if any.
    `id`: the `silence` frame that said so (None when the timer ran out)."""

    session_id: str
    version: int
    at: float
    id: str | None
    seq: int
    offered_hint: bool

    @property
    def kind(self) -> str:
        return "nudge"


class EndedNow(NamedTuple):
    """The session ended outside a turn: the `stop` command or the last silence in a row."""

    session_id: str
    version: int
    at: float
    id: str | None
    seq: int
    outcome: Outcome  # STOPPED or TIMED_OUT
    previous_stage: Stage

    @property
    def kind(self) -> str:
        return "ended"


class WelcomedBack(NamedTuple):
    """A player back after a long absence, greeted with a recap."""

    session_id: str
    version: int
    at: float
    seq: int
    text: str

    @property
    def kind(self) -> str:
        return "welcome_back"


class PlaybackHeard(NamedTuple):
    """A `playback` frame: how much of the vendor's answer to `turn` the learner heard, and the
    quote that stands again when its price went unheard (`quote_unbound`)."""

    session_id: str
    version: int
    at: float
    id: str
    turn: int
    heard_chars: int
    interrupted: bool
    seq: int
    quote_unbound: bool
    unbound_item: str | None
    unbound_to: int | None

    @property
    def kind(self) -> str:
        return "playback"


class SummaryWritten(NamedTuple):
    """The running summary changed: a refresh, or an undo that took it back."""

    session_id: str
    version: int
    at: float
    text: str
    turn: int  # the last learner turn it covers
    previous: str
    previous_turn: int

    @property
    def kind(self) -> str:
        return "summary"


class SpeechHeard(NamedTuple):
    """The recogniser heard the learner's utterance `id`: its `speech` event took `seq`. The turn
    its transcript makes is a change of its own, with the same id (so the id is not remembered here).
    `fluency`: the utterance's figures (voice/fluency.py), added to the session's."""

    session_id: str
    version: int
    at: float
    id: str
    seq: int
    fluency: Fluency | None = None

    @property
    def kind(self) -> str:
        return "speech"


Change = (SessionStarted | SceneSet | LearnerTurnTaken | VendorTurnTaken | ClosingReplied | UnclearAnswered
          | HintGiven | Repeated | TurnUndone | Nudged | EndedNow | WelcomedBack | PlaybackHeard | SummaryWritten
          | SpeechHeard)
"""Any change: each has `session_id`, `version`, `at` and its class's `kind`."""

# Every kind of change, for the tables that must cover them all (`session/fold.py`, the mirror's rows).
CHANGE_TYPES: tuple[type[Change], ...] = (
    SessionStarted, SceneSet, LearnerTurnTaken, VendorTurnTaken, ClosingReplied, UnclearAnswered, HintGiven,
    Repeated, TurnUndone, Nudged, EndedNow, WelcomedBack, PlaybackHeard, SummaryWritten, SpeechHeard,
)

T = TypeVar("T")


def for_every_kind(table: dict[type[Change], T], what: str) -> dict[type[Change], T]:
    """`table`, once it has an entry for every kind of change (else a RuntimeError naming the missing,
    at import: a new kind cannot be forgotten by the fold or the mirror's rows)."""
    missing = [kind.__name__ for kind in CHANGE_TYPES if kind not in table]
    if missing:
        raise RuntimeError(f"no {what} for {', '.join(missing)}")
    return table
