"""The session actor: the single writer of one session's state.

Connections post accepted frames into the actor's inbox; the actor applies them strictly in
order through `Negotiation`, asks the brain in a child task whose result comes back through the
same inbox, and fans every event out to every connection without ever waiting on one. A slow
reader is dropped (its queue is bounded), so no spectator can delay the player.

Acknowledgements wait until the mirror says the change is durable. With no mirror configured
that is immediate; with Neo4j it is a few milliseconds later, and it is what lets a client that
re-sends every unacknowledged frame after a crash lose nothing.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup

from schemas.brain import BrainRequest, BrainResult, Ledger
from schemas.codec import Envelope
from schemas.errors import CloseCode, ErrorCode
from schemas.frames import (
    LEDGER_SUMMED,
    Ack,
    Reply,
    ReplyDelta,
    ReplyWithdrawn,
    ResumeFrame,
    SceneFrame,
    Snapshot,
    TranscriptFrame,
    TurnTimings,
)
from session import fanout
from session.fanout import ActorFanout
from session.mailbox import Mailbox
from session.messages import (
    BrainDone,
    ClientFrame,
    Connect,
    Delta,
    Disconnect,
    Durable,
    Frame,
    Handler,
    Message,
    Stop,
    Withdraw,
)
from session.negotiation import Negotiation, PendingTurn, TurnOutcome, fallback_decision
from session.protocols import Brain, Connection, Mirror

log = logging.getLogger("samvad.session")

FALLBACK_LINE = "Ek minute, bhaiya, let me just serve this lady... yes, what were you saying?"


@dataclass(frozen=True, slots=True)
class ActorLimits:
    replay_events: int = 512  # events kept for `resume`
    inbox_frames: int = 32  # client frames queued per session before `rate_limited`
    brain_deadline_s: float = 30.0  # a brain that outlives this is abandoned for the fallback


class _Sink:
    """The DeltaSink a brain gets for one turn: posts into the actor's inbox."""

    __slots__ = ("_actor", "_turn")

    def __init__(self, actor: SessionActor, turn: int) -> None:
        self._actor = actor
        self._turn = turn

    async def delta(self, text: str) -> None:
        if text:
            await self._actor._post(Delta(self._turn, text))

    async def withdraw(self, reason: str) -> None:
        await self._actor._post(Withdraw(self._turn, reason))


class SessionActor(ActorFanout):
    def __init__(
        self,
        negotiation: Negotiation,
        brain: Brain,
        mirror: Mirror,
        *,
        limits: ActorLimits = ActorLimits(),
        clock: Callable[[], float] = time.time,
        on_change: Callable[[SessionActor], None] | None = None,
        version: int = 0,
    ) -> None:
        self.negotiation = negotiation
        self.brain = brain
        self.mirror = mirror
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
        self.version = version
        # Unbounded by type, bounded in practice: client frames are admitted against
        # `limits.inbox_frames` in `submit`, and the other messages come one or a few per turn.
        self._inbox: Mailbox[Message] = Mailbox()
        self._frames_queued = 0
        self._waiting: deque[Frame] | None = None  # transcripts accepted while a turn is in flight
        self._waiting_ids: set[str] | None = None
        self._thinking: PendingTurn | None = None
        self._thinking_since = 0.0
        self._streamed: list[str] = []
        self._withdrawn = False
        self._unacked = None
        self._unacked_ids = {}
        self._turn_waiters: dict[str, list[Callable[[Reply | None], None]]] = {}
        self._propose_now: Callable[[BrainRequest], BrainResult] | None = getattr(brain, "propose_now", None)
        self._tg: TaskGroup | None = None  # where brain calls run
        self._brain_scope: anyio.CancelScope | None = None  # the brain call in flight, if any
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
        """Queue a client frame; False when the session's inbox is full (answer `rate_limited`)."""
        if self._frames_queued >= self.limits.inbox_frames:
            return False
        self._frames_queued += 1
        self._post_nowait(Frame(conn, frame, self.clock(), time.perf_counter(), dict(extra)))
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

    @property
    def replay(self) -> Sequence[Envelope]:
        """The sequenced events kept for `resume`, oldest first (at most `replay_events`)."""
        return tuple(Envelope.from_json(seq, encoded) for seq, encoded in self._replay or ())

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

    async def run(self) -> None:
        """Process the inbox in this task until `stop()`; cancelling instead leaves the actor restartable.

        A registry does not use this: it `attach`es its actors, so that an idle session holds no
        task (see `drain`). Both ways apply the same messages in the same order.
        """
        self.running = True
        stopped = False
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self._resume_pending()
                receive = self._inbox.receive
                while True:
                    try:
                        message = await receive()
                    except anyio.EndOfStream:
                        break
                    if not self._process(message):
                        stopped = True
                        tg.cancel_scope.cancel()
                        break
        finally:
            self._release(stopped)

    def attach(self, tg: TaskGroup, wake: Callable[[SessionActor], None]) -> None:
        """Be driven by a dispatcher instead of `run`.

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

    def _resume_pending(self) -> None:
        pending = self.negotiation.pending
        if pending is not None and self._thinking is None:
            # Recorded but never answered: rebuilt after a restart, or the loop was stopped.
            self._think_about(pending, self.negotiation.brain_request(pending), time.perf_counter())

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

    async def _post(self, message: Message) -> None:
        self._post_nowait(message)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def _on_frame(self, message: Frame) -> None:
        self._frames_queued -= 1
        self.last_activity = message.received_at
        FRAME_HANDLERS[type(message.frame)](self, message)

    def _on_delta(self, message: Delta) -> None:
        if self._thinking is not None and message.turn == self._thinking.turn:
            self._streamed.append(message.text)
            self._fanout(Envelope(ReplyDelta(session_id=self.session_id, turn=message.turn, text=message.text)))

    def _on_withdraw(self, message: Withdraw) -> None:
        if self._thinking is not None and message.turn == self._thinking.turn and self._streamed:
            self._withdraw(message.turn, message.reason)

    # ------------------------------------------------------------------ frames

    def _on_scene(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, SceneFrame)
        if self._duplicate(message.conn, frame.id):
            return
        if self.negotiation.is_terminal:
            self._error(message.conn, ErrorCode.SESSION_ENDED, "the negotiation is over", frame.id)
            return
        if not self._mirror_has_room(message.conn, frame.id):
            return
        self.negotiation.apply_scene(
            object_grabbed=frame.object_grabbed,
            input_language=frame.input_language,
            target_language=frame.target_language,
            now=message.received_at,
        )
        self.negotiation.remember(frame.id)
        version = self._record("scene", {"id": frame.id, "object_grabbed": frame.object_grabbed,
                                         "item": self.negotiation.item,
                                         "input_language": self.negotiation.input_language.value,
                                         "target_language": self.negotiation.target_language.value,
                                         "at": message.received_at})
        self._ack_when_durable(version, message.conn, frame.id, False)
        self._changed()

    def _on_transcript(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, TranscriptFrame)
        if not frame.final:
            return  # partial speech never changes state
        if self._duplicate(message.conn, frame.id):
            return
        if not self._mirror_has_room(message.conn, frame.id):
            return
        if self.negotiation.is_terminal:
            self.negotiation.remember(frame.id)
            reply = self.negotiation.closing_reply(frame.id, message.received_at, frame.text.strip())
            version = self._record("closing_reply", {"id": frame.id, "seq": reply.seq, "text": frame.text,
                                                     "reply": reply.text, "at": message.received_at})
            self._ack_when_durable(version, message.conn, frame.id, False)
            self._fanout(Envelope(reply))
            self._resolve(frame.id, reply)
            return
        if self._thinking is not None:
            if self._waiting is None or self._waiting_ids is None:
                self._waiting, self._waiting_ids = deque(), set()
            self._waiting.append(message)
            self._waiting_ids.add(frame.id)
            return
        self._begin(message)

    def _begin(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, TranscriptFrame)
        pending = self.negotiation.begin_turn(frame.text.strip(), frame.id, message.received_at)
        self.negotiation.remember(frame.id)
        negotiation = self.negotiation
        version = self._record("learner_turn", {
            "id": frame.id, "turn": pending.turn, "text": pending.text, "item": pending.item,
            "offer": pending.offer, "assessment": pending.assessment.value,
            "stage": negotiation.stage.value, "happiness": negotiation.happiness,
            "object_grabbed": negotiation.object_grabbed,
            "quote": negotiation.quotes.get(pending.item) if pending.item else None,
            "session_item": negotiation.item, "at": pending.received_at,
        })
        self._ack_when_durable(version, message.conn, frame.id, False)
        request = self.negotiation.brain_request(
            pending,
            rag_context=message.extra.get("rag_context", ""),
            context_block=message.extra.get("context_block", ""),
        )
        self._think_about(pending, request, message.received_perf)

    def _think_about(self, pending: PendingTurn, request: BrainRequest, since: float) -> None:
        self._thinking = pending
        self._thinking_since = since
        self._streamed = []
        self._withdrawn = False
        if self._propose_now is not None:
            # A rules brain answers in microseconds: no task, no round trip through the inbox.
            started = time.perf_counter()
            try:
                result = self._propose_now(request)
            except Exception as exc:
                result = self._fallback(request, started, f"{type(exc).__name__}: {exc}")
            self._on_brain_done(BrainDone(pending, result, started, time.perf_counter()))
            return
        assert self._tg is not None
        self._tg.start_soon(self._think, pending, request)

    def _fallback(self, request: BrainRequest, started: float, error: str) -> BrainResult:
        log.error("brain failed: %s", error, extra={"session_id": self.session_id, "turn": request.turn})
        return BrainResult(
            decision=fallback_decision(request.stage, request.happiness_score, FALLBACK_LINE),
            fallback=True,
            error=error,
            ledger=Ledger(brain_ms=(time.perf_counter() - started) * 1000),
        )

    async def _think(self, pending: PendingTurn, request: BrainRequest) -> None:
        # Its own scope: stopping an attached actor cancels this, not the registry's task group.
        with anyio.CancelScope() as scope:
            self._brain_scope = scope
            try:
                started = time.perf_counter()
                result: BrainResult | None = None
                with anyio.move_on_after(self.limits.brain_deadline_s):
                    try:
                        result = await self.brain.propose(request, _Sink(self, pending.turn))
                    except Exception as exc:  # the brain's own failures were translated; a last guard
                        result = self._fallback(request, started, f"{type(exc).__name__}: {exc}")
                if result is None:
                    result = self._fallback(request, started, "brain deadline exceeded")
                await self._post(BrainDone(pending, result, started, time.perf_counter()))
            finally:
                if self._brain_scope is scope:
                    self._brain_scope = None

    def _withdraw(self, turn: int, reason: str) -> None:
        self._fanout(Envelope(ReplyWithdrawn(session_id=self.session_id, turn=turn, reason=reason)))
        self._streamed = []
        self._withdrawn = True

    def _on_brain_done(self, done: BrainDone) -> None:
        pending = done.pending
        if self._thinking is not pending:
            return
        validate_start = time.perf_counter()
        result = done.result
        streamed = "".join(self._streamed)
        if streamed and streamed.strip() != result.decision.reply_text.strip():
            self._withdraw(pending.turn, "fallback" if result.fallback else "the final reply differs")
        previous_stage = self.negotiation.stage
        outcome = self.negotiation.complete_turn(pending, result, self.clock(), withdrawn_stream=self._withdrawn)
        finished = time.perf_counter()
        ledger = result.ledger
        timings = TurnTimings(**{
            **ledger.__dict__,  # the brain's own accounting, field for field
            "brain": self.brain.name,
            "queue_ms": round(max(0.0, (done.started - self._thinking_since) * 1000), 3),
            "brain_ms": round(ledger.brain_ms or (done.finished - done.started) * 1000, 3),
            "validation_ms": round((finished - validate_start) * 1000, 3),
            "total_ms": round((finished - self._thinking_since) * 1000, 3),
        })
        first = outcome.events[0]
        assert isinstance(first, Reply)
        reply = first.model_copy(update={"timings": timings})
        events = (reply, *outcome.events[1:])
        self._thinking = None
        self._streamed = []
        negotiation = self.negotiation
        self._record("vendor_turn", {
            "turn": pending.turn, "text": reply.text, "stage": reply.negotiation_state.value,
            "previous_stage": previous_stage.value, "happiness": reply.happiness_score,
            "quote": reply.counter_price, "item": reply.item, "flags": list(reply.flags),
            "assessment": reply.offer_assessment.value,
            "forced": bool(outcome.verdict and outcome.verdict.forced_closure),
            "seq": negotiation.seq, "outcome": negotiation.outcome.value if negotiation.outcome else None,
            "reply_seq": reply.seq, "at": negotiation.updated_at,
            "ledger": ledger.model_dump(include=set(LEDGER_SUMMED)),
        })
        for event in events:
            self._fanout(Envelope(event))
        self._log_turn(reply, outcome, result)
        self._resolve(pending.client_id, reply)
        self._changed()
        if self._waiting:
            nxt = self._waiting.popleft()
            assert isinstance(nxt.frame, TranscriptFrame)
            if self._waiting_ids is not None:
                self._waiting_ids.discard(nxt.frame.id)
            if not self._waiting:
                self._waiting = self._waiting_ids = None
            self._on_transcript(nxt)

    def _log_turn(self, reply: Reply, outcome: TurnOutcome, result: BrainResult) -> None:
        if not (outcome.overrides or result.fallback) and not log.isEnabledFor(logging.INFO):
            return  # nothing to log: do not build the record's fields either
        extra = {
            "session_id": self.session_id, "turn": reply.turn, "stage": reply.negotiation_state.value,
            "happiness": reply.happiness_score, "timings": reply.timings.model_dump() if reply.timings else None,
        }
        for override in outcome.overrides:
            log.warning("rules override: %s", override.rule,
                        extra={**extra, "rule": override.rule, "proposed": override.proposed,
                               "applied": override.applied})
        if result.fallback:
            log.warning("brain fell back: %s", result.error, extra=extra)
        log.info("turn", extra=extra)
        summary = self.negotiation.summary()
        if summary is not None:
            log.info("session ended", extra={**extra, "summary": summary.model_dump(mode="json")})

    def _resolve(self, client_id: str | None, reply: Reply | None) -> None:
        if client_id is None:
            return
        for callback in self._turn_waiters.pop(client_id, ()):
            callback(reply)

    def _on_resume(self, message: Frame) -> None:
        conn, frame = message.conn, message.frame
        assert isinstance(frame, ResumeFrame)
        if conn is None or conn.conn_id not in self.connections:
            return
        latest = self.negotiation.seq
        last = min(frame.last_seq, latest)
        oldest = self._replay[0][0] if self._replay else None
        if frame.last_seq > latest:
            # The client saw events that were never stored (a crash lost them): its state is ahead.
            conn.send_nowait(Envelope(Snapshot(
                session_id=self.session_id, seq=latest, state=self.negotiation.snapshot(), replayed=False,
                reason=f"events after seq {latest} were lost in a restart before they were stored",
            )))
        elif last == latest:
            if not self._replay:
                # Nothing held for replay: the session was rebuilt from storage (after a restart or
                # an eviction). The client is level with it, and a snapshot says so explicitly.
                conn.send_nowait(Envelope(Snapshot(
                    session_id=self.session_id, seq=latest, state=self.negotiation.snapshot(), replayed=False,
                    reason="the session was rebuilt from storage; nothing is held for replay",
                )))
        elif oldest is not None and oldest <= last + 1:
            for seq, encoded in self._replay or ():
                assert seq is not None
                if seq > last and not conn.send_nowait(Envelope.from_json(seq, encoded)):
                    return
        else:
            missing = latest - last
            conn.send_nowait(Envelope(Snapshot(
                session_id=self.session_id, seq=latest, state=self.negotiation.snapshot(), replayed=False,
                reason=f"{missing} events after seq {last} are no longer held for replay",
            )))
        if frame.id is not None:
            conn.send_nowait(Envelope(Ack(session_id=self.session_id, id=frame.id)))


# ---------------------------------------------------------------------------- dispatch

# What the loop does with each message, by its exact type (`Stop` excepted: `_process` handles it).
# A new command or timer brings its message type or client frame type and its handler, and adds
# the pair here.
MESSAGE_HANDLERS: dict[type[Message], Handler] = {
    Frame: SessionActor._on_frame,
    BrainDone: SessionActor._on_brain_done,
    Delta: SessionActor._on_delta,
    Withdraw: SessionActor._on_withdraw,
    **fanout.MESSAGE_HANDLERS,
}

# And with each client frame (`_on_frame` looks it up, after the bookkeeping every frame needs).
FRAME_HANDLERS: dict[type[ClientFrame], Handler] = {
    TranscriptFrame: SessionActor._on_transcript,
    SceneFrame: SessionActor._on_scene,
    ResumeFrame: SessionActor._on_resume,
}
