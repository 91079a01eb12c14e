"""Speculation: the brain asked about a learner's turn before the turn is taken (issue #34).

An open microphone decodes the turn so far at each pause in it (a `speech.partial`), and the turn
ends only once the end-of-turn wait has passed (voice/turn_end.py: 500 ms to over 3 s of silence).
The brain is the slowest part of a spoken turn, so the machine asks for its proposal at the pause,
with the request the turn would make if it were taken now (`Negotiation.preview_request`): a
`Speculate` ask. The actor runs it like a turn's call, except that nothing it streams goes anywhere
(session/calls.py, `BrainCalls.speculate`).

When the turn is taken, its own request is made as always and the actor's call for it
(`BrainCalls.think`) takes the speculative call instead of asking again only if the two requests
are the same (`same_request`): the same words (up to case and spacing) against the same session,
field for field (the stage, the quote, the history, the running summary, the turn number ...).
Anything that changed the session in between (a scene, an undo, a summary that came back, more
words) makes them differ, and the speculation is cancelled. So the engine validates the same
proposal, against the state at the turn, that a call made then would have been answered with:
speculation changes when the brain is asked, never what is decided.

Rules (each a `# n.` below):
1. Speculate only when a brain call would follow: a session not over, no turn in flight, words
   the recogniser was sure enough of (an unclear turn is asked again, not answered), and a brain
   that needs a call (`MachineState.speculates`: not the rules brain, which answers at once, and
   not with SPECULATE=false).
2. A turn that ends without a brain call (an unclear or a closing reply) drops the speculation
   (`DropSpeculation`); a later pause's speculation replaces an earlier one.
"""

from __future__ import annotations

from schemas.brain import BrainRequest
from session.machine_state import MachineState
from session.messages import Recognised
from session.outputs import Speculate
from session.unclear import is_unclear

__all__ = ["normalised", "same_request", "speculation"]


def speculation(m: MachineState, heard: Recognised, now: float) -> Speculate | None:
    """What to ask ahead of the turn whose words so far are `heard` (a partial), at `now`; or None."""
    negotiation = m.negotiation
    text = heard.text.strip()
    if (not m.speculates or m.thinking is not None or negotiation.pending is not None  # 1.
            or negotiation.is_terminal or not text or is_unclear(heard.confidence, m.limits.clarify_below)):
        return None
    return Speculate(heard.id, negotiation.preview_request(text, now))


def normalised(text: str) -> str:
    """Words as a recogniser may give them twice: case and spacing aside."""
    return " ".join(text.casefold().split())


def same_request(ahead: BrainRequest, turn: BrainRequest) -> bool:
    """Whether the speculative call's request `ahead` asks what the turn's request `turn` asks."""
    if ahead == turn:
        return True
    if normalised(ahead.transcript) != normalised(turn.transcript):
        return False
    return ahead.model_copy(update={"transcript": turn.transcript}) == turn
