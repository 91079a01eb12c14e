"""What the session needs from the outside, declared here so that `session` imports no brain,
no database and no web framework. `server` wires concrete implementations in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from schemas.brain import BrainRequest, BrainResult, DeltaSink
from schemas.codec import Envelope
from schemas.knowledge import TipCard
from schemas.summary import SummaryAsk, SummaryResult
from session.changes import Change


class Brain(Protocol):
    """Proposes the vendor's next turn. Proposals are validated by `session.rules` afterwards.

    Every part is declared, `None` for one the brain does not have, so that the actor never asks a
    brain what it has (the same shape as `brain.policy.Brain`, which session/ does not import)."""

    name: str

    async def propose(self, request: BrainRequest, on_delta: DeltaSink | None = None) -> BrainResult:
        """Return a proposal. Failures the brain can recover from come back as `fallback=True`."""
        ...

    @property
    def propose_inline(self) -> Callable[[BrainRequest], BrainResult] | None:
        """The same answer without a coroutine, for a brain that answers in microseconds (the rule
        vendor): the actor calls it inline, with no task and no round trip through its inbox."""
        ...

    @property
    def write_summary(self) -> Callable[[SummaryAsk], Awaitable[SummaryResult]] | None:
        """The brain's own running summary (the LLM: one call every 10 turns, in the background;
        session/memory.py). It never raises for a failed call: an empty `text` and the `error` keep
        the summary before it. None: the session writes its own from its record (session/summary.py)."""
        ...


class TipSource(Protocol):
    """Coaching cards for what the learner just said, from the scenario's knowledge.

    Called on the actor's loop once per learner turn, so it must be quick and must not block:
    the server's implementation (`brain.knowledge.library.KnowledgeLibrary`) answers from an
    in-memory index in well under a millisecond. Deterministic: same input, same cards."""

    def cards(self, scenario: str, transcript_window: str) -> Sequence[TipCard]: ...


class SpeechPreview(Protocol):
    """Who may start on a speculative call's words before its turn is taken (the player's voice,
    voice/speaker.py): it may synthesize them, never send them. `forget`: the call was cancelled."""

    def prepare(self, turn: int, text: str) -> None: ...

    def forget(self, turn: int) -> None: ...


class Connection(Protocol):
    """One client socket as the actor sees it: a bounded outbound queue it never waits on."""

    role: str
    conn_id: int

    def send_nowait(self, envelope: Envelope) -> bool:
        """Queue an event; False means the queue is full and the connection is being dropped."""
        ...

    def close_nowait(self, code: int, reason: str) -> None: ...


class MirrorUnavailable(Exception):
    """The mirror's database cannot answer now (it is down or behind); the caller may retry later."""


class Mirror(Protocol):
    """Where session changes are copied for durability and analysis, never on the hot path."""

    def submit(self, change: Change) -> None:
        """Take a change without waiting. Must not raise for a full buffer or a down database."""
        ...

    def has_room(self) -> bool:
        """False when the write buffer is full: new frames are then refused, not lost."""
        ...

    def durable_version(self, session_id: str) -> int:
        """The highest version of `session_id` known to be stored (for acknowledgements)."""
        ...

    def subscribe_durable(self, callback: Callable[[str, int], None]) -> None:
        """Call `callback(session_id, version)` whenever more of a session becomes durable."""
        ...

    def forget(self, session_id: str) -> None:
        """Let go of what is kept for a session that is gone from memory (an erased learner's)."""
        ...
