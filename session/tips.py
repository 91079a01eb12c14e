"""The `tips` event: coaching cards after each learner turn, from the scenario's knowledge.

When the vendor's answer to a learner turn has been applied, the actor asks its `TipSource` (the
server wires the scenario's `KnowledgeLibrary`, docs/knowledge.md) for cards about what the
learner just said and the item in play, and sends them as one `tips` event, after the turn's
reply, mood, stage and end events, with the next `seq`. Every learner turn gets one: grounded
cards when the knowledge has something relevant, else exactly one generic card.

The seq is taken before the vendor's turn is recorded for the mirror, so a session rebuilt from
Neo4j continues after it and never reuses it. The cards are not stored: they are a pure function
of the words and the knowledge, and a resuming client gets them from the replay ring like any
other event.
"""

from __future__ import annotations

from schemas.frames import Tips
from session.negotiation import Negotiation
from session.protocols import TipSource
from session.records import PendingTurn

__all__ = ["tips_event"]


def tips_event(source: TipSource, negotiation: Negotiation, pending: PendingTurn, seq: int) -> Tips:
    """The turn's `tips` event, with the seq its turn took for it (`TurnOutcome.tips_seq`)."""
    window = f"{pending.text} {pending.item or ''}".strip()
    cards = tuple(source.cards(negotiation.scenario_name, window))
    return Tips(session_id=negotiation.session_id, seq=seq, turn=pending.turn, cards=cards)
