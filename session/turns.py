"""The turn pipeline: from a learner's final transcript to the vendor's validated reply.

One turn is in flight at a time. The path of a turn through `ActorTurns`:

1. `_on_transcript`: a final transcript frame (partial speech never changes state). A re-sent id
   is answered as a duplicate and a frame the mirror has no room for is refused
   (`session/fanout.py`). After the negotiation has ended the vendor answers with a closing line
   and no brain call. While another turn is in flight the frame waits, in order, in `_waiting`.
2. `_begin`: `Negotiation.begin_turn` judges the learner's offer on the server, the turn is
   recorded for the mirror (`learner_turn`, acknowledged once durable) and becomes a
   `BrainRequest`.
3. `_think_about`: a brain that can answer at once (`propose_inline`, the rules vendor) is called
   inline. Any other runs in `_think`, a child task of the actor's task group, in a cancel scope
   of its own and under `limits.brain_deadline_s`. A failure or the deadline turns into the
   fallback decision (`FALLBACK_LINE`, and nothing else changes). The task does not touch the
   session: its result comes back through the inbox as `BrainDone`, and a streaming brain's
   partial text as `Delta` and `Withdraw` through the turn's sink (`_Sink`), with the decision's
   numbers and stage as `Decided` once the model has written them. The text passes the turn's
   `ReplyGate` (`session/spoken.py`): a clause goes out as `reply.delta` once it is whole and
   speakable, and a clause that names a number waits until the engine has ruled on `Decided`'s
   numbers (`Negotiation.price_rule`), so no price the engine rejects is ever streamed.
   `reply.withdrawn` takes back what went out when the brain withdraws it.
4. `_on_brain_done`: a result for a turn no longer in flight is dropped. `Negotiation.complete_turn`
   validates the brain's proposal against the rules (an illegal move is overridden, and logged) and
   judges its words: through the turn's gate, whose last held words go out as the final delta, or
   afresh, when what streamed was not this decision's text (then it is withdrawn). The reply gets its
   timings (queue, brain, validation, total), the vendor turn is recorded (`vendor_turn`), its
   events are fanned out, whoever waits for that frame's reply is told (`wait_turn`, the library
   interface), and the next waiting transcript starts.

A turn recorded but never answered (the server restarted, or the actor was stopped mid-call) is
asked again when the actor starts (`_resume_pending`).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping

import anyio
from anyio.abc import TaskGroup
from pydantic import ValidationError

from schemas.brain import BrainRequest, BrainResult, Ledger
from schemas.codec import Envelope
from schemas.decision import DecisionHead
from schemas.frames import (
    Reply,
    ReplyDelta,
    ReplyWithdrawn,
    ServerEvent,
    TranscriptFrame,
    TurnTimings,
)
from session.memory import ActorMemory
from session.messages import BrainDone, ClientFrame, Decided, Delta, Frame, Handler, Message, Withdraw
from session.negotiation import fallback_decision
from session.protocols import Brain
from session.records import PendingTurn, TurnOutcome
from session.report import report_event
from session.silence import ActorSilence
from session.spoken import ReplyGate
from session.tips import tips_event
from session.unclear import clarify_reply, is_unclear
from session.wording import reply_gate

log = logging.getLogger("samvad.session")

FALLBACK_LINE = "Ek minute, bhaiya, let me just serve this lady... yes, what were you saying?"


class _Sink:
    """The DeltaSink a brain gets for one turn: posts into the actor's inbox."""

    __slots__ = ("_actor", "_turn")

    def __init__(self, actor: ActorTurns, turn: int) -> None:
        self._actor = actor
        self._turn = turn

    async def delta(self, text: str) -> None:
        if text:
            self._actor._post(Delta(self._turn, text))

    async def withdraw(self, reason: str) -> None:
        self._actor._post(Withdraw(self._turn, reason))

    async def end(self) -> None:
        self._actor._post(Delta(self._turn, "", end=True))

    async def decided(self, head: Mapping[str, object]) -> None:
        self._actor._post(Decided(self._turn, dict(head)))


class ActorTurns(ActorSilence, ActorMemory):
    """The turn pipeline: the part of `SessionActor` that asks the brain and applies its answer.
    It builds on the silence part: a turn in flight stops the learner's silence timer, and its
    answer starts it again."""

    brain: Brain
    _thinking: PendingTurn | None  # the turn in flight
    _thinking_since: float  # perf_counter when its transcript arrived
    _streamed: list[str]  # its reply text streamed so far (released by the gate)
    _gate: ReplyGate | None  # its words on their way out, for the brain's current attempt
    _delta_ended: bool  # the `reply.delta` with `end` went out
    _withdrawn: bool  # and whether a streamed reply was withdrawn
    _waiting: deque[Frame] | None  # transcripts accepted while a turn is in flight, in order
    _turn_waiters: dict[str, list[Callable[[Reply | None], None]]]  # by frame id (`wait_turn`)
    _propose_now: Callable[[BrainRequest], BrainResult] | None  # the brain's, if it answers at once
    _tg: TaskGroup | None  # where brain calls run
    _brain_scope: anyio.CancelScope | None  # the brain call in flight, if any
    _post: Callable[[Message], None]  # the actor's: post into its own inbox (or apply at once)
    _apply_queued: Callable[[Frame], None]  # the actor's: apply a frame that waited behind a turn

    def _resume_pending(self) -> None:
        pending = self.negotiation.pending
        if pending is not None and self._thinking is None:
            # Recorded but never answered: rebuilt after a restart, or the loop was stopped.
            self._think_about(pending, self.negotiation.brain_request(pending), time.perf_counter())

    def _on_transcript(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, TranscriptFrame)
        if not frame.final:
            if self._thinking is None and self._silence_due is not None:
                self._listen(extended=True)  # the learner is mid-sentence
            return  # partial speech never changes state
        if self.negotiation.is_terminal:
            reply = self.negotiation.closing_reply(frame.id, message.received_at, frame.text.strip())
            self._answer_without_a_turn(message, reply)
            return
        if is_unclear(frame.confidence, self.limits.clarify_below):
            reply = clarify_reply(self.negotiation, frame.id, frame.text.strip(), message.received_at,
                                  frame.confidence)
            self._answer_without_a_turn(message, reply)
            return
        self._begin(message)

    def _answer_without_a_turn(self, message: Frame, reply: Reply) -> None:
        """Store, acknowledge and send a reply that is not a turn (a closing or a clarify reply)."""
        frame = message.frame
        assert isinstance(frame, TranscriptFrame)
        self._ack_when_durable(self._store(), message.conn, frame.id, False)
        self._fanout(Envelope(reply))
        self._resolve(frame.id, reply)
        self._listen()

    def _begin(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, TranscriptFrame)
        self._hush()  # the vendor is thinking, not waiting
        pending = self.negotiation.begin_turn(frame.text.strip(), frame.id, message.received_at)
        self._ack_when_durable(self._store(), message.conn, frame.id, False)
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
        self._gate = None
        self._delta_ended = False
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
                self._post(BrainDone(pending, result, started, time.perf_counter()))
            finally:
                if self._brain_scope is scope:
                    self._brain_scope = None

    def _on_delta(self, message: Delta) -> None:
        if self._thinking is None or message.turn != self._thinking.turn:
            return
        gate = self._turn_gate()
        out = gate.feed(message.text) if message.text else ""
        if message.end:
            out += gate.finish()
        self._say_released(message.turn, out, gate)

    def _on_decided(self, message: Decided) -> None:
        pending = self._thinking
        if pending is None or message.turn != pending.turn:
            return
        try:
            head = DecisionHead.model_validate(message.head)
        except ValidationError:
            return  # numbers no decision may have: the words wait for the whole, validated answer
        gate = self._turn_gate()
        if gate.rule is None:
            self._say_released(message.turn, gate.decide(self.negotiation.price_rule(pending, head)), gate)

    def _turn_gate(self) -> ReplyGate:
        """The gate of the brain's current attempt at the turn in flight, made at its first words."""
        if self._gate is None:
            self._gate = reply_gate(self.negotiation.scenario_name, self.negotiation.level_params.max_sentences)
        return self._gate

    def _say_released(self, turn: int, text: str, gate: ReplyGate) -> None:
        """Send the words the gate let out, and say when the last of them has gone."""
        end = gate.done and bool(self._streamed or text) and not self._delta_ended
        if not text and not end:
            return
        self._streamed.append(text)
        self._delta_ended = end
        self._fanout(Envelope(ReplyDelta(session_id=self.session_id, turn=turn, text=text, end=end)))

    def _on_withdraw(self, message: Withdraw) -> None:
        if self._thinking is None or message.turn != self._thinking.turn:
            return
        self._gate = None  # the brain's next attempt writes its words and numbers afresh
        if self._streamed:
            self._withdraw(message.turn, message.reason)

    def _withdraw(self, turn: int, reason: str) -> None:
        self._fanout(Envelope(ReplyWithdrawn(session_id=self.session_id, turn=turn, reason=reason)))
        self._streamed = []
        self._delta_ended = False
        self._withdrawn = True

    def _on_brain_done(self, done: BrainDone) -> None:
        pending = done.pending
        if self._thinking is not pending:
            return
        validate_start = time.perf_counter()
        result = self._with_summary_cost(done.result)  # a running summary's call is reported here
        gate = self._gate if self._streamed else None
        outcome = self.negotiation.complete_turn(pending, result, self.clock(), withdrawn_stream=self._withdrawn,
                                                 gate=gate, tips=self.tips is not None, report=True)
        if self._streamed:
            if outcome.gated:
                assert gate is not None
                self._say_released(pending.turn, outcome.tail, gate)  # the last words, before the reply
            else:
                self._withdraw(pending.turn, "fallback" if result.fallback else "the final reply differs")
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
        events: tuple[ServerEvent, ...] = (reply, *outcome.events[1:])
        if self.tips is not None and outcome.tips_seq is not None:
            events = (*events, tips_event(self.tips, self.negotiation, pending, outcome.tips_seq))
        if outcome.report_seq is not None:
            events = (*events, report_event(self.negotiation, self.tips, outcome.report_seq))
        self._thinking = None
        self._streamed = []
        self._gate = None
        self._store()
        for event in events:
            self._fanout(Envelope(event))
        self._log_turn(reply, outcome, result)
        self._resolve(pending.client_id, reply)
        self._changed()
        self._remember()  # the running summary, if due: in the background, never waited for
        if self._waiting:
            self._run_waiting()
        else:
            self._listen()

    def _run_waiting(self) -> None:
        """Apply the frames that waited behind the turn just answered, in order, until one starts a turn."""
        while self._waiting and self._thinking is None:
            nxt = self._waiting.popleft()
            if self._waiting_ids is not None:
                self._waiting_ids.discard(nxt.frame.id)
            if not self._waiting:
                self._waiting = self._waiting_ids = None
            self._apply_queued(nxt)

    def _log_turn(self, reply: Reply, outcome: TurnOutcome, result: BrainResult) -> None:
        if not (outcome.overrides or outcome.rewrites or result.fallback) and not log.isEnabledFor(logging.INFO):
            return  # nothing to log: do not build the record's fields either
        extra = {
            "session_id": self.session_id, "turn": reply.turn, "stage": reply.negotiation_state.value,
            # The frozen model's own field dict, shared rather than dumped: its values are plain
            # numbers and strings, which the JSON formatter writes as they are.
            "happiness": reply.happiness_score, "timings": reply.timings.__dict__ if reply.timings else None,
        }
        for override in outcome.overrides:
            log.warning("rules override: %s", override.rule,
                        extra={**extra, "rule": override.rule, "proposed": override.proposed,
                               "applied": override.applied})
        for rewrite in outcome.rewrites:
            log.warning("reply words changed: %s", rewrite.reason,
                        extra={**extra, "rule": rewrite.reason, "proposed": rewrite.proposed,
                               "applied": rewrite.applied})
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


# This part's entries in the actor's dispatch tables (`session/actor.py`).
MESSAGE_HANDLERS: dict[type[Message], Handler] = {
    BrainDone: ActorTurns._on_brain_done,
    Delta: ActorTurns._on_delta,
    Decided: ActorTurns._on_decided,
    Withdraw: ActorTurns._on_withdraw,
}
FRAME_HANDLERS: dict[type[ClientFrame], Handler] = {
    TranscriptFrame: ActorTurns._on_transcript,
}
