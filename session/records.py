"""The records a negotiation keeps: a line of its history, a turn waiting for the vendor, a turn's outcome.

Plain data, apart from `Negotiation` (`session/negotiation.py`) so that the parts that only read
them (the report, the tips, the mirror's rebuild) need not know how a negotiation is played.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.brain import HistoryLine
from schemas.enums import OfferAssessment, Stage
from schemas.frames import MoodChanged, Reply, SessionEnded, StageChanged
from session.offers import OfferReading
from session.rules import Override, Verdict
from session.spoken import Rewrite

__all__ = ["PendingTurn", "TurnOutcome", "TurnRecord"]


@dataclass(slots=True)
class TurnRecord:
    turn: int
    role: str  # "user" or "vendor"
    text: str
    stage: Stage
    happiness: int
    at: float
    item: str | None = None
    object_grabbed: str | None = None
    offer: int | None = None
    read_from: str = ""  # on learner turns: the words an offer was read from, sure or not (session/offers.py)
    quote: int | None = None
    assessment: OfferAssessment = OfferAssessment.NONE
    client_id: str | None = None
    seq: int | None = None  # the reply's seq, on vendor turns
    flags: tuple[str, ...] = ()
    suggestion: str = ""  # on vendor turns: the learner line the brain suggested (the hint's reveal)
    suggestion_english: str = ""
    heard: int | None = None  # on vendor turns: characters the learner heard, when a barge-in cut it short
    _line: HistoryLine | None = field(default=None, repr=False, compare=False)

    def as_line(self) -> HistoryLine:
        """The record as a brain sees it, built once (a barge-in report rebuilds it): a vendor line
        the learner cut short shows only what was heard, ending in an em dash."""
        if self._line is None:
            text = self.text if self.heard is None else self.text[: self.heard].rstrip() + "—"
            self._line = HistoryLine(turn=self.turn, role=self.role, text=text)
        return self._line


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """A learner turn that has been accepted and waits for the vendor's answer."""

    turn: int
    text: str
    client_id: str | None
    item: str | None
    offer: int | None
    assessment: OfferAssessment
    received_at: float
    reading: OfferReading | None = None  # how the offer was read, sure or not (session/offers.py)
    said: tuple[int, ...] = ()  # every number in the learner's words: the vendor may say them back


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    events: tuple[Reply | MoodChanged | StageChanged | SessionEnded, ...]
    verdict: Verdict | None
    overrides: tuple[Override, ...] = ()
    rewrites: tuple[Rewrite, ...] = ()  # what the engine changed in the brain's words (session/spoken.py)
    tail: str = ""  # words of a streamed reply that were waiting for the ruling: the last delta
    gated: bool = False  # the streamed words are the reply's (else what was streamed is withdrawn)
    tips_seq: int | None = None  # the seq the turn's `tips` event takes, if the caller asked for one
    report_seq: int | None = None  # and the learner report's, when the turn ended the session
