"""The session machine's state: the negotiation, and the turn in flight.

Kept apart from `SessionMachine` (session/machine.py), which adds `handle` and its dispatch tables,
so that the modules of decisions (session/turns.py, commands.py, ...) can name the state they
decide from without importing the tables that import them.
"""

from __future__ import annotations

from session.messages import ActorLimits
from session.negotiation import Negotiation
from session.protocols import TipSource
from session.records import PendingTurn
from session.spoken import ReplyGate

__all__ = ["MachineState"]


class MachineState:
    """What the machine decides from: the negotiation, and the turn in flight (`SessionMachine` adds `handle`)."""

    __slots__ = ("delta_ended", "gate", "limits", "negotiation", "speculates", "streamed", "thinking", "tips",
                 "withdrawn", "writes_summaries")

    def __init__(self, negotiation: Negotiation, *, limits: ActorLimits = ActorLimits(),
                 tips: TipSource | None = None, writes_summaries: bool = False, speculates: bool = False) -> None:
        self.negotiation = negotiation
        self.limits = limits
        self.tips = tips  # coaching cards after each learner turn (session/tips.py); None: no tips
        self.writes_summaries = writes_summaries  # the brain writes the running summary (else the facts are it)
        # Ask the brain at an open microphone's pause, before the turn (session/speculation.py): SPECULATE,
        # and a brain that needs a call.
        self.speculates = speculates and limits.speculate
        self.thinking: PendingTurn | None = None  # the turn in flight, asked of the brain
        self.streamed: list[str] = []  # its reply's words streamed so far (released by the gate)
        self.gate: ReplyGate | None = None  # its words on their way out, for the brain's current attempt
        self.delta_ended = False  # the `reply.delta` with `end` went out
        self.withdrawn = False  # a streamed reply was withdrawn

    @property
    def waits_for_learner(self) -> bool:
        """The vendor waits for the learner: no turn in flight and the session not over (the silence
        timer may run, with a player connected)."""
        return self.thinking is None and not self.negotiation.is_terminal

    def start_thinking(self, pending: PendingTurn) -> None:
        self.thinking = pending
        self.streamed = []
        self.gate = None
        self.delta_ended = False
        self.withdrawn = False

    def stop_thinking(self) -> None:
        self.thinking = None
        self.streamed = []
        self.gate = None
