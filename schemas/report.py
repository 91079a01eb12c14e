"""The learner report: what a session taught, computed from its events when it ends.

Sent as the `session.report` event after `session.ended`, and served by
`GET /api/sessions/{id}/report` (JSON, or a printable page with charts). docs/coaching.md gives
the score's formula and the suggestions' rules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas.enums import Level, Outcome, Stage
from schemas.fluency import Fluency

__all__ = ["Band", "CurvePoint", "EarnedCard", "Etiquette", "LearnerReport", "LevelEstimate", "LevelEvidence",
           "Practised", "Price", "SessionReport", "StageSpan"]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Price(_Part):
    paid: int | None  # the deal's price, or None without a deal
    first_quote: int | None
    fair: tuple[int, int] | None  # the scenario's fair range for the item
    floor: int | None  # the vendor's floor for the item
    discount_pct: float | None  # off the first quote
    versus_fair: Literal["below", "within", "above"] | None


class CurvePoint(_Part):
    turn: int
    quote: int | None  # the vendor's standing quote after the turn
    offer: int | None  # the learner's offer in the turn
    offer_read_from: str = ""  # the words it was read from; with no offer, a number the server could not place
    happiness: int


class StageSpan(_Part):
    stage: Stage
    turns: int
    seconds: float


class Etiquette(_Part):
    respectful_turns: int  # learner turns that used a respectful form of address or a polite word
    respectful_words: tuple[str, ...]
    insults: int
    taboo: int  # learner turns that used one of the pack's taboo phrases
    lowballs: int
    walked_away: bool
    came_back: bool  # walked away, and the haggle resumed


class CoachingCounts(_Part):
    """What the learner asked for and how the session went beyond the haggle (docs/coaching.md)."""

    hints: tuple[int, int, int]  # hints asked for, by level: 0 contextual, 1 structural, 2+ reveal
    hints_offered: int  # level-0 hints given unasked (a beginner's, after a silence)
    repeats: int
    undos: int
    timeouts: int  # silences: timer expiries and `silence` frames
    unclear: int  # transcripts asked again (confidence under the threshold)


class Clamp(_Part):
    """A change the rules engine (or the speech check) made to a vendor reply, in plain words."""

    turn: int
    flag: str
    explanation: str


class EarnedCard(_Part):
    card_id: str
    title: str
    turn: int  # the first learner turn that earned it
    source_chunk_ids: tuple[str, ...]


Band = Literal["A1", "A2", "B1", "B2", "C1"]


class LevelEvidence(_Part):
    """What an estimate of the learner's level rests on (docs/learning.md); None where unmeasured."""

    learner_turns: int
    mean_words: float  # words per learner line
    target_share: float | None  # share of the learner's pack words that are the target language's
    hints_per_turn: float  # weighted: situation 0.5, frame 1, whole line 2, offered unasked 0.5
    repairs_per_turn: float  # unclear lines, repeats asked for, turns taken back
    words_per_minute: float | None  # spoken sessions only


class LevelEstimate(_Part):
    """The learner's level for the negotiation's can-dos, estimated from one session: a CEFR-like
    band, the level it stands for, the evidence, and how sure it is (0-1)."""

    band: Band
    level: Level
    confidence: float
    evidence: LevelEvidence


class Practised(_Part):
    """A review item the session brought back, and whether the learner produced it (docs/learning.md)."""

    item_id: str
    kind: str  # phrase, respect or avoid
    phrase: str
    recalled: bool
    turn: int | None = None
    said: str = ""
    rating: str | None = None  # the FSRS rating it gets; None: no fair chance, no review


class LearnerReport(_Part):
    session_id: str
    scenario: str
    scenario_version: int = 1  # the version of the pack the session played (docs/studio.md)
    outcome: Outcome
    item: str | None
    turns: int
    price: Price
    curve: tuple[CurvePoint, ...]
    stages: tuple[StageSpan, ...]
    etiquette: Etiquette
    score: int
    score_parts: dict[str, int]
    suggestions: tuple[str, str, str]
    cards_earned: tuple[EarnedCard, ...]
    level: Level = Level.INTERMEDIATE
    coaching: CoachingCounts = CoachingCounts(hints=(0, 0, 0), hints_offered=0, repeats=0, undos=0, timeouts=0,
                                              unclear=0)
    clamps: tuple[Clamp, ...] = ()
    fluency: Fluency | None = None  # the spoken turns' figures together; null when nothing was spoken
    estimate: LevelEstimate | None = None  # null when the learner said nothing
    practised: tuple[Practised, ...] = ()  # the review items brought back, judged


class SessionReport(BaseModel):
    """The `session.report` event."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    type: Literal["session.report"] = "session.report"
    seq: int
    report: LearnerReport
