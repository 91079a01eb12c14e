"""How the actor carries out a step of its machine: the changes to the mirror, then each output in order.

`run_step` is the one place a `Step` (session/outputs.py) turns into I/O. The changes go to the
mirror first, in order; then each output: a server event goes to every connection (and, with a
seq, into the replay ring), and each ask runs by its entry in `RUN`, by its exact type. The
registry is told the session changed once its changes are out (`on_change`).

A turn's reply gets its `timings` here (`answered`): how long it queued, the brain took and the
engine validated are measurements of this process, not decisions, so the machine leaves them out;
so are a spoken turn's stages before its transcript, which the actor keeps by utterance id.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from schemas.brain import BrainResult
from schemas.codec import Envelope
from schemas.frames import Reply, TurnTimings
from schemas.summary import SummaryAsk
from session.admission import Held
from session.calls import BrainCalls
from session.fanout import Fanout
from session.machine_state import MachineState
from session.messages import ActorLimits, BrainDone, Frame, Message
from session.negotiation import Negotiation
from session.outputs import (
    Abandon,
    Acknowledge,
    Answer,
    Answered,
    DropSpeculation,
    Hush,
    Listen,
    Replay,
    Resolve,
    RunWaiting,
    Speculate,
    Step,
    Summarize,
    Think,
)
from session.protocols import Brain, Connection, Mirror
from session.records import TurnOutcome
from session.timers import SilenceTimers
from session.voice_stages import VoiceStageLog

__all__ = ["RUN", "Shell", "answered", "log_turn", "run_step"]

log = logging.getLogger("samvad.session")
LISTEN = Listen()


class Shell(Protocol):
    """What a step's asks need of the actor (session/actor.py's `SessionActor` is the one)."""

    mirror: Mirror
    fanout: Fanout
    calls: BrainCalls
    brain: Brain
    thinking_since: float  # perf_counter when the turn in flight's frame arrived
    turn_waiters: dict[str, list[Callable[[Reply | None], None]]]  # by frame id
    voice_stages: VoiceStageLog  # spoken turns' stages before their transcript
    held: Held  # the frames held behind the turn in flight
    timers: SilenceTimers | None  # the registry's heap of silence deadlines (None: no timers)
    limits: ActorLimits
    _silence_due: float | None  # the silence timer's deadline, as the timers read it (None: stopped)
    _silence_queued: float | None  # and its entry's in their heap (session/timers.py)

    @property
    def machine(self) -> MachineState: ...

    def changed(self) -> None:
        """Tell the registry's listeners the session changed."""

    def post(self, message: Message) -> None:
        """Post into the actor's inbox (or apply at once)."""

    def answered(self, done: BrainDone) -> None:
        """The brain's answer to the turn in flight."""

    def summarize(self, token: int, ask: SummaryAsk) -> None:
        """Ask the brain for the running summary in the background."""

    def silence_due(self) -> None:
        """The silence timer's deadline passed (what the timers call)."""

    def run_held(self) -> None:
        """Apply the frames held behind the turn just answered, in order, until one starts a turn."""



def run_step(shell: Shell, step: Step, origin: Frame | None, since: float) -> None:
    """Do what `step` asks, in order; `origin` is the frame it handled (its sender gets the answers and
    acks), `since` when that frame arrived (perf_counter, for a turn's timings)."""
    changes = step.changes
    if changes:
        submit = shell.mirror.submit
        for change in changes:
            submit(change)
    conn = origin.conn if origin is not None else None
    fanout = shell.fanout
    for output in step.outputs:
        if isinstance(output, tuple):  # an ask (a named tuple); an event is a model
            RUN[type(output)](shell, output, conn, since)
        else:
            fanout.broadcast(Envelope(output))
    if changes:
        shell.changed()  # the lobby and the learners' store read the session: a scene changes its item


def answered(shell: Shell, ask: Answered, conn: Connection | None, since: float) -> None:
    """A turn answered, before its events go out (`since`: when the actor took the brain's answer).
    The reply is the step's own and not yet sent, so its timings are written into it in place."""
    reply, outcome, result, done, client_id = ask
    finished = time.perf_counter()
    ledger = result.ledger
    started = shell.thinking_since  # when the turn's frame arrived
    heard = shell.voice_stages.take(client_id)
    reply.__dict__["timings"] = TurnTimings(**{
        **ledger.__dict__,  # the brain's own accounting, field for field
        "brain": shell.brain.name,
        "queue_ms": round(max(0.0, (done.started - started) * 1000), 3),
        "brain_ms": round(ledger.brain_ms or (done.finished - done.started) * 1000, 3),
        "validation_ms": round((finished - since) * 1000, 3),
        "total_ms": round((finished - started) * 1000, 3),
        **({} if heard is None else heard._asdict()),  # a spoken turn's stages before its transcript
    })
    if client_id is not None:
        for callback in shell.turn_waiters.pop(client_id, ()):
            callback(reply)
    if outcome.overrides or outcome.rewrites or result.fallback or log.isEnabledFor(logging.INFO):
        log_turn(shell.machine.negotiation, reply, outcome, result)


def log_turn(negotiation: Negotiation, reply: Reply, outcome: TurnOutcome, result: BrainResult) -> None:
    """Log an answered turn: what the engine overrode or rewrote, a fallback, the turn (INFO when it
    called a model, else DEBUG) and the end's summary."""
    extra = {
        "session_id": negotiation.session_id, "turn": reply.turn, "stage": reply.negotiation_state.value,
        # The frozen model's own field dict, shared rather than dumped: its values are plain
        # numbers and strings, which the JSON formatter writes as they are.
        "happiness": reply.happiness_score, "timings": reply.timings.__dict__ if reply.timings else None,
    }
    for override in outcome.overrides:
        log.warning("rules override: %s", override.rule,
                    extra={**extra, "rule": override.rule, "proposed": override.proposed, "applied": override.applied})
    for rewrite in outcome.rewrites:
        log.warning("reply words changed: %s", rewrite.reason,
                    extra={**extra, "rule": rewrite.reason, "proposed": rewrite.proposed, "applied": rewrite.applied})
    if result.fallback:
        log.warning("brain fell back: %s", result.error, extra=extra)
    if reply.timings is not None and reply.timings.llm_calls:
        log.info("turn", extra=extra)  # what the turn cost: the model's calls and tokens
    else:
        # A turn without a model call (the rule brain, a fallback's scripted line) tells an
        # operator nothing that /metrics does not (turns and their pipeline timings, per brain),
        # and at a thousand turns a second its record was the costliest line of the turn's
        # logging (docs/performance.md, "Rule turn at churn"): DEBUG.
        log.debug("turn", extra=extra)
    summary = negotiation.summary()
    if summary is not None:
        log.info("session ended", extra={**extra, "summary": summary.model_dump(mode="json")})


def _answer(shell: Shell, ask: Answer, conn: Connection | None, since: float) -> None:
    shell.fanout.send(conn, ask.event)


def _acknowledge(shell: Shell, ask: Acknowledge, conn: Connection | None, since: float) -> None:
    shell.fanout.ack_when_durable(shell.machine.negotiation.version, conn, ask.frame_id, False)


def _think(shell: Shell, ask: Think, conn: Connection | None, since: float) -> None:
    shell._silence_due = None  # the vendor is thinking, not waiting for the learner
    shell.thinking_since = since
    done = shell.calls.think(ask.pending, ask.request, shell.post)
    if done is not None:  # a brain that answers at once: no task, no round trip through the inbox
        shell.answered(done)


def _speculate(shell: Shell, ask: Speculate, conn: Connection | None, since: float) -> None:
    shell.calls.speculate(ask.utterance_id, ask.request)


def _drop_speculation(shell: Shell, ask: DropSpeculation, conn: Connection | None, since: float) -> None:
    shell.calls.drop_speculation()


def _abandon(shell: Shell, ask: Abandon, conn: Connection | None, since: float) -> None:
    shell.calls.abandon()


def _listen(shell: Shell, ask: Listen, conn: Connection | None = None, since: float = 0.0) -> None:
    """(Re)start the silence timer, if a player is there and the vendor waits for the learner
    (`if_running`: only if it runs now)."""
    timers = shell.timers
    if timers is None or shell.fanout.player is None or not shell.machine.waits_for_learner:
        return
    if ask.if_running and shell._silence_due is None:
        return
    limits = shell.limits
    timers.arm(shell, limits.silence_extended_s if ask.extended else limits.silence_s)


def _hush(shell: Shell, ask: Hush, conn: Connection | None, since: float) -> None:
    shell._silence_due = None


def _resolve(shell: Shell, ask: Resolve, conn: Connection | None, since: float) -> None:
    for callback in shell.turn_waiters.pop(ask.client_id, ()):
        callback(ask.reply)


def _summarize(shell: Shell, ask: Summarize, conn: Connection | None, since: float) -> None:
    shell.summarize(ask.token, ask.ask)


def _replay(shell: Shell, ask: Replay, conn: Connection | None, since: float) -> None:
    if conn is None:
        return
    for envelope in shell.fanout.kept(ask.after):
        if not conn.send_nowait(envelope):
            return  # it overflowed, and closed itself as a slow consumer


def _run_waiting(shell: Shell, ask: RunWaiting, conn: Connection | None, since: float) -> None:
    if shell.held.count:
        shell.run_held()
    else:
        _listen(shell, LISTEN)  # nothing held: the vendor waits for the learner


# How the actor does each of a step's asks (session/outputs.py), by its exact type; any other
# output is an event, for every connection.
RUN: dict[type[Any], Callable[[Shell, Any, Connection | None, float], None]] = {
    Answer: _answer,
    Acknowledge: _acknowledge,
    Think: _think,
    Abandon: _abandon,
    Listen: _listen,
    Hush: _hush,
    Resolve: _resolve,
    Summarize: _summarize,
    Replay: _replay,
    RunWaiting: _run_waiting,
    Answered: answered,
    Speculate: _speculate,
    DropSpeculation: _drop_speculation,
}
