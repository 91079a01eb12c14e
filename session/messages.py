"""The messages a session actor receives in its inbox, one small dataclass per kind.

Everything that changes a session goes through the actor's inbox as one of these, and the actor's
loop applies them one at a time, in the order they were posted (`session/actor.py`). That is what
makes the actor the single writer of its session: a connection, the mirror or a brain call running
in a child task never touches the session's state; it posts a message and returns.

Who posts what:

- `Connect`, `Disconnect`: a connection opening or closing (`SessionActor.connect`, `.disconnect`).
- `Frame`: a client frame accepted by the codec (`SessionActor.submit`), with when it arrived and
  any extra context the caller passes along (the library interface sends `rag_context` and
  `context_block`).
- `BrainDone`: the brain's result for a pending turn, posted by the brain call's task (or made
  inline for a brain that answers at once, `propose_inline`).
- `Delta`, `Withdraw`, `Decided`: a streaming brain's partial reply text, its retraction, and the
  decision's numbers and stage as soon as the model has written them, posted through the turn's
  `DeltaSink` (`session/turns.py`).
- `SummaryDone`: a running summary written in the background (`session/memory.py`), posted by its task.
- `Recognised`: what the recogniser heard in an utterance, posted by the connection's transcriber
  just before it submits the utterance's transcript (server/voice.py).
- `Speaking`: the learner's audio is arriving, so the silence timer waits (server/voice.py).
- `Spoken`: the player's first audio of a reply to a spoken turn left (server/voice.py): its figures
  go to the session's spectators as `reply.spoken`.
- `Consult`: a transcriber asks what the session knows of the moment before it decodes an utterance.
- `SilenceDue`: the player's silence timer expired, posted by the shared timers (`session/timers.py`).
- `Durable`: the mirror made every change up to `version` durable (`SessionActor.notify_durable`),
  so acknowledgements waiting on it can go out (`session/fanout.py`).
- `Stop`: close every connection and, unless `keep_running`, stop the actor. The loop handles it
  itself, before dispatch, because it decides whether the loop goes on.

A new kind of message (a timer for silence, say) is a dataclass here, added to `Message`, with its
entry in the actor's `MESSAGE_HANDLERS` (`session/actor.py`); most go straight to the machine,
whose decision for it is an entry in `HANDLERS` (`session/machine.py`). A new client frame is added
to `ClientFrame` instead, with its decision in the machine's `FRAMES` (session/README.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from schemas.brain import BrainResult
from schemas.enums import LanguageCode
from schemas.fluency import Fluency
from schemas.frames import (
    CommandFrame,
    PlaybackFrame,
    ReplySpoken,
    ResumeFrame,
    SceneFrame,
    SilenceFrame,
    TranscriptFrame,
)
from schemas.summary import SummaryResult
from session.protocols import Connection
from session.records import PendingTurn


@dataclass(frozen=True, slots=True)
class ActorLimits:
    """The bounds a session works within: the actor's (its inbox, replay ring, brain deadline) and its
    machine's (the clarify threshold, the silence timer's lengths and count, the welcome back)."""

    replay_events: int = 512  # events kept for `resume`
    inbox_frames: int = 32  # client frames queued per session before `rate_limited`
    brain_deadline_s: float = 30.0  # a brain that outlives this is abandoned for the fallback
    clarify_below: float = 0.7  # a final transcript less confident than this is asked again (session/unclear.py)
    silence_s: float = 30.0  # the learner's silence before the vendor nudges (session/silence.py)
    silence_extended_s: float = 60.0  # the same, mid-sentence or right after a hint
    max_timeouts: int = 3  # silences in a row that end the session (outcome timed_out)
    restart_after_s: float = 7200.0  # absence after which a returning player is welcomed back
    speculate: bool = True  # ask the brain at an open microphone's pause (SPECULATE; session/speculation.py)


ClientFrame = TranscriptFrame | SceneFrame | ResumeFrame | CommandFrame | PlaybackFrame | SilenceFrame
"""The client frames that reach the actor (the codec answers `ping` and refuses the rest itself)."""
CLIENT_FRAMES = (TranscriptFrame, SceneFrame, ResumeFrame, CommandFrame, PlaybackFrame, SilenceFrame)

@dataclass(slots=True)
class Connect:
    conn: Connection


@dataclass(slots=True)
class Disconnect:
    conn: Connection


@dataclass(slots=True)
class Frame:
    """A client frame; `conn` is None for frames from the library interface (no socket)."""

    conn: Connection | None
    frame: ClientFrame
    received_at: float  # wall clock, for the record
    received_perf: float  # monotonic, for timings
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class BrainDone:
    pending: PendingTurn
    result: BrainResult
    started: float  # perf_counter when the brain was called
    finished: float  # and when it answered


@dataclass(slots=True)
class Delta:
    turn: int
    text: str
    end: bool = False  # the reply text is complete (`reply.delta` with `end: true`)


@dataclass(slots=True)
class Withdraw:
    turn: int
    reason: str


@dataclass(slots=True)
class Decided:
    """A streaming brain's model has written the decision's numbers and stage (unvalidated)."""

    turn: int
    head: dict[str, object]


@dataclass(slots=True)
class SummaryDone:
    token: int  # the refresh it answers (`session.summary.Memory.start`)
    turn: int  # the last learner turn it covers
    result: SummaryResult


@dataclass(slots=True)
class SilenceDue:
    """The player's silence timer expired (posted by `session.timers.SilenceTimers`)."""


@dataclass(slots=True)
class Recognised:
    """What the recogniser heard in the learner's utterance `id` (a connection's transcriber posts it,
    then submits the transcript with the same id): it goes out as a sequenced `speech` event, or as
    `speech.partial` when it is an open microphone's turn so far (`partial`)."""

    id: str
    text: str
    confidence: float | None
    language: LanguageCode | None
    duration_ms: int
    levels: tuple[float, ...]
    stt: str
    fallback: bool = False
    partial: bool = False
    fluency: Fluency | None = None  # from the words' times, where the recogniser gives them
    # Measurements of the voice stages before the turn (docs/voice.md, "Per-stage timings"): the
    # silence that ended an open microphone's turn (None: the client ended it), and the time from
    # the utterance's end to this transcript. The reply's `timings` carry them.
    end_of_turn_ms: float | None = None
    stt_ms: float | None = None


@dataclass(slots=True)
class Speaking:
    """Audio of the learner's is arriving (a connection's voice, for each `audio` frame): the learner
    is not silent, whatever the transcript will say."""


@dataclass(slots=True)
class Spoken:
    """The player's connection sent the first audio of the reply to a spoken turn; `event` says so
    to the spectators (the actor sends it to every connection but the player's)."""

    event: ReplySpoken


class VoiceStages(NamedTuple):
    """A spoken turn's stages before its transcript (`Recognised`), kept by the actor until the
    turn's reply takes them into its `timings`."""

    end_of_turn_ms: float | None
    stt_ms: float | None
    stt: str


@dataclass(slots=True)
class Consult:
    """A connection's transcriber asks what it needs to know of the session before decoding utterance
    `utterance_id`; the actor calls `answer` with it (`session.speech.Hearing`) in its own step."""

    utterance_id: str
    answer: Callable[[Any], None]


@dataclass(slots=True)
class PlayerJoined:
    """A player connected and has its `welcome`: the machine may greet it back (not an inbox message:
    the actor makes it when it applies the player's `Connect`)."""


@dataclass(slots=True)
class ResumeAsked:
    """A `resume` frame, with the oldest seq the actor's replay ring holds (None: it holds nothing).
    Not an inbox message: the actor makes it from the frame, since the ring is its own."""

    frame: ResumeFrame
    oldest: int | None


@dataclass(slots=True)
class Durable:
    version: int


@dataclass(slots=True)
class Stop:
    code: int
    reason: str
    keep_running: bool = False  # close the connections only (`SessionActor.close_connections`)


Message = (Connect | Disconnect | Frame | BrainDone | Delta | Withdraw | Decided | SummaryDone | SilenceDue
           | Durable | Recognised | Speaking | Spoken | Consult | Stop)
