"""The running summary, as the session machine decides it: started after a reply, never waited for
(docs/memory.md).

After each answered turn `remember` asks the negotiation's `Memory` (session/summary.py) whether a
refresh is due (every 10 turns). If it is, the ask is built there and then from the summary so far,
the last 20 lines and the server's own facts, and:

- with a brain that writes summaries (the LLM brain: one extra model call), the machine asks the
  actor to call it in the background (`Summarize`); its result comes back as `SummaryDone`. The
  turn path does not wait for it: the reply is already out, and a transcript that arrives
  meanwhile is a turn like any other;
- otherwise (the rule brain) the facts are the summary, applied at once.

`on_summary_done` keeps the new summary unless an undo made it stale, records a `SummaryWritten`
change for the mirror (the Session node's `summary`, server/mirror/memory.py) and keeps the call's
cost, which the next reply reports in its ledger (`summary_calls`, and the call's tokens in the
counts; `with_summary_cost`). A failed call keeps the summary before it and is logged; the session
carries on.
"""

from __future__ import annotations

import logging

from schemas.brain import BrainResult, Ledger
from schemas.summary import SummaryAsk, SummaryResult
from session.changes import SummaryWritten
from session.machine_state import MachineState
from session.messages import SummaryDone
from session.negotiation import Negotiation
from session.outputs import Output, Summarize
from session.summary import SUMMARY_LINES, facts

__all__ = ["on_summary_done", "remember", "summary_undone", "with_summary_cost"]

log = logging.getLogger("samvad.session")


def remember(m: MachineState, now: float, out: list[Output]) -> None:
    """After a reply is out: start a refresh of the running summary if one is due. Never waits."""
    negotiation = m.negotiation
    memory = negotiation.memory
    if negotiation.is_terminal or negotiation.pending is not None or not memory.due(negotiation.turn):
        return
    token = memory.start(negotiation.turn)
    ask = SummaryAsk(
        session_id=negotiation.session_id, scenario=negotiation.scenario_name, turn=negotiation.turn,
        previous=memory.summary, lines=tuple(h.as_line() for h in negotiation.history[-SUMMARY_LINES:]),
        facts=facts(negotiation.history, negotiation.stage, negotiation.stage_changes, negotiation.coaching,
                    vendor=negotiation.scenario.vendor.name),
    )
    if m.writes_summaries:
        out.append(Summarize(token, ask))
        return
    on_summary_done(m, SummaryDone(token, ask.turn, SummaryResult(text=ask.facts)), now, out)


def on_summary_done(m: MachineState, message: SummaryDone, now: float, out: list[Output]) -> None:
    negotiation = m.negotiation
    memory = negotiation.memory
    result = message.result
    if result.ledger.llm_calls:
        memory.charged(result.ledger.model_copy(update={"summary_calls": 1}))
    if result.error is not None:
        log.warning("running summary failed, keeping the one before: %s", result.error,
                    extra={"session_id": negotiation.session_id, "turn": message.turn})
    text = memory.accept(message.token, result.text)
    if text is not None:
        _record(negotiation, now, text, message.turn, memory.summary, memory.covers)


def summary_undone(negotiation: Negotiation, now: float, covered: int) -> None:
    """After an undo: if it took the summary back (it covered `covered`), record the one it went back to."""
    memory = negotiation.memory
    if memory.covers != covered:
        _record(negotiation, now, memory.summary, memory.covers, memory.previous, memory.previous_covers)


def _record(negotiation: Negotiation, now: float, text: str, covers: int, previous: str, previous_covers: int) -> None:
    negotiation.commit(SummaryWritten(*negotiation.stamp(now), text=text, turn=covers, previous=previous,
                                      previous_turn=previous_covers))


def with_summary_cost(negotiation: Negotiation, result: BrainResult) -> BrainResult:
    """`result` with the cost of the summary calls made since the last reply added to its ledger."""
    memory = negotiation.memory
    charge, memory.charge = memory.charge, None
    if charge is None:
        return result
    ledger = result.ledger
    return result.model_copy(update={"ledger": Ledger(**{
        **ledger.__dict__,
        "llm_calls": ledger.llm_calls + charge.llm_calls, "retries": ledger.retries + charge.retries,
        "prompt_tokens": ledger.prompt_tokens + charge.prompt_tokens,
        "completion_tokens": ledger.completion_tokens + charge.completion_tokens,
        "summary_calls": ledger.summary_calls + charge.summary_calls,
    })})
