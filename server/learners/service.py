"""`Learners`: the learner profiles' side of one running server (docs/memory.md).

- When a session of a known learner ends, its figures are taken from the session (the report's
  score and discount, its hints and etiquette slips) by a registry listener, which only builds them
  and queues them: it runs inside the session actor and must not wait. One task of the server
  (`run`) records them in the store, after the mirror has stored the session, retrying for a while
  when the store is down. The queue is bounded; when it is full a session goes unrecorded, with a
  warning.
- When a session is created, `recall` reads the learner's profile (within `NEO4J_TIMEOUT_MS`; a
  store that does not answer in time leaves the session without memory, and it plays on), and
  `practice` their review items due at that scenario's stall (docs/learning.md).
- An ended session's figures carry its evidence (revealed hints, slips, unclear lines) and the
  judgement of each target it brought back; the store folds them into the learner's review items.
- `erase` ends and drops the learner's live sessions, lets the mirror write what it holds of
  them, and then has the store delete everything of the learner.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from schemas.enums import Level, OfferAssessment
from schemas.errors import CloseCode
from schemas.learner import LearnerProfile, LearnerRecall, SessionFigures, Slip
from schemas.review import Evidence, PracticeTarget
from server.learners.profile import recall
from server.learners.reviews import due
from server.learners.store import LearnerStore, LearnerStoreUnavailable
from session.actor import SessionActor
from session.core import START_HAPPINESS
from session.negotiation import Negotiation
from session.practice import judge, learner_lines
from session.protocols import TipSource
from session.registry import SessionRegistry
from session.report import ended_cards, ended_estimate, report_figures, total_score

if TYPE_CHECKING:
    from server.backends import MirrorBackend

__all__ = ["Learners", "session_figures"]

log = logging.getLogger("samvad.learners")

QUEUE = 1024  # ended sessions waiting to be recorded
REMEMBERED = 4096  # session ids already queued, so a session is queued once
RECORD_ATTEMPTS = 8
BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 5.0


def session_figures(negotiation: Negotiation, tips: TipSource | None = None) -> SessionFigures:
    """What an ended session of a known learner adds to their profile: the figures of its report,
    and its evidence for review items (with `tips`, the session's own, the grounded cards it earned)."""
    assert negotiation.outcome is not None and negotiation.learner_id
    price, etiquette, parts = report_figures(negotiation)  # not the whole report: cards, curve...
    slips: list[Slip] = []
    if etiquette.insults:
        slips.append("insult")
    if etiquette.taboo:
        slips.append("taboo")
    if etiquette.lowballs:
        slips.append("lowball")
    said_something = any(r.role == "user" for r in negotiation.history)
    if said_something and not etiquette.respectful_turns and negotiation.scenario.rules.respectful_address:
        slips.append("no_respect")
    cards = ended_cards(negotiation, tips)
    evidence = [*negotiation.coaching.evidence,
                *(Evidence(source="slip", key=slip, turn=_slip_turn(negotiation, slip)) for slip in slips),
                *(Evidence(source="card", key=card.card_id, turn=card.turn, text=card.title) for card in cards)]
    targets = negotiation.recall.practice if negotiation.recall is not None else ()
    practice = judge(targets, learner_lines(negotiation.history), negotiation.coaching.evidence,
                     {card.card_id: card.turn for card in cards})
    return SessionFigures(
        evidence=tuple(evidence), practice=practice,
        session_id=negotiation.session_id, learner_id=negotiation.learner_id, scenario=negotiation.scenario_name,
        level=negotiation.level, input_language=negotiation.input_language,
        target_language=negotiation.target_language, outcome=negotiation.outcome, item=negotiation.item,
        turns=negotiation.turn, first_quote=price.first_quote, paid=price.paid,
        discount_pct=price.discount_pct, score=total_score(parts),
        hints=negotiation.coaching.hints,
        slips=tuple(slips), created_at=negotiation.created_at, ended_at=negotiation.updated_at,
        fluency=negotiation.fluency, estimate=ended_estimate(negotiation),
    )


def _slip_turn(negotiation: Negotiation, slip: Slip) -> int:
    """The first learner turn that made the slip (an offer slip: by the server's label), else 0."""
    labels = {"insult": OfferAssessment.INSULT, "lowball": OfferAssessment.LOWBALL}
    label = labels.get(slip)
    return next((r.turn for r in negotiation.history if r.role == "user" and r.assessment is label), 0) \
        if label is not None else 0


class Learners:
    def __init__(self, store: LearnerStore, registry: SessionRegistry, mirror: MirrorBackend, *,
                 timeout_s: float = 2.0, invite: bool = True, due_ahead_s: float = 0.0) -> None:
        self.store = store
        self.invite = invite  # REVIEWS_INVITE: the vendor brings due review items back
        self.due_ahead_s = due_ahead_s  # REVIEWS_DUE_AHEAD_SECONDS
        self.registry = registry
        self.mirror = mirror
        self.timeout_s = timeout_s
        self._queued: OrderedDict[str, None] = OrderedDict()
        self._erased: dict[str, float] = {}  # learner -> when erased: sessions that ended before stay out
        self._send: MemoryObjectSendStream[SessionFigures] | None = None  # while `run` runs
        self.recorded = 0
        self.dropped = 0
        registry.listeners.append(self._on_change)

    # ------------------------------------------------------------------ ended sessions

    def _on_change(self, actor: SessionActor) -> None:
        # Called inside the session actor on every change: decide cheaply, build once, never wait.
        negotiation = actor.negotiation
        sid = negotiation.session_id
        if negotiation.outcome is None or not negotiation.learner_id or sid in self._queued:
            return
        self._queued[sid] = None
        if len(self._queued) > REMEMBERED:
            self._queued.popitem(last=False)
        try:
            if self._send is None:
                raise anyio.WouldBlock  # not running: nobody would record it
            self._send.send_nowait(session_figures(negotiation, actor.tips))
        except anyio.WouldBlock:
            self.dropped += 1
            log.warning("learner queue full: session not added to its learner's profile",
                        extra={"session_id": sid})
        except Exception:  # a bug here must not fail the session's own handler
            log.exception("could not take a learner's figures from a session", extra={"session_id": sid})

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Record ended sessions in the store, in the order they ended, until cancelled."""
        send, receive = anyio.create_memory_object_stream[SessionFigures](QUEUE)
        self._send = send
        try:
            async with send, receive:
                task_status.started()
                async for figures in receive:
                    await self._record(figures)
        finally:
            self._send = None

    async def _record(self, figures: SessionFigures) -> None:
        for attempt in range(RECORD_ATTEMPTS):
            if figures.ended_at <= self._erased.get(figures.learner_id, -1.0):
                return  # the learner was erased after this session ended
            try:
                await self.mirror.flushed(figures.session_id, self.timeout_s * 2)
                await self.store.record(figures)
                self.recorded += 1
                return
            except LearnerStoreUnavailable as exc:
                log.info("learner profile not updated yet, retrying",
                         extra={"session_id": figures.session_id, "error": str(exc)[:200]})
                await anyio.sleep(min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))
        self.dropped += 1
        log.warning("learner profile not updated: the store did not answer",
                    extra={"session_id": figures.session_id})

    # ------------------------------------------------------------------ new sessions

    async def profile(self, learner_id: str) -> LearnerProfile | None:
        """The learner's profile, or None when unknown or when the store does not answer in time."""
        if self.store.immediate:
            return await self.store.get(learner_id)  # no I/O: no time limit to keep
        try:
            with anyio.fail_after(self.timeout_s):
                return await self.store.get(learner_id)
        except (LearnerStoreUnavailable, TimeoutError) as exc:
            log.warning("learner profile unavailable: the session starts without memory",
                        extra={"error": str(exc)[:200]})
            return None

    def recall(self, profile: LearnerProfile | None, scenario: str, version: int = 1,
               practice: tuple[PracticeTarget, ...] = ()) -> LearnerRecall | None:
        """What the vendor remembers of the learner, with their due review items at this stall."""
        remembered = recall(profile, scenario, START_HAPPINESS, version)
        if remembered is None:
            return None
        return remembered.model_copy(update={"practice": practice, "invite": self.invite})

    async def practice(self, learner_id: str, scenario: str) -> tuple[PracticeTarget, ...]:
        """The learner's review items of `scenario` due now, as targets; none when the store does
        not answer in time (the session plays on without them)."""
        at = self.registry.clock() + self.due_ahead_s
        try:
            if self.store.immediate:
                items = await self.store.due_items(learner_id, scenario, at)  # no I/O: no time limit to keep
            else:
                with anyio.fail_after(self.timeout_s):
                    items = await self.store.due_items(learner_id, scenario, at)
        except (LearnerStoreUnavailable, TimeoutError) as exc:
            log.warning("review items unavailable: the session starts without them",
                        extra={"error": str(exc)[:200]})
            return ()
        return tuple(item.target() for item in due(items, scenario, at))

    @staticmethod
    def default_level(profile: LearnerProfile | None) -> Level:
        """A new session's level when the client gives none: the profile's confirmed one."""
        return profile.level if profile is not None else Level.INTERMEDIATE

    # ------------------------------------------------------------------ privacy

    async def erase(self, learner_id: str) -> bool:
        """Erase the learner: their live sessions end and go, then the store deletes the rest."""
        live = self.registry.of_learner(learner_id)  # ended sessions kept as records too
        self._erased[learner_id] = self.registry.clock()
        for sid in live:
            self.registry.remove(sid, CloseCode.EVICTED, "the learner's data was erased")
        for sid in live:
            await self.mirror.flushed(sid, self.timeout_s * 2)
        found = await self.store.erase(learner_id)
        log.info("learner erased", extra={"sessions": len(live)})
        return found or bool(live)

    def statistics(self) -> dict[str, Any]:
        stats: dict[str, Any] = {"store": self.store.name, "durable": self.store.durable,
                                 "recorded": self.recorded, "dropped": self.dropped}
        if not self.store.durable:
            stats["note"] = "no durable store: learner profiles live in memory until the process ends"
        stats.update({k: v for k, v in self.store.statistics().items() if k not in stats})
        return stats

    async def aclose(self) -> None:
        await self.store.aclose()
