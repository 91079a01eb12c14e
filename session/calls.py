"""The actor's calls that take time: the brain's answer to a turn, and the running summary.

The machine asks for them (`Think`, `Summarize`: session/outputs.py); the actor runs them here and
nothing here touches the session: each call's result comes back through the actor's inbox
(`BrainDone`, `SummaryDone`), and a streaming brain's words as `Delta`, `Decided` and `Withdraw`
through the turn's sink (`TurnSink`).

A brain that answers at once (`propose_inline`, the rules vendor) is called in place, in
microseconds, with no task and no round trip through the inbox. Any other runs in a child task
of the actor's task group, in a cancel scope of its own (so that `stop` cancels it, not the
registry's task group) and under `limits.brain_deadline_s`. A failure or the deadline becomes the
fallback decision (`FALLBACK_LINE`, and nothing else changes). A summary call runs the same way
under the same deadline; a failed one comes back as a result with its error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping

import anyio
from anyio.abc import TaskGroup

from schemas.brain import BrainRequest, BrainResult, Ledger
from schemas.summary import SummaryAsk, SummaryResult
from session.messages import BrainDone, Decided, Delta, Message, SummaryDone, Withdraw
from session.negotiation import fallback_decision
from session.protocols import Brain
from session.records import PendingTurn

__all__ = ["FALLBACK_LINE", "BrainCalls", "TurnSink"]

log = logging.getLogger("samvad.session")

FALLBACK_LINE = "Ek minute, bhaiya, let me just serve this lady... yes, what were you saying?"


class TurnSink:
    """The `DeltaSink` a brain gets for one turn: posts into the actor's inbox."""

    __slots__ = ("_post", "_turn")

    def __init__(self, post: Callable[[Message], None], turn: int) -> None:
        self._post = post
        self._turn = turn

    async def delta(self, text: str) -> None:
        if text:
            self._post(Delta(self._turn, text))

    async def withdraw(self, reason: str) -> None:
        self._post(Withdraw(self._turn, reason))

    async def end(self) -> None:
        self._post(Delta(self._turn, "", end=True))

    async def decided(self, head: Mapping[str, object]) -> None:
        self._post(Decided(self._turn, dict(head)))


class BrainCalls:
    """One session's calls to its brain. Each call's results are posted with the `post` it is given
    (the actor's), which is not kept: no cycle between the actor and this part."""

    __slots__ = ("_propose_now", "_scope", "_summarize", "brain", "deadline_s", "session_id", "tg")

    def __init__(self, brain: Brain, deadline_s: float, session_id: str) -> None:
        self.brain = brain
        self.deadline_s = deadline_s
        self.session_id = session_id
        self.tg: TaskGroup | None = None  # where calls run, while a dispatcher drives the actor
        self._propose_now = brain.propose_inline  # None: the brain needs a task
        self._summarize = brain.write_summary  # None: the server writes the summary itself
        self._scope: anyio.CancelScope | None = None  # the brain call in flight, if any

    @property
    def writes_summaries(self) -> bool:
        return self._summarize is not None

    def think(self, pending: PendingTurn, request: BrainRequest, post: Callable[[Message], None]) -> BrainDone | None:
        """Ask the brain about `pending`: its answer at once from a brain that answers at once, else
        None and the answer is posted later."""
        if self._propose_now is not None:
            started = time.perf_counter()
            try:
                result = self._propose_now(request)
            except Exception as exc:
                result = self._fallback(request, started, f"{type(exc).__name__}: {exc}")
            return BrainDone(pending, result, started, time.perf_counter())
        assert self.tg is not None
        self.tg.start_soon(self._think, pending, request, post)
        return None

    def abandon(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def _fallback(self, request: BrainRequest, started: float, error: str) -> BrainResult:
        log.error("brain failed: %s", error, extra={"session_id": self.session_id, "turn": request.turn})
        return BrainResult(
            decision=fallback_decision(request.stage, request.happiness_score, FALLBACK_LINE),
            fallback=True,
            error=error,
            ledger=Ledger(brain_ms=(time.perf_counter() - started) * 1000),
        )

    async def _think(self, pending: PendingTurn, request: BrainRequest, post: Callable[[Message], None]) -> None:
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                started = time.perf_counter()
                result: BrainResult | None = None
                with anyio.move_on_after(self.deadline_s):
                    try:
                        result = await self.brain.propose(request, TurnSink(post, pending.turn))
                    except Exception as exc:  # the brain's own failures were translated; a last guard
                        result = self._fallback(request, started, f"{type(exc).__name__}: {exc}")
                if result is None:
                    result = self._fallback(request, started, "brain deadline exceeded")
                post(BrainDone(pending, result, started, time.perf_counter()))
            finally:
                if self._scope is scope:
                    self._scope = None

    def summarize(self, token: int, ask: SummaryAsk, post: Callable[[Message], None]) -> None:
        """Ask the brain for the running summary in the background (never waited for)."""
        if self._summarize is None or self.tg is None:
            post(SummaryDone(token, ask.turn, SummaryResult(text=ask.facts)))
            return
        self.tg.start_soon(self._write_summary, self._summarize, token, ask, post)

    async def _write_summary(self, summarize: Callable[[SummaryAsk], Awaitable[SummaryResult]], token: int,
                             ask: SummaryAsk, post: Callable[[Message], None]) -> None:
        result: SummaryResult | None = None
        with anyio.move_on_after(self.deadline_s):
            try:
                result = await summarize(ask)
            except Exception as exc:  # the brain's own failures come back as a result; a last guard
                result = SummaryResult(error=f"{type(exc).__name__}: {exc}")
        post(SummaryDone(token, ask.turn, result or SummaryResult(error="summary deadline exceeded")))
