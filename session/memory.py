"""The running summary, a part of the session actor: started after a reply, never waited for (docs/memory.md).

After each answered turn `_remember` asks the negotiation's `Memory` (session/summary.py) whether a
refresh is due (every 10 turns). If it is, the ask is built there and then, on the actor, from the
summary so far, the last 20 lines and the server's own facts, and:

- with a brain that writes summaries (`summarize`, the LLM brain: one extra model call), the call runs
  in a child task of the actor's task group under the brain's deadline, and its result comes back
  through the inbox as `SummaryDone`. The turn path does not wait for it: the reply is already out,
  and a transcript that arrives meanwhile is a turn like any other;
- otherwise (the rule brain) the facts are the summary, applied at once (microseconds, after the reply).

`_on_summary_done` keeps the new summary unless an undo made it stale, records a `summary` change for
the mirror (the Session node's `summary`, server/mirror/memory.py) and keeps the call's cost, which the
next reply reports in its ledger (`summary_calls`, and the call's tokens in the counts). A failed call
keeps the summary before it and is logged; the session carries on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from schemas.brain import BrainResult, Ledger
from schemas.summary import SummaryAsk, SummaryResult
from session.changes import SummaryWritten
from session.fanout import ActorFanout
from session.messages import Handler, Message, SummaryDone
from session.summary import SUMMARY_LINES, facts

__all__ = ["MESSAGE_HANDLERS", "ActorMemory"]

log = logging.getLogger("samvad.session")


class ActorMemory(ActorFanout):
    """The running summary: the part of `SessionActor` that refreshes it and reports its cost."""

    _summarize: Callable[[SummaryAsk], Awaitable[SummaryResult]] | None  # the brain's, if it writes summaries
    _tg: TaskGroup | None  # where its calls run
    _post: Callable[[Message], None]  # the actor's: post into its own inbox (or apply at once)

    def _remember(self) -> None:
        """After a reply is out: start a refresh of the running summary if one is due. Never waits."""
        negotiation = self.negotiation
        memory = negotiation.memory
        if negotiation.is_terminal or negotiation.pending is not None or not memory.due(negotiation.turn):
            return
        token = memory.start(negotiation.turn)
        ask = SummaryAsk(
            session_id=self.session_id, scenario=negotiation.scenario_name, turn=negotiation.turn,
            previous=memory.summary, lines=tuple(h.as_line() for h in negotiation.history[-SUMMARY_LINES:]),
            facts=facts(negotiation.history, negotiation.stage, negotiation.stage_changes, negotiation.coaching,
                        vendor=negotiation.scenario.vendor.name),
        )
        if self._summarize is None or self._tg is None:
            self._on_summary_done(SummaryDone(token, ask.turn, SummaryResult(text=ask.facts)))
            return
        self._tg.start_soon(self._write_summary, self._summarize, token, ask)

    async def _write_summary(self, summarize: Callable[[SummaryAsk], Awaitable[SummaryResult]], token: int,
                             ask: SummaryAsk) -> None:
        result: SummaryResult | None = None
        with anyio.move_on_after(self.limits.brain_deadline_s):
            try:
                result = await summarize(ask)
            except Exception as exc:  # the brain's own failures come back as a result; a last guard
                result = SummaryResult(error=f"{type(exc).__name__}: {exc}")
        self._post(SummaryDone(token, ask.turn, result or SummaryResult(error="summary deadline exceeded")))

    def _on_summary_done(self, message: SummaryDone) -> None:
        memory = self.negotiation.memory
        result = message.result
        if result.ledger.llm_calls:
            memory.charged(result.ledger.model_copy(update={"summary_calls": 1}))
        if result.error is not None:
            log.warning("running summary failed, keeping the one before: %s", result.error,
                        extra={"session_id": self.session_id, "turn": message.turn})
        text = memory.accept(message.token, result.text)
        if text is not None:
            self._record_summary(text, message.turn, memory.summary, memory.covers)
            self._store()

    def _summary_undone(self, covered: int) -> None:
        """After an undo: if it took the summary back (it covered `covered`), store the one it went back to."""
        memory = self.negotiation.memory
        if memory.covers != covered:
            self._record_summary(memory.summary, memory.covers, memory.previous, memory.previous_covers)

    def _record_summary(self, text: str, covers: int, previous: str, previous_covers: int) -> None:
        negotiation = self.negotiation
        negotiation.commit(SummaryWritten(*negotiation.stamp(self.clock()), text=text, turn=covers,
                                          previous=previous, previous_turn=previous_covers))

    def _with_summary_cost(self, result: BrainResult) -> BrainResult:
        """`result` with the cost of the summary calls made since the last reply added to its ledger."""
        memory = self.negotiation.memory
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


# This part's entry in the actor's dispatch table (`session/actor.py`).
MESSAGE_HANDLERS: dict[type[Message], Handler] = {
    SummaryDone: ActorMemory._on_summary_done,
}
