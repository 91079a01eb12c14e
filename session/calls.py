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

A speculative call (`speculate`, session/speculation.py) runs the same way, ahead of its turn, with
a sink that keeps what the brain streams (`Ahead`) instead of posting it. The turn's `think` takes
it when it asks the same (`same_request`): what was kept is posted then, with the turn's own
`pending`, and what follows is posted as it comes. Otherwise it is cancelled, and nothing of it was
ever posted: no words, no `BrainDone`, no turn answered. One speculation at a time: a new one, a
turn, `drop_speculation` or `abandon` cancels the one before; a failed one is never taken.

The words a speculative call streams before it is taken are shown to `preview` (the player's voice,
when the server sets one), so that its first clause can be synthesized while the end-of-turn wait
runs; a cancelled call is forgotten there. The preview sends nothing: what reaches the learner is
still the taken call's words, through the session's gate, as they are posted.
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
from session.protocols import Brain, SpeechPreview
from session.records import PendingTurn
from session.speculation import same_request

__all__ = ["FALLBACK_LINE", "Ahead", "BrainCalls", "TurnSink"]

log = logging.getLogger("samvad.session")

FALLBACK_LINE = "Ek minute, bhaiya, let me just serve this lady... yes, what were you saying?"


class TurnSink:
    """The `DeltaSink` a brain gets for one turn: posts into the actor's inbox."""

    __slots__ = ("_post", "_turn", "spoken")

    def __init__(self, post: Callable[[Message], None], turn: int, *, spoken: bool = False) -> None:
        self._post = post
        self._turn = turn
        self.spoken = spoken  # the player's voice speaks the reply (`BrainCalls.preview` is set)

    async def delta(self, text: str) -> None:
        if text:
            self._post(Delta(self._turn, text))

    async def withdraw(self, reason: str) -> None:
        self._post(Withdraw(self._turn, reason))

    async def end(self) -> None:
        self._post(Delta(self._turn, "", end=True))

    async def decided(self, head: Mapping[str, object]) -> None:
        self._post(Decided(self._turn, dict(head)))


class Ahead:
    """A speculative call (session/speculation.py) and the `DeltaSink` it streams into: kept until the
    turn takes it (`take`), then posted as it comes. Never posted if it is not taken."""

    __slots__ = ("_kept", "_post", "_words", "done", "failed", "preview", "request", "result", "scope", "started",
                 "taken", "utterance_id")

    def __init__(self, utterance_id: str, request: BrainRequest, preview: SpeechPreview | None = None) -> None:
        self.utterance_id = utterance_id
        self.request = request
        self.preview = preview  # shown the words while not taken
        self._words = ""  # what was streamed while not taken
        self.scope = anyio.CancelScope()
        self.started = time.perf_counter()
        self.result: BrainResult | None = None
        self.done = 0.0  # perf_counter when it answered
        self.failed = False  # the brain failed or ran out of time: the turn asks again
        self._kept: list[Message] = []
        self._post: Callable[[Message], None] | None = None  # the actor's, once taken
        self.taken: PendingTurn | None = None  # the turn that took it

    def _emit(self, message: Message) -> None:
        if self._post is None:
            self._kept.append(message)
        else:
            self._post(message)

    @property
    def spoken(self) -> bool:
        """The player's voice will speak the words once the call is taken (`DeltaSink.spoken`)."""
        return self.preview is not None

    async def delta(self, text: str) -> None:
        if text:
            self._emit(Delta(self.request.turn, text))
            if self._post is None and self.preview is not None:
                self._words += text
                self.preview.prepare(self.request.turn, self._words)

    async def withdraw(self, reason: str) -> None:
        self._emit(Withdraw(self.request.turn, reason))
        if self._post is None:
            self.forget()  # the words streamed so far are not the answer's

    def forget(self) -> None:
        """Not taken (cancelled, or its words withdrawn): the preview lets its words go."""
        self._words = ""
        if self.preview is not None:
            self.preview.forget(self.request.turn)

    async def end(self) -> None:
        self._emit(Delta(self.request.turn, "", end=True))

    async def decided(self, head: Mapping[str, object]) -> None:
        self._emit(Decided(self.request.turn, dict(head)))

    def answered(self, result: BrainResult) -> None:
        self.result, self.done = result, time.perf_counter()
        if self.taken is not None and self._post is not None:
            self._post(BrainDone(self.taken, result, self.started, self.done))

    def take(self, pending: PendingTurn, post: Callable[[Message], None]) -> None:
        """The turn `pending` takes this call: what it kept, then its answer, go to `post`."""
        self.taken, self._post = pending, post
        kept, self._kept = self._kept, []
        for message in kept:
            post(message)
        if self.result is not None:
            post(BrainDone(pending, self.result, self.started, self.done))


class BrainCalls:
    """One session's calls to its brain. Each call's results are posted with the `post` it is given
    (the actor's), which is not kept: no cycle between the actor and this part."""

    __slots__ = ("_ahead", "_counts", "_propose_now", "_scope", "_summarize", "brain", "deadline_s", "preview",
                 "session_id", "tg")

    def __init__(self, brain: Brain, deadline_s: float, session_id: str) -> None:
        self.brain = brain
        self.deadline_s = deadline_s
        self.session_id = session_id
        self.tg: TaskGroup | None = None  # where calls run, while a dispatcher drives the actor
        self._propose_now = brain.propose_inline  # None: the brain needs a task
        self._summarize = brain.write_summary  # None: the server writes the summary itself
        self._scope: anyio.CancelScope | None = None  # the brain call in flight, if any
        self._ahead: Ahead | None = None  # the speculative call, if any (session/speculation.py)
        self._counts = {"speculated": 0, "taken": 0, "cancelled": 0}  # speculative calls
        self.preview: SpeechPreview | None = None  # set by the server: the player's voice, if it speaks

    def statistics(self) -> dict[str, int]:
        """Speculative calls made, taken by their turn, and cancelled, over the session."""
        return dict(self._counts)

    @property
    def speculates(self) -> bool:
        """Whether asking ahead can help: the brain needs a call (one that answers at once does not)."""
        return self._propose_now is None

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
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            if not ahead.failed and same_request(ahead.request, request):
                self._counts["taken"] += 1
                log.debug("speculative call taken", extra={"session_id": self.session_id, "turn": pending.turn})
                if ahead.result is None:
                    self._scope = ahead.scope  # the turn's call now: `abandon` cancels it
                ahead.take(pending, post)
                return None
            self._cancel(ahead)
        self.tg.start_soon(self._think, pending, request, post)
        return None

    def speculate(self, utterance_id: str, request: BrainRequest) -> None:
        """Ask the brain about a turn not yet taken (session/speculation.py); it replaces any earlier one."""
        self.drop_speculation()
        if self.tg is None or self._propose_now is not None:
            return
        ahead = self._ahead = Ahead(utterance_id, request, self.preview)
        self._counts["speculated"] += 1
        self.tg.start_soon(self._speculate, ahead)

    def drop_speculation(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self._cancel(ahead)

    def _cancel(self, ahead: Ahead) -> None:
        ahead.scope.cancel()
        ahead.forget()
        self._counts["cancelled"] += 1
        log.debug("speculative call cancelled", extra={"session_id": self.session_id, "turn": ahead.request.turn})

    def abandon(self) -> None:
        self.drop_speculation()
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
                        result = await self.brain.propose(request, TurnSink(post, pending.turn,
                                                                            spoken=self.preview is not None))
                    except Exception as exc:  # the brain's own failures were translated; a last guard
                        result = self._fallback(request, started, f"{type(exc).__name__}: {exc}")
                if result is None:
                    result = self._fallback(request, started, "brain deadline exceeded")
                post(BrainDone(pending, result, started, time.perf_counter()))
            finally:
                if self._scope is scope:
                    self._scope = None

    async def _speculate(self, ahead: Ahead) -> None:
        with ahead.scope:
            result: BrainResult | None = None
            error = "brain deadline exceeded"
            with anyio.move_on_after(self.deadline_s):
                try:
                    result = await self.brain.propose(ahead.request, ahead)
                except Exception as exc:  # the brain's own failures were translated; a last guard
                    error = f"{type(exc).__name__}: {exc}"
            if (result is None or result.fallback) and ahead.taken is None:
                ahead.failed = True  # not taken yet: the turn asks the brain itself, and logs what fails then
                ahead.forget()
                log.debug("speculative call failed: %s", error if result is None else result.error,
                          extra={"session_id": self.session_id, "turn": ahead.request.turn})
                return
            ahead.answered(result or self._fallback(ahead.request, ahead.started, error))
        if self._scope is ahead.scope:
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
