"""What one step of the session machine returns besides its changes: events, and asks of the actor.

`SessionMachine.handle` (session/machine.py) returns a `Step`: the changes it committed, and its
outputs in the order they must happen. An output is either a server event, which goes to every
connection (and, with a `seq`, into the replay ring), or one of the records below, which ask the
actor for what the machine cannot do itself because it is I/O: a send to one connection, an ack
once the mirror has the step, a brain call, a timer. The machine never does any of these; the
actor does them, in order, and nothing else (session/actor.py, `SessionActor._run`).
"""

from __future__ import annotations

from typing import NamedTuple

from schemas.brain import BrainRequest, BrainResult
from schemas.frames import Reply, ServerEvent
from schemas.summary import SummaryAsk
from session.changes import Change
from session.messages import BrainDone
from session.records import PendingTurn, TurnOutcome

__all__ = [
    "Abandon", "Acknowledge", "Answer", "Answered", "DropSpeculation", "Hush", "Listen", "Output", "Replay",
    "Resolve", "RunWaiting", "Speculate", "Step", "Summarize", "Think",
]


class Answer(NamedTuple):
    """Send `event` to the connection whose frame this step handles, and to no other (an error, a snapshot)."""

    event: ServerEvent


class Acknowledge(NamedTuple):
    """Acknowledge frame `frame_id` to its sender once the mirror has made this step durable."""

    frame_id: str


class Think(NamedTuple):
    """Ask the brain about the turn `pending` (the vendor is thinking: the silence timer stops); its
    answer comes back as `BrainDone` (and, streaming, as `Delta`, `Decided` and `Withdraw`)."""

    pending: PendingTurn
    request: BrainRequest


class Speculate(NamedTuple):
    """Ask the brain ahead of the turn whose words so far (open-microphone utterance `utterance_id`)
    would make `request` (session/speculation.py). Nothing it streams goes out unless the turn's own
    `Think` asks the same; it replaces any earlier speculation."""

    utterance_id: str
    request: BrainRequest


class DropSpeculation(NamedTuple):
    """Cancel the speculative call, if any: the turn it was for was taken without a brain call."""


class Abandon(NamedTuple):
    """Cancel the brain call in flight: its turn was abandoned (`stop`)."""


class Listen(NamedTuple):
    """(Re)start the player's silence timer, if a player is connected: the vendor waits for the learner.
    `if_running`: only if it is running now (the learner is mid-sentence)."""

    extended: bool = False
    if_running: bool = False


class Hush(NamedTuple):
    """Stop the silence timer: the vendor is thinking, or the session is over."""


class Resolve(NamedTuple):
    """Tell whoever waits for frame `client_id`'s reply (`SessionActor.reply_to`)."""

    client_id: str
    reply: Reply


class Summarize(NamedTuple):
    """Ask the brain for the running summary `ask` in the background; it comes back as `SummaryDone`."""

    token: int
    ask: SummaryAsk


class Replay(NamedTuple):
    """Send the resuming connection the kept events after seq `after`, in order."""

    after: int


class RunWaiting(NamedTuple):
    """Apply the frames held behind the turn that just ended, in order (admission runs again for each)."""


class Answered(NamedTuple):
    """A turn answered (first among its step's outputs): the actor gives `reply` its timings before it
    goes out (they are measurements: the brain's call is `done`), logs the turn, and tells whoever
    waits for the reply to frame `client_id`."""

    reply: Reply
    outcome: TurnOutcome
    result: BrainResult
    done: BrainDone
    client_id: str | None


Output = (ServerEvent | Answer | Acknowledge | Think | Abandon | Listen | Hush | Resolve | Summarize | Replay
          | RunWaiting | Answered | Speculate | DropSpeculation)


class Step(NamedTuple):
    """What one input did: the outputs, in order, and the changes committed (for the mirror)."""

    outputs: list[Output]
    changes: list[Change]
