"""Ending a session at once, outside a turn: the `stop` command (outcome `stopped`) and too many
silences in a row (outcome `timed_out`). Pure apart from the negotiation it changes.
"""

from __future__ import annotations

from schemas.brain import StageVisit
from schemas.enums import Outcome, Stage
from schemas.frames import SessionEnded, StageChanged
from session.negotiation import Negotiation

__all__ = ["end_now"]


def end_now(negotiation: Negotiation, now: float, outcome: Outcome) -> list[StageChanged | SessionEnded]:
    """End the negotiation with `outcome`: a forced stage change to CLOSURE, then the end."""
    previous = negotiation.stage
    negotiation.pending = None
    negotiation.outcome = outcome
    negotiation.stage = Stage.CLOSURE
    negotiation.updated_at = now
    # Recorded at the next turn: the end comes before the learner turn that never happens.
    negotiation.stage_changes.append(StageVisit(from_stage=previous, to_stage=Stage.CLOSURE,
                                                at_turn=negotiation.turn + 1, happiness=negotiation.happiness))
    sid = negotiation.session_id
    changed = StageChanged(session_id=sid, seq=negotiation.next_seq(), turn=negotiation.turn,
                           from_=previous, to=Stage.CLOSURE, forced=True)
    summary = negotiation.summary()
    assert summary is not None
    ended = SessionEnded(session_id=sid, seq=negotiation.next_seq(), outcome=summary.outcome, summary=summary)
    return [changed, ended]
