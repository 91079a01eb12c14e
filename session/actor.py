"""The session actor: the single writer of one session's state, its mailbox loop and its dispatch.

Connections post accepted frames into the actor's inbox; the actor applies them strictly in
order through `Negotiation`, asks the brain in a child task whose result comes back through the
same inbox, and fans every event out to every connection without ever waiting on one. A slow
reader is dropped (its queue is bounded), so no spectator can delay the player. Acknowledgements
wait until the mirror says the change is durable, which is what lets a client that re-sends every
unacknowledged frame after a crash lose nothing.

The loop. An actor runs driven by its registry's dispatcher (`attach`, then `drain` whenever it
has mail), so that an idle session holds no task. Tests drive it the same way (`tests/fakes.py`,
`hosted`): there is no second loop for them to test instead. `_process` handles `Stop` itself,
since it decides whether the loop goes on, and hands every other message to its handler in
`MESSAGE_HANDLERS`, looked up by the message's exact type. A client frame (`Frame`) goes through
`_on_frame`, which does the bookkeeping every frame needs and hands it on to `FRAME_HANDLERS`, by
the frame's type. A handler that raises is logged, and the session carries on with the next message.

The parts. Like the Neo4j mirror (`server/mirror/`), `SessionActor` is assembled from parts, one
module per concern, each a mixin that declares the state it reads; `__init__` here sets all of it,
and each part contributes its handlers to the tables at the bottom of this module:

- `session/fanout.py`, `ActorFanout`: connections, fan-out, the replay ring, durability and acks;
- `session/turns.py`, `ActorTurns`: the turn pipeline, from a final transcript to the vendor's reply;
- `session/memory.py`, `ActorMemory`: the running summary, refreshed in the background;
- `session/silence.py`, `ActorSilence`: the player's silence timer, nudges, the timed-out end and
  the welcome back;
- `session/commands.py`, `ActorCommands`: `command` frames (hint, repeat, undo, stop);
- `session/playback.py`, `ActorPlayback`: `playback` frames (barge-in);
- `session/scene.py`, `ActorScene`: `scene` frames;
- `session/resume.py`, `ActorResume`: `resume` frames, by replay or snapshot;
- `session/messages.py`: the messages themselves.

A new command or timer gets a module of its own in the same shape: its message or client frame
type, a part with its handler, and a table that the two dispatch tables below take in, with the
part added to `SessionActor`'s bases. Timers are not tasks: every session's silence timer is an
entry in one shared heap (`session/timers.py`) that posts a message when it comes due; like a
brain call, it never touches the session's state.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from schemas.errors import CloseCode, ErrorCode
from schemas.frames import Reply, TranscriptFrame
from session import commands, fanout, memory, playback, resume, scene, silence, turns
from session.admission import AfterEnd, admission
from session.commands import ActorCommands
from session.mailbox import Mailbox
from session.messages import (
    ActorLimits,
    ClientFrame,
    Connect,
    Disconnect,
    Durable,
    Frame,
    Handler,
    Message,
    Stop,
)
from session.negotiation import Negotiation
from session.playback import ActorPlayback
from session.protocols import Brain, Connection, Mirror, TipSource
from session.resume import ActorResume
from session.scene import ActorScene
from session.timers import SilenceTimers
from session.turns import FALLBACK_LINE

__all__ = ["FALLBACK_LINE", "ActorLimits", "SessionActor", "SessionBusy", "SessionStopped"]

log = logging.getLogger("samvad.session")


class SessionBusy(Exception):
    """The session holds all the frames it may; the caller retries shortly (`rate_limited`)."""


class SessionStopped(Exception):
    """The actor stopped before answering."""


class SessionActor(ActorCommands, ActorPlayback, ActorScene, ActorResume):
    """One session's actor: its state, its inbox, and the loop that applies the inbox in order."""

    def __init__(
        self,
        negotiation: Negotiation,
        brain: Brain,
        mirror: Mirror,
        *,
        limits: ActorLimits = ActorLimits(),
        clock: Callable[[], float] = time.time,
        on_change: Callable[[SessionActor], None] | None = None,
        tips: TipSource | None = None,
        timers: SilenceTimers | None = None,
    ) -> None:
        self.negotiation = negotiation
        self.brain = brain
        self.mirror = mirror
        self.tips = tips
        self.timers = timers
        self._silence_due = None
        self._silence_queued = None
        self.limits = limits
        self.clock = clock
        self.on_change = on_change
        self.session_id = negotiation.session_id
        self.connections = {}
        self.player = None
        # The queues below are made when first needed: an empty deque is 760 bytes, and an idle
        # session holds several thousand of them between its peers (benchmarks/load.py, d).
        self._replay = None
        self.last_activity = clock()
        # Unbounded by type, bounded in practice: client frames are admitted against
        # `limits.inbox_frames` in `submit`, and the other messages come one or a few per turn.
        self._inbox: Mailbox[Message] = Mailbox()
        self._frames_queued = 0
        self._waiting = None
        self._waiting_ids = None
        self._thinking = None
        self._thinking_since = 0.0
        self._streamed = []
        self._gate = None
        self._delta_ended = False
        self._withdrawn = False
        self._unacked = None
        self._unacked_ids = {}
        self._turn_waiters = {}
        self._propose_now = brain.propose_inline
        self._summarize = brain.write_summary  # None: the server's own summary (session/memory.py)
        self._tg = None
        self._brain_scope = None
        # Driven by a registry (`attach`): no task of its own while idle. `_wake` asks the
        # registry's dispatcher to `drain()` this actor; `_scheduled` says it has been asked.
        self._wake: Callable[[SessionActor], None] | None = None
        self._scheduled = False
        self.running = False

    # ------------------------------------------------------------------ called by connections

    def connect(self, conn: Connection) -> None:
        self._post_nowait(Connect(conn))

    def disconnect(self, conn: Connection) -> None:
        self._post_nowait(Disconnect(conn))

    def submit(self, conn: Connection | None, frame: ClientFrame, **extra: str) -> bool:
        """Take a client frame; False when the session already holds `limits.inbox_frames` of them
        (answer `rate_limited`): queued, held behind the turn in flight, or that turn's own.

        With nothing queued before it, a dispatched actor applies the frame at once (`_post`), as
        it does a brain's messages: the dispatcher would have applied it one loop pass later, a pass
        that under load is every other session's ready work, on the way from a learner's words to
        the model's request (issue #14).
        """
        held = self._frames_queued + len(self._waiting or ()) + (self._thinking is not None)
        if held >= self.limits.inbox_frames:
            return False
        self._frames_queued += 1
        self._post(Frame(conn, frame, self.clock(), time.perf_counter(), dict(extra)))
        return True

    def stop(self, code: int = CloseCode.GOING_AWAY, reason: str = "server shutting down") -> None:
        self._post_nowait(Stop(code, reason))

    def close_connections(self, code: int, reason: str) -> None:
        self._post_nowait(Stop(code, reason, keep_running=True))

    def notify_durable(self, version: int) -> None:
        self._post_nowait(Durable(version))

    def wait_turn(self, client_id: str, callback: Callable[[Reply | None], None]) -> None:
        """Call `callback` with the reply to frame `client_id` (None if the actor stops first)."""
        self._turn_waiters.setdefault(client_id, []).append(callback)

    async def reply_to(self, frame: TranscriptFrame, *, within: float, **extra: str) -> Reply:
        """Submit `frame` for a caller with no socket (the library interface, `POST /api/test`) and
        wait for the reply to it. Raises `SessionBusy` when the session holds all the frames it may
        (`rate_limited`), `SessionStopped` when the actor stops first, and TimeoutError after `within`."""
        done = anyio.Event()
        replies: list[Reply | None] = []

        def resolved(reply: Reply | None) -> None:
            replies.append(reply)
            done.set()

        self.wait_turn(frame.id, resolved)  # before submitting: an instant brain answers within it
        if not self.submit(None, frame, **extra):
            callbacks = self._turn_waiters.get(frame.id, [])
            if resolved in callbacks:
                callbacks.remove(resolved)
            if not callbacks:
                self._turn_waiters.pop(frame.id, None)
            raise SessionBusy("the session is busy; retry shortly")
        with anyio.fail_after(within):
            await done.wait()
        reply = replies[0]
        if reply is None:
            raise SessionStopped("the session stopped before answering")
        return reply

    @property
    def busy(self) -> bool:
        return self._thinking is not None or bool(self._waiting) or self._frames_queued > 0

    def statistics(self) -> dict[str, Any]:
        return {
            "connections": len(self.connections),
            "player_connected": self.player is not None,
            "queued_frames": self._frames_queued,
            "waiting_turns": len(self._waiting or ()),
            "thinking": self._thinking is not None,
            "unacked": len(self._unacked or ()),
            "replay_events": len(self._replay or ()),
        }

    # ------------------------------------------------------------------ the loop

    def attach(self, tg: TaskGroup, wake: Callable[[SessionActor], None]) -> None:
        """Be driven by a dispatcher: the registry's (session/registry.py), the one way an actor runs.

        Posting a message calls `wake(self)` (once until the dispatcher calls `drain`), and the
        brain is called in tasks of `tg`. `detach` undoes this; cancelling `tg` must come with it.
        """
        self.running = True
        self._tg = tg
        self._wake = wake
        self._scheduled = False
        self._resume_pending()
        if len(self._inbox):  # posted while detached
            self._scheduled = True
            wake(self)

    def detach(self) -> None:
        """The dispatcher stopped (its task group was cancelled): the actor can be attached again."""
        self._release(False)

    def drain(self) -> None:
        """Apply every queued message, in order, without waiting; the dispatcher calls this."""
        inbox = self._inbox
        try:
            while len(inbox):
                if not self._process(inbox.receive_nowait()):
                    if self._brain_scope is not None:
                        self._brain_scope.cancel()
                    self._release(True)
                    return
        finally:
            self._scheduled = False

    def _process(self, message: Message) -> bool:
        """Apply one message; False when it stops the actor."""
        if isinstance(message, Stop):  # the loop's own message: it decides whether the loop goes on
            self._close_all(message.code, message.reason)
            return message.keep_running
        try:
            MESSAGE_HANDLERS[type(message)](self, message)
        except Exception:
            # A bug in one message must not take the session down with it.
            log.exception("session actor failed on %s", type(message).__name__,
                          extra={"session_id": self.session_id})
        return True

    def _release(self, stopped: bool) -> None:
        self.running = False
        self._tg = None
        self._wake = None
        self._thinking = None
        if stopped:
            self.close()
        for waiters in self._turn_waiters.values():
            for callback in waiters:
                callback(None)
        self._turn_waiters.clear()

    def close(self) -> None:
        """Release the inbox for good; the actor cannot run again."""
        self._inbox.close()

    def _post_nowait(self, message: Message) -> None:
        try:
            self._inbox.send_nowait(message)
        except anyio.ClosedResourceError:
            return
        wake = self._wake
        if wake is not None and not self._scheduled:
            self._scheduled = True
            wake(self)

    def _post(self, message: Message) -> None:
        """Post from anywhere: a brain call, a summary, a connection's reader (`submit`). With
        nothing queued before it and a dispatcher driving the actor, the message is applied at
        once, as the dispatcher would have done one loop pass later (issue #14: each delta of a
        streamed reply, and each learner's frame, was a wake-up of the dispatcher). A message
        posted from inside a drain, or while no dispatcher drives the actor, is queued.
        """
        inbox = self._inbox
        if self._wake is None or self._scheduled or len(inbox) or inbox.closed:
            self._post_nowait(message)
            return
        self._scheduled = True
        inbox.send_nowait(message)
        self.drain()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def _on_frame(self, message: Frame) -> None:
        self._frames_queued -= 1
        self.last_activity = message.received_at
        self._apply_queued(message)

    def _apply_queued(self, message: Frame) -> None:
        """Admit a frame and apply it (on arrival, or when the turn it waited behind is answered).

        The admission steps, in the one order every frame goes through (session/admission.py)."""
        conn, frame = message.conn, message.frame
        row = admission(frame)
        if row.idempotent and frame.id is not None and self._duplicate(conn, frame.id):
            return
        refused = row.refusal(frame)
        if refused is not None:
            self._error(conn, refused[0], refused[1], frame.id)
            return
        if row.after_end is AfterEnd.REFUSE and self.negotiation.is_terminal:
            self._error(conn, ErrorCode.SESSION_ENDED, "the negotiation is over", frame.id)
            return
        if row.needs_room and frame.id is not None and not self._mirror_has_room(conn, frame.id):
            return
        if row.waits_behind_turn(frame) and self._queue_behind_turn(message):
            return
        FRAME_HANDLERS[type(frame)](self, message)


# ---------------------------------------------------------------------------- dispatch


def _table(*parts: Mapping[type[Any], Handler]) -> dict[type[Any], Handler]:
    """One dispatch table from the parts' own; a type that two parts claim is a bug, caught at import."""
    table: dict[type[Any], Handler] = {}
    for part in parts:
        for kind, handler in part.items():
            if kind in table:
                raise RuntimeError(f"two handlers for {kind.__name__}")
            table[kind] = handler
    return table


# What the loop does with each message, by its exact type (`Stop` excepted: `_process` handles it).
MESSAGE_HANDLERS: dict[type[Message], Handler] = _table(
    {Frame: SessionActor._on_frame},
    fanout.MESSAGE_HANDLERS,
    turns.MESSAGE_HANDLERS,
    memory.MESSAGE_HANDLERS,
    silence.MESSAGE_HANDLERS,
)

# What `_on_frame` does with each client frame, by its exact type.
FRAME_HANDLERS: dict[type[ClientFrame], Handler] = _table(
    turns.FRAME_HANDLERS,
    commands.FRAME_HANDLERS,
    silence.FRAME_HANDLERS,
    playback.FRAME_HANDLERS,
    scene.FRAME_HANDLERS,
    resume.FRAME_HANDLERS,
)
