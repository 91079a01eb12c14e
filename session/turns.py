"""The turn, as the session machine decides it: from a learner's final transcript to the vendor's reply.

One turn is in flight at a time (`SessionMachine.thinking`). Its path, each step an input of the
machine (session/machine.py) and its outputs for the actor (session/outputs.py):

1. `on_transcript`: a final transcript (a partial one only keeps the silence timer long: the learner
   is mid-sentence). After the end the vendor answers with a closing line; a transcript less
   confident than `limits.clarify_below` gets the vendor's request to say it again. Neither is a
   turn, and neither calls the brain.
2. Otherwise `Negotiation.begin_turn` judges the learner's offer, the turn is recorded
   (`LearnerTurnTaken`, acknowledged once durable), and the machine asks for a brain call
   (`Think`). The actor runs it (session/calls.py) and posts its answer back.
3. A streaming brain's words come back as `Delta`s, and the decision's numbers as `Decided`. They
   pass the turn's `ReplyGate` (session/spoken.py): a clause goes out as `reply.delta` once it is
   whole and speakable, and one that names a number waits until the engine has ruled on the
   numbers (`Negotiation.price_rule`), so no price the engine rejects is ever streamed. `Withdraw`
   takes back what went out; `reply.withdrawn` says so.
4. `on_brain_done`: an answer for a turn no longer in flight is dropped.
   `Negotiation.complete_turn` validates the proposal against the rules and judges its words:
   through the turn's gate, whose last held words go out as the final delta, or afresh (what
   streamed is then withdrawn). `Answered` comes first: the actor gives the reply its `timings`
   (measurements, not decisions), logs the turn and tells whoever waits for the frame's reply.
   Its events follow, with the turn's tips and, at the end, the report; the running summary is
   refreshed if due, and the frames held behind the turn are applied (`RunWaiting`), or the vendor
   listens again.
"""

from __future__ import annotations

from pydantic import ValidationError

from schemas.decision import DecisionHead
from schemas.frames import Reply, ReplyDelta, ReplyWithdrawn, TranscriptFrame
from session.machine_state import MachineState
from session.memory import remember, with_summary_cost
from session.messages import BrainDone, Decided, Delta, Frame, Withdraw
from session.outputs import Acknowledge, Answered, DropSpeculation, Listen, Output, Resolve, RunWaiting, Think
from session.report import report_event
from session.spoken import ReplyGate
from session.tips import tips_event
from session.unclear import clarify_reply, is_unclear
from session.wording import reply_gate

__all__ = ["on_brain_done", "on_decided", "on_delta", "on_transcript", "on_withdraw"]

LISTEN = Listen()
MID_SENTENCE = Listen(extended=True, if_running=True)
RUN_WAITING = RunWaiting()
DROP_SPECULATION = DropSpeculation()  # no brain call follows: a speculative one is not wanted (session/speculation.py)


def on_transcript(m: MachineState, message: Frame, now: float, out: list[Output]) -> None:
    frame = message.frame
    assert isinstance(frame, TranscriptFrame)
    if not frame.final:
        if m.thinking is None:
            out.append(MID_SENTENCE)
        return  # partial speech never changes state
    negotiation = m.negotiation
    text = frame.text.strip()
    if negotiation.is_terminal:
        assert frame.id is not None
        _without_a_turn(frame, negotiation.closing_reply(frame.id, now, text), out)
        return
    if is_unclear(frame.confidence, m.limits.clarify_below):
        assert frame.id is not None
        _without_a_turn(frame, clarify_reply(negotiation, frame.id, text, now, frame.confidence), out)
        return
    pending = negotiation.begin_turn(text, frame.id, now)
    if frame.id is not None:
        out.append(Acknowledge(frame.id))
    extra = message.extra
    request = negotiation.brain_request(pending, rag_context=extra.get("rag_context", ""),
                                        context_block=extra.get("context_block", ""))
    m.start_thinking(pending)
    out.append(Think(pending, request))


def _without_a_turn(frame: TranscriptFrame, reply: Reply, out: list[Output]) -> None:
    """A reply that is not a turn (a closing or a clarify reply): acknowledged, sent, and the vendor listens."""
    assert frame.id is not None
    out += (Acknowledge(frame.id), reply, Resolve(frame.id, reply), LISTEN, DROP_SPECULATION)


def on_delta(m: MachineState, message: Delta, now: float, out: list[Output]) -> None:
    if m.thinking is None or message.turn != m.thinking.turn:
        return
    gate = _turn_gate(m)
    said = gate.feed(message.text) if message.text else ""
    if message.end:
        said += gate.finish()
    _say_released(m, message.turn, said, gate, out)


def on_decided(m: MachineState, message: Decided, now: float, out: list[Output]) -> None:
    pending = m.thinking
    if pending is None or message.turn != pending.turn:
        return
    try:
        head = DecisionHead.model_validate(message.head)
    except ValidationError:
        return  # numbers no decision may have: the words wait for the whole, validated answer
    gate = _turn_gate(m)
    if gate.rule is None:
        _say_released(m, message.turn, gate.decide(m.negotiation.price_rule(pending, head)), gate, out)


def on_withdraw(m: MachineState, message: Withdraw, now: float, out: list[Output]) -> None:
    if m.thinking is None or message.turn != m.thinking.turn:
        return
    m.gate = None  # the brain's next attempt writes its words and numbers afresh
    if m.streamed:
        _withdraw(m, message.turn, message.reason, out)


def _turn_gate(m: MachineState) -> ReplyGate:
    """The gate of the brain's current attempt at the turn in flight, made at its first words."""
    if m.gate is None:
        negotiation = m.negotiation
        m.gate = reply_gate(negotiation.scenario_name, negotiation.level_params.max_sentences)
    return m.gate


def _say_released(m: MachineState, turn: int, text: str, gate: ReplyGate, out: list[Output]) -> None:
    """Send the words the gate let out, and say when the last of them has gone."""
    end = gate.done and bool(m.streamed or text) and not m.delta_ended
    if not text and not end:
        return
    m.streamed.append(text)
    m.delta_ended = end
    out.append(ReplyDelta(session_id=m.negotiation.session_id, turn=turn, text=text, end=end))


def _withdraw(m: MachineState, turn: int, reason: str, out: list[Output]) -> None:
    out.append(ReplyWithdrawn(session_id=m.negotiation.session_id, turn=turn, reason=reason))
    m.streamed = []
    m.delta_ended = False
    m.withdrawn = True


def on_brain_done(m: MachineState, done: BrainDone, now: float, out: list[Output]) -> None:
    pending = done.pending
    if m.thinking is not pending:
        return  # abandoned (`stop`), or a turn already answered
    negotiation = m.negotiation
    result = with_summary_cost(negotiation, done.result)  # a running summary's call is reported here
    gate = m.gate if m.streamed else None
    outcome = negotiation.complete_turn(pending, result, now, withdrawn_stream=m.withdrawn, gate=gate,
                                        tips=m.tips is not None, report=True)
    reply = outcome.events[0]
    assert isinstance(reply, Reply)
    out.append(Answered(reply, outcome, result, done, pending.client_id))  # timed, logged, its waiters told
    if m.streamed:
        if outcome.gated:
            assert gate is not None
            _say_released(m, pending.turn, outcome.tail, gate, out)  # the last words, before the reply
        else:
            _withdraw(m, pending.turn, "fallback" if result.fallback else "the final reply differs", out)
    out += outcome.events
    if m.tips is not None and outcome.tips_seq is not None:
        out.append(tips_event(m.tips, negotiation, pending, outcome.tips_seq))
    if outcome.report_seq is not None:
        out.append(report_event(negotiation, m.tips, outcome.report_seq))
    m.stop_thinking()
    remember(m, now, out)  # the running summary, if due: in the background, never waited for
    out.append(RUN_WAITING)  # the frames held behind this turn, or the vendor listens again

