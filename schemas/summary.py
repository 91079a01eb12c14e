"""The contract between the session and a brain that writes running summaries (docs/memory.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.brain import HistoryLine, Ledger

__all__ = ["SummaryAsk", "SummaryResult"]


class SummaryAsk(BaseModel):
    """What a summary is made from: the summary so far, the latest lines and the server's own facts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    scenario: str
    turn: int  # the last learner turn the new summary covers
    previous: str = ""  # the summary so far ("" before the first)
    lines: tuple[HistoryLine, ...] = ()  # the last lines of the conversation, oldest first
    facts: str = ""  # the server's account of the session (session/summary.py `facts`)


class SummaryResult(BaseModel):
    """A new summary, or an empty `text` and the `error` when none could be made (the old one stays)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = ""
    ledger: Ledger = Field(default_factory=Ledger)  # what the call cost (no call: zeros)
    error: str | None = None
