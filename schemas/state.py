"""The session's state as clients see it: `SessionState` (in `welcome`, `snapshot` and `undo`), the
summary of an ended session, and their parts. Built by the session (`session/core.py`), sent inside
the events of schemas/frames.py; docs/protocol.md §SessionState is its prose form.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas.brain import Ledger
from schemas.enums import LanguageCode, Level, Mood, Outcome, Stage

__all__ = ["LEDGER_SUMMED", "LedgerTotals", "Point", "SessionState", "StageChange", "Summary", "TranscriptLine"]


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Point(_Frame):
    turn: int
    value: int


class StageChange(_Frame):
    turn: int
    from_stage: Stage
    to_stage: Stage


class TranscriptLine(_Frame):
    """One line of the conversation: `role` is `learner` or `vendor`."""

    turn: int
    role: Literal["learner", "vendor"]
    text: str


# The fields of a turn's `Ledger` that `LedgerTotals` sums (a vendor_turn change carries them).
LEDGER_SUMMED = frozenset({"llm_calls", "retries", "corrective_asks", "prompt_tokens", "completion_tokens",
                           "brain_ms", "summary_calls"})


class LedgerTotals(_Frame):
    """What the brain cost a whole session: every answered turn's ledger, summed."""

    turns: int = 0
    llm_calls: int = 0
    retries: int = 0
    corrective_asks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    brain_ms: float = 0.0
    summary_calls: int = 0  # running-summary calls (docs/memory.md), included in the counts above

    def add(self, ledger: Ledger) -> LedgerTotals:
        """These totals with one more answered turn (floats rounded the same way wherever summed)."""
        return LedgerTotals(
            turns=self.turns + 1, llm_calls=self.llm_calls + ledger.llm_calls,
            retries=self.retries + ledger.retries, corrective_asks=self.corrective_asks + ledger.corrective_asks,
            prompt_tokens=self.prompt_tokens + ledger.prompt_tokens,
            completion_tokens=self.completion_tokens + ledger.completion_tokens,
            brain_ms=round(self.brain_ms + ledger.brain_ms, 3), summary_calls=self.summary_calls + ledger.summary_calls,
        )


class Summary(_Frame):
    outcome: Outcome
    turns: int
    item: str | None
    first_quote: int | None
    final_price: int | None
    discount_pct: float | None
    final_happiness: int
    insults: int
    stages: tuple[Stage, ...]
    ledger: LedgerTotals = LedgerTotals()


class SessionState(_Frame):
    """The snapshot of a session that `welcome`, `snapshot` and `GET /api/sessions/{id}` carry."""

    session_id: str
    scenario: str
    learner_id: str | None
    input_language: LanguageCode
    target_language: LanguageCode
    stage: Stage
    happiness_score: int
    vendor_mood: Mood
    turn: int
    max_turns: int
    item: str | None
    object_grabbed: str | None
    vendor_quote: int | None
    first_quote: int | None
    last_offer: int | None
    is_terminal: bool
    outcome: Outcome | None
    seq: int
    created_at: float
    updated_at: float
    happiness_history: tuple[Point, ...] = ()
    quotes: tuple[Point, ...] = ()
    offers: tuple[Point, ...] = ()
    stage_changes: tuple[StageChange, ...] = ()
    summary: Summary | None = None
    ledger: LedgerTotals = LedgerTotals()  # the brain's cost so far, summed over answered turns
    transcript: tuple[TranscriptLine, ...] = ()  # the last TRANSCRIPT_LINES lines, oldest first
    level: Level = Level.INTERMEDIATE
