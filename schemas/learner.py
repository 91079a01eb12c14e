"""The learner across sessions (issue #15, docs/memory.md): what one ended session adds to a
learner's profile, the profile itself, what a vendor remembers of the learner when a new session
starts, and the teacher's progress figures.

The profile is a fold of the learner's sessions, in the order they ended (`server/learners/profile.py`
does the folding); every store keeps the same shape, so an in-memory profile and one in Neo4j are
the same JSON. `level`, `input_language` and `target_language` follow seed 003's `pending`: a
session that says something else is held in `pending` and only replaces the profile's value once a
second session in a row confirms it.

The profile is bounded: however many sessions a learner plays, it keeps at most `SESSION_WINDOW`
session ids, and what it held per session over time (each session's hints) is the progress
series, kept apart. A profile stored in the shape before that (every session's id in `session_ids`
and its hints in `hints_by_level`) is migrated when read (`profile_from_json`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.enums import LanguageCode, Level, Outcome
from schemas.fluency import Fluency
from schemas.report import Band, LevelEstimate
from schemas.review import Evidence, Practice, PracticeTarget

__all__ = [
    "CONTESTED_FIELDS",
    "SESSION_WINDOW",
    "BestDiscount",
    "HintPoint",
    "LearnerProfile",
    "LearnerRecall",
    "LearnerRow",
    "PendingValue",
    "ProgressPoint",
    "ScenarioRecord",
    "SessionFigures",
    "Slip",
    "Trend",
    "profile_from_json",
]

# An etiquette slip, as the report counts them: an insulting offer or line, a taboo phrase, a
# lowball, or a whole session without one respectful form of address or polite word.
Slip = Literal["insult", "taboo", "lowball", "no_respect"]
Trend = Literal["new", "improving", "steady", "declining"]

# The profile fields a session can contradict; each waits in `pending` until confirmed.
CONTESTED_FIELDS = ("level", "input_language", "target_language")

# The sessions whose ids a profile keeps, the latest folded in: how a session is counted once in a
# bounded room (`LearnerProfile.latest_sessions`). A session open while more than this many of the
# learner's other sessions end could be taken for one counted already by a store that has only the
# profile to go by (the in-memory one; Neo4j checks the session's PLAYED link instead).
SESSION_WINDOW = 32


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SessionFigures(_Frozen):
    """What one ended session adds to its learner's profile: the report's figures, flattened."""

    session_id: str
    learner_id: str = Field(min_length=1, max_length=64)
    scenario: str
    level: Level
    input_language: LanguageCode
    target_language: LanguageCode
    outcome: Outcome
    item: str | None = None
    turns: int = 0
    first_quote: int | None = None
    paid: int | None = None  # the deal's price; None without a deal
    discount_pct: float | None = None  # off the first quote, as the report and the summary say
    score: int = 0  # the report's score, 0-100
    hints: tuple[int, int, int] = (0, 0, 0)  # hints asked for, by level (the report's coaching)
    slips: tuple[Slip, ...] = ()
    created_at: float = 0.0
    ended_at: float = 0.0
    fluency: Fluency | None = None  # the spoken turns' figures (the report's); None when nothing was spoken
    estimate: LevelEstimate | None = None  # the report's estimate of the learner's level
    evidence: tuple[Evidence, ...] = ()  # what the learner needed: review items (docs/learning.md)
    practice: tuple[Practice, ...] = ()  # the judgement of each target the session brought back

    @property
    def turns_to_deal(self) -> int | None:
        return self.turns if self.outcome is Outcome.DEAL else None


class PendingValue(_Frozen):
    """A value a session gave that contradicts the profile, waiting to be confirmed (seed 003)."""

    value: str
    sessions: int = 1  # consecutive sessions that said it
    since_session: str  # the first of them


class ScenarioRecord(_Frozen):
    """The learner at one scenario's stall: how often, how it went, and how it went last."""

    played: int = 0
    outcomes: dict[Outcome, int] = Field(default_factory=dict)
    last_outcome: Outcome
    last_session_id: str
    last_item: str | None = None
    last_paid: int | None = None
    last_first_quote: int | None = None
    last_discount_pct: float | None = None
    last_at: float = 0.0


class BestDiscount(_Frozen):
    scenario: str
    item: str
    discount_pct: float
    paid: int
    session_id: str


class HintPoint(_Frozen):
    """The hints one session needed, at the level it was played at: a point of a series over time.
    Not kept in the profile: the learners API makes the series from the progress points."""

    session_id: str
    at: float
    level: Level
    hints: tuple[int, int, int]


class LearnerProfile(_Frozen):
    learner_id: str
    level: Level
    input_language: LanguageCode
    target_language: LanguageCode
    languages: tuple[LanguageCode, ...] = ()  # every language practised, first seen first
    pending: dict[str, PendingValue] = Field(default_factory=dict)  # by field (CONTESTED_FIELDS)
    sessions: int = 0
    # A session counts once (server/learners/profile.py, `counted`): the latest `SESSION_WINDOW`
    # sessions folded in, each as (its created_at, its id), in the order they were folded; and the
    # greatest (created_at, id) of those that have left the window. A session not in the window that
    # started no later than that was counted already.
    latest_sessions: tuple[tuple[float, str], ...] = ()
    counted_through: tuple[float, str] | None = None
    scenarios: dict[str, ScenarioRecord] = Field(default_factory=dict)
    best_discounts: tuple[BestDiscount, ...] = ()  # one per (scenario, item) that ended in a deal
    slips: dict[str, int] = Field(default_factory=dict)  # sessions with each slip, all time
    recent_slips: tuple[tuple[Slip, ...], ...] = ()  # each of the latest sessions' slips, oldest first
    recurring_slips: tuple[Slip, ...] = ()  # slips in at least two of the latest sessions
    first_at: float = 0.0
    last_at: float = 0.0


class LearnerRecall(_Frozen):
    """What a vendor remembers of a learner when a new session at his stall starts. Facts only,
    from the server's own records; the rules engine still decides every number of the new session."""

    sessions: int  # sessions this learner played at this scenario's stall before
    last_outcome: Outcome
    last_item: str | None = None
    last_paid: int | None = None  # what the learner paid last time, after a deal
    last_first_quote: int | None = None
    last_discount_pct: float | None = None
    recurring_slips: tuple[Slip, ...] = ()
    start_happiness: int | None = None  # where the vendor's mood starts, after the last outcome
    # The learner's due review items at this stall (docs/learning.md): judged in every session,
    # invited by the vendor only when `invite` (the REVIEWS_INVITE setting) is on.
    practice: tuple[PracticeTarget, ...] = ()
    invite: bool = True


class ProgressPoint(_Frozen):
    """One session in a learner's progress series (the report's definitions of score and discount)."""

    session_id: str
    scenario: str
    at: float  # when the session was created (Unix seconds)
    level: Level
    outcome: Outcome
    item: str | None = None
    turns: int
    turns_to_deal: int | None = None
    discount_pct: float | None = None
    score: int
    hints: int  # hints asked for, every level together
    hints_by_level: tuple[int, int, int] = (0, 0, 0)  # the same, by hint level (0 context, 1 frame, 2+ line)
    # Fluency (the report's, docs/learning.md), when the learner spoke: the trend of how they speak.
    words_per_minute: float | None = None
    pause_ratio: float | None = None
    mean_length_of_run: float | None = None
    fillers: int | None = None
    # The session's estimate of the learner's level (the report's), and how sure it was.
    estimated_band: Band | None = None
    estimate_confidence: float | None = None


class LearnerRow(_Frozen):
    """A line of the teacher's list of learners."""

    learner_id: str
    level: Level
    sessions: int
    latest: ProgressPoint | None = None
    trend: Trend = "new"
    trend_delta: float | None = None  # the score's change behind `trend`


# The profile's fields before it was bounded (2026-11-27): every session's id, and its hint point.
_UNBOUNDED = ("session_ids", "hints_by_level")


def profile_from_json(raw: str | bytes) -> LearnerProfile:
    """A stored profile, of this shape or of the unbounded one before it, which is migrated: the
    latest `SESSION_WINDOW` of its `session_ids` are the window, each with its start from its hint
    point, and the greatest of the rest bounds them; the hint points go (the progress series has them)."""
    try:
        return LearnerProfile.model_validate_json(raw)
    except ValidationError as invalid:
        try:
            data = json.loads(raw)
        except ValueError:
            raise invalid from None
        if not isinstance(data, dict) or not any(name in data for name in _UNBOUNDED):
            raise
    return LearnerProfile.model_validate(_bounded(data))


def _bounded(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    ids = [sid for sid in _listed(data.pop("session_ids", None)) if isinstance(sid, str)]
    started = {p.get("session_id"): p["at"] for p in _listed(data.pop("hints_by_level", None))
               if isinstance(p, dict) and isinstance(p.get("at"), int | float)}
    # An id without its point (never written so) is taken as started last: it may then hold back a
    # late session, but never lets one count twice.
    last = data.get("last_at")
    last = last if isinstance(last, int | float) else 0.0
    keyed = [(started.get(sid, last), sid) for sid in ids]
    data["latest_sessions"] = keyed[-SESSION_WINDOW:]
    data["counted_through"] = max(keyed[:-SESSION_WINDOW], default=None)
    return data


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
