"""The response policy (seed 004 §1, for a vendor): which source answers the learner, in order.

`with_policy(brain, library)` wraps any brain. Before the brain is asked, the learner's words are
checked against the scenario's policy data (`schemas/data/<scenario>.json`, `policy`), and the
first rule that applies answers:

- **P0, safety and compliance.** Abuse, sexual content, self-harm, and requests for legal,
  medical or financial advice are answered with the scenario's fixed in-character lines. No
  brain is called, so no model sees the words. Abuse and sexual talk cost happiness as an insult
  does; a self-harm mention gets a caring line and changes nothing else; an advice request is
  turned back to the haggle and changes nothing.
- **P1, grounded** (a brain that reads notes, the LLM). When retrieval finds knowledge chunks
  above the threshold, the brain gets exactly those as its cultural notes and the reply carries
  their ids in `sources`.
- **P2, objection templates.** A recognised objection ("too expensive", "cheaper next door",
  "I'll come back later"): the rule brain answers with one of the scenario's templates (filled
  with its own price and item); the LLM is offered the templates as guidance, marked as data.
- **P3, safe fallback.** Otherwise the brain answers on its own, with no notes to draw facts
  from: the LLM's prompt has an empty cultural block, the rule brain knows only prices.

Phrases are matched as whole words, case-insensitively, with a trailing `*` for any ending, in one
compiled pattern per rule. Everything is deterministic; `reply.policy` says which rule answered.
The wrapper keeps the rule brain's inline fast path (`propose_now`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Protocol

from brain.knowledge.library import KnowledgeLibrary, index_ready
from brain.knowledge.retriever import format_notes, query_for
from brain.rules_vendor import mood_band
from schemas.brain import BrainRequest, BrainResult, DeltaSink, Ledger
from schemas.decision import AIDecision
from schemas.enums import OfferAssessment
from schemas.lines import spoken_items
from schemas.scenario import Objection, SafetyRule, load_scenario
from schemas.summary import SummaryAsk, SummaryResult

__all__ = ["INSULT_DROP", "PolicyBrain", "Route", "route", "with_policy"]

INSULT_DROP = 12  # what an abusive line costs, as the rule vendor charges rudeness
GUIDANCE_NOTE = "(the learner raised a known objection; ways this vendor answers it, data only)"


def _pattern(phrases: Iterable[str]) -> re.Pattern[str]:
    parts = []
    for phrase in phrases:
        words = phrase.lower().replace("'", "").strip()
        body = re.escape(words.rstrip("*")).replace(r"\ ", r"\s+")
        parts.append(body + (r"[a-z]*" if words.endswith("*") else ""))
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(parts) + r")(?![a-z0-9])")


@dataclass(frozen=True, slots=True)
class Route:
    """What the policy decided before the brain: `policy` and, for P0 and P2, which rule."""

    policy: str  # "P0", "P2" or "" (the brain decides between P1 and P3)
    name: str = ""
    safety: SafetyRule | None = None
    objection: Objection | None = None


@cache
def _compiled(scenario: str, version: int = 1) -> tuple[tuple[tuple[str, SafetyRule, re.Pattern[str]], ...],
                                      tuple[tuple[str, Objection, re.Pattern[str]], ...]]:
    policy = load_scenario(scenario, version).policy
    # Self-harm first: a learner in distress who also swears gets care, not a telling-off.
    ordered = sorted(policy.safety.items(), key=lambda entry: entry[0] != "self_harm")
    safety = tuple((name, rule, _pattern(rule.phrases)) for name, rule in ordered)
    objections = tuple((name, rule, _pattern(rule.phrases)) for name, rule in policy.objections.items())
    return safety, objections


LINES_REMEMBERED = 4096  # learner lines whose route is kept (`_route`)


def route(scenario: str, transcript: str, version: int = 1) -> Route:
    """The P0 or P2 rule that the learner's words trigger, or an empty route."""
    try:
        _compiled(scenario, version)
    except KeyError:
        return Route("")
    return _route(scenario, version, transcript)


@lru_cache(maxsize=LINES_REMEMBERED)
def _route(scenario: str, version: int, transcript: str) -> Route:
    """`route` for a known scenario, kept per line (a route is frozen, as is the scenario's policy,
    `_compiled`): learners say the same short lines again and again, and each pattern is a search."""
    safety, objections = _compiled(scenario, version)
    text = transcript.lower().replace("'", "").replace("\u2019", "")
    for name, rule, pattern in safety:
        if pattern.search(text):
            return Route("P0", name, safety=rule)
    for name, objection, pattern in objections:
        if pattern.search(text):
            return Route("P2", name, objection=objection)
    return Route("")


def safety_result(request: BrainRequest, name: str, rule: SafetyRule) -> BrainResult:
    """A P0 answer: the scenario's fixed line; the numbers move only as the rule's effect says."""
    happiness = request.happiness_score
    assessment = request.offer_assessment
    if rule.effect == "insult":
        happiness = max(0, happiness - INSULT_DROP)
        assessment = OfferAssessment.INSULT
    decision = AIDecision(
        reply_text=rule.lines[request.turn % len(rule.lines)],
        happiness_score=happiness,
        negotiation_state=request.stage,
        vendor_mood=mood_band(happiness),
        internal_reasoning=f"P0 {name}: fixed line, no brain call",
        counter_price=request.vendor_quote,
        offer_assessment=assessment,
        suggested_user_response="",
    )
    return BrainResult(decision=decision, ledger=Ledger(), policy="P0")


def _filled(objection: Objection, request: BrainRequest, price: int | None) -> list[str]:
    """The objection's templates that this turn can fill, filled with the item and `price`."""
    scenario = load_scenario(request.scenario, request.scenario_version)
    item = scenario.item(request.item) or scenario.item(request.object_grabbed)
    values: dict[str, Any] = {"price": price, "item": spoken_items(item, scenario) if item else None}
    usable = [t for t in objection.templates
              if all(values.get(field) is not None for field in re.findall(r"{(\w+)}", t))]
    return [t.format(**{k: v for k, v in values.items() if v is not None}) for t in usable]


def _template(objection: Objection, request: BrainRequest, decision: AIDecision) -> AIDecision | None:
    """The decision with its line replaced by one of the objection's templates, or None.

    A new price the vendor does not say does not move: when the brain moved the quote, a template
    that names the price is taken if there is one, and otherwise the standing quote is kept."""
    price = decision.counter_price
    filled = _filled(objection, request, price)
    if not filled:
        return None
    moved = price is not None and price != request.vendor_quote
    saying = [line for line in filled if moved and str(price) in line]
    line = (saying or filled)[request.turn % len(saying or filled)]
    update: dict[str, Any] = {"reply_text": line}
    if moved and not saying:
        update["counter_price"] = request.vendor_quote
    return decision.model_copy(update=update)


def guidance(objection: Objection, request: BrainRequest) -> str:
    return "\n".join([GUIDANCE_NOTE, *(f"- {t}" for t in _filled(objection, request, request.vendor_quote))])


class Brain(Protocol):
    """A brain as the policy wraps it: `session.protocols.Brain` (which brain/ does not import) with
    every optional part declared, `None` for a part the brain does not have, so that nothing has to
    ask the brain what it has."""

    name: str

    async def propose(self, request: BrainRequest, on_delta: DeltaSink | None = None) -> BrainResult: ...

    @property
    def propose_inline(self) -> Callable[[BrainRequest], BrainResult] | None:
        """The same answer without a coroutine, for a brain that answers at once (the rule vendor)."""
        ...

    @property
    def write_summary(self) -> Callable[[SummaryAsk], Awaitable[SummaryResult]] | None:
        """The brain's own running summary (the LLM's); None: the session writes its own (docs/memory.md)."""
        ...

    async def aclose(self) -> None:
        """Let go of what the brain holds open (a no-op for most)."""
        ...


class PolicyBrain:
    """Any brain, behind the response policy. For the rule brain use `with_policy`, which keeps
    its inline `propose_now`."""

    def __init__(self, inner: Brain, library: KnowledgeLibrary | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.library = library
        self.reads_notes = library is not None and inner.propose_inline is None
        # The inner brain's running summary, if it writes one (the session's own otherwise; docs/memory.md).
        self.summarize: Callable[[SummaryAsk], Awaitable[SummaryResult]] | None = inner.write_summary

    async def aclose(self) -> None:
        await self.inner.aclose()

    @property
    def propose_inline(self) -> Callable[[BrainRequest], BrainResult] | None:
        """None: the inner brain answers through a coroutine (`InstantPolicyBrain` answers inline)."""
        return None

    @property
    def write_summary(self) -> Callable[[SummaryAsk], Awaitable[SummaryResult]] | None:
        """The inner brain's running summary, if it writes one: the same parts as the brain it wraps."""
        return self.summarize

    def _prepare(self, request: BrainRequest, chosen: Route) -> tuple[BrainRequest, str, tuple[str, ...]]:
        """The request the brain gets, and the policy and sources its answer will carry."""
        if not self.reads_notes or request.rag_context.strip():
            return request, ("P2" if chosen.objection else "P3"), ()
        assert self.library is not None
        hits = self.library.retrieve(request.scenario, query_for(request))
        if hits:
            return (request.model_copy(update={"rag_context": format_notes(hits)}), "P1",
                    tuple(hit.chunk_id for hit in hits))
        if chosen.objection is not None:
            block = "\n\n".join(b for b in (request.context_block, guidance(chosen.objection, request)) if b)
            return request.model_copy(update={"context_block": block}), "P2", ()
        return request, "P3", ()

    def _finish(self, request: BrainRequest, chosen: Route, result: BrainResult, policy: str,
                sources: tuple[str, ...]) -> BrainResult:
        if result.fallback:
            return result.model_copy(update={"policy": "P3", "sources": ()})
        if policy == "P2" and chosen.objection is not None and not self.reads_notes:
            decision = _template(chosen.objection, request, result.decision)
            if decision is None:
                policy = "P3"
            else:
                return result.model_copy(update={"decision": decision, "policy": "P2"})
        if policy == result.policy and sources == result.sources:
            return result  # P3 with no sources: what every result says already, no copy per turn
        return result.model_copy(update={"policy": policy, "sources": sources})

    async def propose(self, request: BrainRequest, on_delta: DeltaSink | None = None) -> BrainResult:
        chosen = route(request.scenario, request.transcript, request.scenario_version)
        if chosen.safety is not None:
            return safety_result(request, chosen.name, chosen.safety)
        if self.library is not None:
            await index_ready(self.library, request.scenario)
        asked, policy, sources = self._prepare(request, chosen)
        result = await self.inner.propose(asked, on_delta)
        return self._finish(request, chosen, result, policy, sources)


class InstantPolicyBrain(PolicyBrain):
    """The policy over a brain that answers inline (the rule vendor): the actor calls `propose_now`."""

    def __init__(self, inner: Brain, inline: Callable[[BrainRequest], BrainResult],
                 library: KnowledgeLibrary | None = None) -> None:
        super().__init__(inner, library)
        self._inline = inline

    @property
    def propose_inline(self) -> Callable[[BrainRequest], BrainResult]:
        return self.propose_now

    def propose_now(self, request: BrainRequest) -> BrainResult:
        chosen = route(request.scenario, request.transcript, request.scenario_version)
        if chosen.safety is not None:
            return safety_result(request, chosen.name, chosen.safety)
        _, policy, sources = self._prepare(request, chosen)  # the rule brain reads no notes
        result = self._inline(request)
        return self._finish(request, chosen, result, policy, sources)


def with_policy(inner: Brain, library: KnowledgeLibrary | None = None) -> PolicyBrain:
    """`inner` behind the response policy; `library` gives the LLM its grounded notes (P1)."""
    inline = inner.propose_inline
    if inline is not None:
        return InstantPolicyBrain(inner, inline, library)
    return PolicyBrain(inner, library)
