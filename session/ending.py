"""Ending a session at once, outside a turn: the `stop` command (outcome `stopped`) and too many
silences in a row (outcome `timed_out`). Pure apart from the negotiation it changes.
"""

from __future__ import annotations

from schemas.enums import Outcome
from schemas.frames import ServerEvent, SessionEnded, StageChanged
from session.changes import EndedNow
from session.negotiation import Negotiation
from session.protocols import TipSource
from session.report import report_event

__all__ = ["end_now"]


def end_now(negotiation: Negotiation, now: float, outcome: Outcome, tips: TipSource | None,
            client_id: str | None = None) -> list[ServerEvent]:
    """End the negotiation with `outcome` (an `EndedNow` change): a forced stage change to CLOSURE,
    the end, and the learner report."""
    previous, first = negotiation.stage, negotiation.seq + 1
    negotiation.commit(EndedNow(*negotiation.stamp(now), id=client_id, seq=first + 2, outcome=outcome,
                                previous_stage=previous))
    sid = negotiation.session_id
    changed = StageChanged(session_id=sid, seq=first, turn=negotiation.turn, from_=previous,
                           to=negotiation.stage, forced=True)
    summary = negotiation.summary()
    assert summary is not None
    ended = SessionEnded(session_id=sid, seq=first + 1, outcome=summary.outcome, summary=summary)
    return [changed, ended, report_event(negotiation, tips, first + 2)]
