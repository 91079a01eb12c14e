"""The session layer: the pure negotiation core, its rules, and the actor that owns each session."""

from schemas.brain import DeltaSink
from session.negotiation import Negotiation, PendingTurn, TurnOutcome, TurnRecord
from session.offers import assess_offer, parse_offer
from session.protocols import Brain, Change, Connection, Mirror
from session.rules import TRANSITIONS, Limits, Position, Verdict, is_legal, mood_for, validate

__all__ = [
    "TRANSITIONS",
    "Brain",
    "Change",
    "Connection",
    "DeltaSink",
    "Limits",
    "Mirror",
    "Negotiation",
    "PendingTurn",
    "Position",
    "TurnOutcome",
    "TurnRecord",
    "Verdict",
    "assess_offer",
    "is_legal",
    "mood_for",
    "parse_offer",
    "validate",
]
