"""The session actor: the I/O shell around one session's machine. It orders inputs and does I/O.

Every decision about a session is its machine's (`SessionMachine`, session/machine.py): the actor
holds what is ordering or I/O, and nothing else. It has:

- the inbox: connections post frames (`submit`), the mirror posts durability (`notify_durable`),
  the brain's task posts its answers, the timers post their expiry; the actor applies them one at
  a time, in order, and never waits on anything while doing so;
- admission (session/admission.py): every client frame passes the same steps, in one order, before
  the machine sees it, and the frames held behind a turn in flight (`held`);
- the calls that take time (`BrainCalls`, session/calls.py): the brain and the running summary,
  in child tasks whose results come back through the inbox;
- the silence timer's wake-ups, in the registry's shared heap (session/timers.py);
- fan-out, the replay ring and acknowledgements (`Fanout`, session/fanout.py), and the mirror,
  which gets each step's changes in order.

A step. The actor hands an input to `machine.handle(input, now)` and carries out the `Step` it
returns (session/asks.py, `run_step`): the changes to the mirror, then each output in order.

The loop. An actor runs driven by its registry's dispatcher (`attach`, then `drain` whenever it
has mail), so that an idle session holds no task. Tests drive it the same way (`tests/fakes.py`,
`hosted`): there is no second loop for them to test instead. `_process` handles `Stop` itself,
since it decides whether the loop goes on, and hands every other message to `MESSAGE_HANDLERS`,
by its exact type. A handler that raises is logged, and the session carries on.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from schemas.codec import Envelope
from schemas.errors import CloseCode, ErrorCode
from schemas.frames import Error, Reply, ReplySpoken, ResumeFrame, TranscriptFrame
from schemas.summary import SummaryAsk
from session.admission import AfterEnd, Held, admission
from session.answer import Answer
from session.asks import run_step
from session.calls import FALLBACK_LINE, BrainCalls
from session.fanout import Fanout
from session.machine import Input, SessionMachine
from session.mailbox import Mailbox
from session.messages import (
    ActorLimits,
    BrainDone,
    ClientFrame,
    Connect,
    Consult,
    Decided,
    Delta,
    Disconnect,
    Durable,
    Frame,
    Message,
    PlayerJoined,
    Recognised,
    ResumeAsked,
    SilenceDue,
    Speaking,
    Spoken,
    Stop,
    SummaryDone,
    Withdraw,
)
from session.negotiation import Negotiation
from session.protocols import Brain, Connection, Mirror, TipSource
from session.speech import Hearing, hearing
from session.timers import SilenceTimers
from session.voice_stages import VoiceStageLog

__all__ = ["FALLBACK_LINE", "ActorLimits", "SessionActor", "SessionBusy", "SessionStopped"]

log = logging.getLogger("samvad.session")


class SessionBusy(Exception):
    """The session holds all the frames it may; the caller retries shortly (`rate_limited`)."""


class SessionStopped(Exception):
    """The actor stopped before answering."""


class SessionActor:
    """One session's actor: its machine, its inbox, and the loop that applies the inbox in order.
    Slotted, and its parts hold no reference back to it: an idle session is small, and an evicted
    one is freed without the collector."""

    __slots__ = ("__weakref__", "_frames_queued", "_inbox", "_news", "_scheduled", "_silence_due", "_silence_queued",
                 "_wake", "brain", "calls", "clock", "fanout", "held", "last_activity", "limits", "machine", "mirror",
                 "on_change", "running", "session_id", "thinking_since", "timers", "turn_waiters", "voice_stages")

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
        self.session_id = negotiation.session_id
        self.brain = brain
        self.mirror = mirror
        self.limits = limits
        self.clock = clock
        self.on_change = on_change
        self.timers = timers
        self.calls = BrainCalls(brain, limits.brain_deadline_s, self.session_id)
        self.machine = SessionMachine(negotiation, limits=limits, tips=tips,
                                      writes_summaries=self.calls.writes_summaries, speculates=self.calls.speculates)
        self.fanout = Fanout(self.session_id, mirror, limits.replay_events)
        self.last_activity = clock()
        # Unbounded by type, bounded in practice: client frames are admitted against
        # `limits.inbox_frames` in `submit`, and the other messages come one or a few per turn.
        self._inbox: Mailbox[Message] = Mailbox()
        self._frames_queued = 0
        self.held = Held()  # frames held behind the turn in flight, in order
        self.thinking_since = 0.0  # perf_counter when the turn in flight's transcript arrived
        self.turn_waiters: dict[str, list[Callable[[Reply | None], None]]] = {}  # by frame id (`wait_turn`)
        self.voice_stages = VoiceStageLog()  # spoken turns' stages until their replies take them
        self._silence_due: float | None = None  # the silence timer (session/timers.py's two slots)
        self._silence_queued: float | None = None
        # Driven by a registry (`attach`): no task of its own while idle. `_wake` asks the
        # registry's dispatcher to `drain()` this actor; `_scheduled` says it has been asked.
        self._wake: Callable[[SessionActor], None] | None = None
        self._scheduled = False
        self._news = False  # changed since the listeners last heard (`changed`)
        self.running = False

    @property
    def negotiation(self) -> Negotiation:
        """The session's state, to read (the machine's; only `machine.handle` changes it)."""
        return self.machine.negotiation

    @property
    def connections(self) -> dict[int, Connection]:
        return self.fanout.connections

    @property
    def player(self) -> Connection | None:
        return self.fanout.player

    @property
    def tips(self) -> TipSource | None:
        return self.machine.tips

    @property
    def replay(self) -> tuple[Envelope, ...]:
        """The sequenced events kept for `resume`, oldest first (at most `replay_events`)."""
        return self.fanout.replay

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
        held = self._frames_queued + self.held.count + (self.machine.thinking is not None)
        if held >= self.limits.inbox_frames:
            return False
        self._frames_queued += 1
        self.post(Frame(conn, frame, self.clock(), time.perf_counter(), dict(extra)))
        return True

    def recognised(self, heard: Recognised) -> None:
        """What the recogniser heard in an utterance (a connection's transcriber): a `speech` event,
        in the session's sequence. Post it before the utterance's transcript (`submit`)."""
        self.post(heard)

    def spoken(self, event: ReplySpoken) -> None:
        """The player's first audio of a reply to a spoken turn left: the spectators hear its figures."""
        self.post(Spoken(event))

    def speaking(self) -> None:
        """The learner's audio is arriving (each `audio` frame): the silence timer waits for them."""
        self.post(Speaking())

    async def hearing(self, utterance_id: str) -> Hearing | None:
        """What a transcriber needs to know of the session before decoding `utterance_id`, answered by
        the actor in its own step (None if the actor stops first)."""
        if self._inbox.closed:
            return None
        answer: Answer[Hearing] = Answer()
        self.post(Consult(utterance_id, answer))
        with anyio.move_on_after(self.limits.brain_deadline_s):
            await answer.done.wait()
        return answer.value

    def stop(self, code: int = CloseCode.GOING_AWAY, reason: str = "server shutting down") -> None:
        self._post_nowait(Stop(code, reason))

    def close_connections(self, code: int, reason: str) -> None:
        self._post_nowait(Stop(code, reason, keep_running=True))

    def notify_durable(self, version: int) -> None:
        self._post_nowait(Durable(version))

    def wait_turn(self, client_id: str, callback: Callable[[Reply | None], None]) -> None:
        """Call `callback` with the reply to frame `client_id` (None if the actor stops first)."""
        self.turn_waiters.setdefault(client_id, []).append(callback)

    async def reply_to(self, frame: TranscriptFrame, *, within: float, **extra: str) -> Reply:
        """Submit `frame` for a caller with no socket (the library interface, `POST /api/test`) and
        wait for the reply to it. Raises `SessionBusy` when the session holds all the frames it may
        (`rate_limited`), `SessionStopped` when the actor stops first, and TimeoutError after `within`."""
        resolved: Answer[Reply | None] = Answer()
        self.wait_turn(frame.id, resolved)  # before submitting: an instant brain answers within it
        if not self.submit(None, frame, **extra):
            callbacks = self.turn_waiters.get(frame.id, [])
            if resolved in callbacks:
                callbacks.remove(resolved)
            if not callbacks:
                self.turn_waiters.pop(frame.id, None)
            raise SessionBusy("the session is busy; retry shortly")
        with anyio.fail_after(within):
            await resolved.done.wait()
        reply = resolved.value
        if reply is None:
            raise SessionStopped("the session stopped before answering")
        return reply

    def compact(self) -> bool:
        """Let an ended session nobody has open keep only what its report and a late reconnect need.

        The replay ring goes: a reconnect then gets its welcome, and a `resume` a snapshot, as after
        a restart; the registry may then swap the actor for a record (session/ended.py). False when
        the session is live, open, busy or has mail waiting (a `Connect`), and nothing changed.
        """
        if not self.negotiation.is_terminal or self.fanout.connections or self.busy or len(self._inbox):
            return False
        self.fanout.forget_replay()
        return True

    @property
    def busy(self) -> bool:
        return self.machine.thinking is not None or self.held.count > 0 or self._frames_queued > 0

    def statistics(self) -> dict[str, Any]:
        return {
            "connections": len(self.fanout.connections),
            "player_connected": self.fanout.player is not None,
            "queued_frames": self._frames_queued,
            "waiting_turns": len(self.held),
            "thinking": self.machine.thinking is not None,
            "unacked": self.fanout.unacked,
            "replay_events": self.fanout.replay_len,
        }

    # ------------------------------------------------------------------ the loop

    def attach(self, tg: TaskGroup, wake: Callable[[SessionActor], None]) -> None:
        """Be driven by a dispatcher: the registry's (session/registry.py), the one way an actor runs.

        Posting a message calls `wake(self)` (once until the dispatcher calls `drain`), and the
        brain is called in tasks of `tg`. `detach` undoes this; cancelling `tg` must come with it.
        """
        self.running = True
        self.calls.tg = tg
        self._wake = wake
        self._scheduled = False
        # A turn recorded but never answered (rebuilt after a restart, or the loop was stopped).
        run_step(self, self.machine.resume_pending(), None, time.perf_counter())
        if self._news:
            self._tell()
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
                    self.calls.abandon()
                    self._release(True)
                    return
        finally:
            self._scheduled = False

    def _process(self, message: Message) -> bool:
        """Apply one message; False when it stops the actor."""
        if isinstance(message, Stop):  # the loop's own message: it decides whether the loop goes on
            self.fanout.close_all(message.code, message.reason)
            self.hush()
            return message.keep_running
        try:
            MESSAGE_HANDLERS[type(message)](self, message)
        except Exception:
            # A bug in one message must not take the session down with it.
            log.exception("session actor failed on %s", type(message).__name__,
                          extra={"session_id": self.session_id})
        if self._news:
            self._tell()
        return True

    def _release(self, stopped: bool) -> None:
        self.running = False
        self.calls.tg = None
        self._wake = None
        self.machine.stop_thinking()
        if stopped:
            self.close()
        for waiters in self.turn_waiters.values():
            for callback in waiters:
                callback(None)
        self.turn_waiters.clear()

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

    def post(self, message: Message) -> None:
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

    def changed(self) -> None:
        """The session changed: its listeners hear of it once the message at hand is applied (an
        inline turn is two steps, the learner's and the vendor's, and one piece of news)."""
        self._news = True

    def _tell(self) -> None:
        self._news = False
        if self.on_change is not None:
            self.on_change(self)

    # ------------------------------------------------------------------ messages

    def _on_connect(self, message: Connect) -> None:
        conn = message.conn
        self.fanout.add(conn, self.negotiation, self.limits)
        self.last_activity = self.clock()
        self.changed()
        if self.fanout.player is conn:
            self._step(PlayerJoined(), self.clock(), None)

    def _on_disconnect(self, message: Disconnect) -> None:
        conn = message.conn
        if not self.fanout.remove(conn):
            return
        if self.fanout.player is None:
            self.hush()
        self.changed()

    def _on_consult(self, message: Consult) -> None:
        message.answer(hearing(self.negotiation, message.utterance_id))

    def _on_durable(self, message: Durable) -> None:
        self.fanout.flush_acks(message.version)

    def _on_silence_due(self, message: SilenceDue) -> None:
        if self.fanout.player is None or self.held.count:
            return  # gone, or moved on since the timer was armed
        self._step(message, self.clock(), None)

    def answered(self, done: BrainDone) -> None:
        """The brain's answer to the turn in flight (its step's `Answered` times the reply from now)."""
        started = time.perf_counter()
        run_step(self, self.machine.handle(done, self.clock()), None, started)

    def _on_input(self, message: Input) -> None:
        """A brain's streamed words or numbers, a summary, a recognised utterance: straight to the machine."""
        self._step(message, self.clock(), None)

    def _on_recognised(self, message: Recognised) -> None:
        """What was heard goes to the machine; a turn's voice stages wait for its reply's timings."""
        self.voice_stages.keep(message)
        self._on_input(message)

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
        if row.after_end is AfterEnd.REFUSE and self.machine.negotiation.is_terminal:
            self._error(conn, ErrorCode.SESSION_ENDED, "the negotiation is over", frame.id)
            return
        if row.needs_room and frame.id is not None and not self.mirror.has_room():
            self._error(conn, ErrorCode.UNAVAILABLE, "the session store is unreachable and its buffer is full; "
                        "re-send later with the same id", frame.id)
            return
        if row.waits_behind_turn(frame) and self.machine.thinking is not None:
            self.held.hold(message, frame.id)
            return
        if type(frame) is ResumeFrame:
            if conn is None or conn.conn_id not in self.fanout.connections:
                return  # from a connection that has gone
            run_step(self, self.machine.handle(ResumeAsked(frame, self.fanout.oldest_kept), message.received_at),
                     message, message.received_perf)
            return
        run_step(self, self.machine.handle(message, message.received_at), message, message.received_perf)

    def _duplicate(self, conn: Connection | None, frame_id: str) -> bool:
        """Answer a re-sent id; True when the frame must not be applied again."""
        if frame_id in self.held:
            return True  # held behind the turn in flight; its ack comes when it is applied
        if not self.machine.negotiation.seen(frame_id):
            return False
        self.fanout.duplicate(conn, frame_id)
        return True

    def _error(self, conn: Connection | None, code: ErrorCode, message: str, frame_id: str | None) -> None:
        self.fanout.send(conn, Error(session_id=self.session_id, code=code, message=message, id=frame_id))

    # ------------------------------------------------------------------ running a step

    def _step(self, message: Input, now: float, origin: Frame | None) -> None:
        run_step(self, self.machine.handle(message, now), origin, time.perf_counter())

    def hush(self) -> None:
        """Stop the silence timer (a turn in flight, the player gone, the session over)."""
        self._silence_due = None

    def run_held(self) -> None:
        """Apply the frames held behind the turn just answered, in order, until one starts a turn."""
        held = self.held
        while held.count and self.machine.thinking is None:
            self._apply_queued(held.next())

    def summarize(self, token: int, ask: SummaryAsk) -> None:
        self.calls.summarize(token, ask, self.post)

    def silence_due(self) -> None:
        """The timers' call when the deadline passed (session/timers.py)."""
        self._post_nowait(SilenceDue())


# What the loop does with each message, by its exact type (`Stop` excepted: `_process` handles it).
MESSAGE_HANDLERS: dict[type[Any], Callable[[SessionActor, Any], None]] = {
    Frame: SessionActor._on_frame,
    Connect: SessionActor._on_connect,
    Disconnect: SessionActor._on_disconnect,
    Durable: SessionActor._on_durable,
    SilenceDue: SessionActor._on_silence_due,
    BrainDone: SessionActor.answered,
    Delta: SessionActor._on_input,
    Decided: SessionActor._on_input,
    Withdraw: SessionActor._on_input,
    SummaryDone: SessionActor._on_input,
    Recognised: SessionActor._on_recognised,
    Speaking: SessionActor._on_input,
    Spoken: lambda actor, spoken: actor.fanout.to_spectators(Envelope(spoken.event)),
    Consult: SessionActor._on_consult,
}
