"""Unclear speech (seed 002: confidence 0.7): a transcript the recogniser was unsure of is not a turn.

A final transcript whose `confidence` is below the session's threshold (`CONFIDENCE_CLARIFY_THRESHOLD`,
0.7 by default) gets a `reply` marked `clarify`: the vendor asks, in character and in the session's
language (the pack's `clarify` lines), to hear it again. Nothing changes: not happiness, not the
stage, not the quote, and the turn counter does not move, so it does not count toward MAX_TURNS.
No brain is asked. The transcript is acknowledged like any other (it was received), and recorded
for the mirror as unclear (its text and confidence), so the seq it took survives a restart.
A transcript without a confidence is taken as clear.
"""

from __future__ import annotations

from schemas.frames import Reply
from session.changes import UnclearAnswered
from session.negotiation import Negotiation

__all__ = ["clarify_reply", "is_unclear"]


def is_unclear(confidence: float | None, threshold: float) -> bool:
    return confidence is not None and confidence < threshold


def clarify_reply(negotiation: Negotiation, client_id: str, text: str, now: float,
                  confidence: float | None = None) -> Reply:
    """The vendor's request to hear it again (an `UnclearAnswered` change): counted, and the next
    seq; nothing else changes."""
    pool = negotiation.scenario.lines_for(negotiation.target_language)["clarify"]
    line = pool[(negotiation.seq + 1) % len(pool)]  # by the seq the reply takes, as before
    negotiation.commit(UnclearAnswered(*negotiation.stamp(now), id=client_id, seq=negotiation.seq + 1, text=text,
                                       confidence=confidence))
    return negotiation.standing_reply(line, client_id, text, mark="clarify")
