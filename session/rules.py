"""The negotiation rules engine. Every stage rule and every happiness rule lives in this file.

The AI proposes; this module disposes. `validate` takes the authoritative state and a proposal from
any brain and returns what may stand, with a record of each override. Nothing here awaits, reads
a clock or draws a random number, so every rule is tested by feeding inputs and reading outputs.

Rules, in the order they are applied (seed 000, plus what the original left undone):

1. Offer consistency. The server judges the learner's offer itself (`session.offers`); the
   brain's own label counts only when the server found no number. When the server read a number
   but is unsure what offer it is, the brain's insult or lowball label is set aside too: a
   misreading is never punished. An insult costs at least `INSULT_MIN_DROP` points, a lowball at
   least `LOWBALL_MIN_DROP`.
2. Happiness moves at most `max_mood_delta` per turn and stays in [0, 100].
3. Stage transitions follow `TRANSITIONS`. Staying put is always legal. An illegal proposal keeps
   the current stage. WALKAWAY -> HAGGLING also needs happiness after this turn above
   `REENTRY_HAPPINESS`; otherwise the stage stays WALKAWAY.
4. Turn limit. The turn that reaches `max_turns` ends in CLOSURE unless it validly reached DEAL.
5. Quotes. During haggling (and after a walk-away) a quote may only fall; a rise keeps the previous quote and flags the
   turn. No quote goes below the item's floor, which wins over everything else.
6. Mood is derived from the validated score, never taken from the proposal; a proposed mood that
   differs is overruled like any other field (`vendor_mood`).
7. DEAL and CLOSURE are terminal.

A proposal is anything with the decision's fields (`Proposal`): a whole `AIDecision`, or the head
of one that a streaming brain has written so far (its numbers and stage, `schemas.decision.DecisionHead`),
so that the words that depend on the numbers can wait for this ruling and no longer
(`session/spoken.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from schemas.enums import Mood, OfferAssessment, Stage

# The table and the numbers are published in schemas.policy for brains to describe; they are
# re-exported here because this module is where they are applied.
from schemas.policy import (
    DEFAULT_MAX_MOOD_DELTA,
    DEFAULT_MAX_TURNS,
    INSULT_MIN_DROP,
    LOWBALL_MIN_DROP,
    REENTRY_HAPPINESS,
    TRANSITIONS,
    WRAP_UP_AFTER_TURN,
    mood_for,
)

__all__ = [
    "DEFAULT_MAX_MOOD_DELTA",
    "DEFAULT_MAX_TURNS",
    "INSULT_MIN_DROP",
    "LOWBALL_MIN_DROP",
    "REENTRY_HAPPINESS",
    "TRANSITIONS",
    "WRAP_UP_AFTER_TURN",
    "Limits",
    "Override",
    "Position",
    "Proposal",
    "Verdict",
    "is_legal",
    "mood_for",
    "validate",
]


def is_legal(current: Stage, proposed: Stage) -> bool:
    return proposed == current or proposed in TRANSITIONS[current]


@dataclass(frozen=True, slots=True)
class Limits:
    max_mood_delta: int = DEFAULT_MAX_MOOD_DELTA
    max_turns: int = DEFAULT_MAX_TURNS
    wrap_up_after: int = WRAP_UP_AFTER_TURN
    lowball_min_drop: int = LOWBALL_MIN_DROP  # a beginner's level may lower it (schemas.pack.LevelParams)


class Proposal(Protocol):
    """What `validate` reads of a brain's proposal."""

    @property
    def happiness_score(self) -> int: ...

    @property
    def negotiation_state(self) -> Stage: ...

    @property
    def counter_price(self) -> int | None: ...

    @property
    def offer_assessment(self) -> OfferAssessment: ...

    @property
    def vendor_mood(self) -> Mood | None: ...


@dataclass(frozen=True, slots=True)
class Position:
    """The authoritative facts a proposal is judged against."""

    stage: Stage
    happiness: int
    turn: int  # the learner turn being answered, 1-based
    quote: int | None  # the vendor's standing quote before this turn
    floor: int | None = None  # the item's floor price, when the item is known
    learner_offer: int | None = None  # parsed by the server from this turn's transcript
    server_assessment: OfferAssessment = OfferAssessment.NONE
    offer_unsure: bool = False  # the server read a number but not surely an offer ("70" against 18,000)


@dataclass(frozen=True, slots=True)
class Override:
    rule: str
    proposed: object
    applied: object


@dataclass(frozen=True, slots=True)
class Verdict:
    """What stands after validation."""

    stage: Stage
    happiness: int
    mood: Mood
    delta: int
    quote: int | None
    assessment: OfferAssessment
    forced_closure: bool
    is_terminal: bool
    overrides: tuple[Override, ...] = ()
    flags: tuple[str, ...] = field(default=())


def validate(position: Position, proposal: Proposal, limits: Limits = Limits()) -> Verdict:
    overrides: list[Override] = []

    # 1. Offer consistency: the server's judgement wins; the brain's label only without a number.
    assessment: OfferAssessment
    if position.server_assessment is not OfferAssessment.NONE:
        assessment = position.server_assessment
        if proposal.offer_assessment not in (OfferAssessment.NONE, assessment):
            overrides.append(Override("offer_assessment", proposal.offer_assessment.value, assessment.value))
    elif position.offer_unsure and proposal.offer_assessment in (OfferAssessment.INSULT, OfferAssessment.LOWBALL):
        assessment = OfferAssessment.NONE
        overrides.append(Override("offer_assessment", proposal.offer_assessment.value, assessment.value))
    else:
        assessment = proposal.offer_assessment
    delta = proposal.happiness_score - position.happiness
    required = {OfferAssessment.INSULT: -INSULT_MIN_DROP, OfferAssessment.LOWBALL: -limits.lowball_min_drop}
    if assessment in required:
        # At least the minimum drop, or all the happiness that is left: an insult at 7 goes to 0.
        need = max(required[assessment], -position.happiness)
        if delta > need:
            overrides.append(Override(f"{assessment.value}_min_drop", delta, need))
            delta = need

    # 2. Happiness: bounded step, bounded range.
    bounded = max(-limits.max_mood_delta, min(limits.max_mood_delta, delta))
    if bounded != delta:
        overrides.append(Override("max_mood_delta", delta, bounded))
    happiness = max(0, min(100, position.happiness + bounded))
    if happiness != position.happiness + bounded:
        overrides.append(Override("happiness_range", position.happiness + bounded, happiness))

    # 3. Stage transition.
    stage = proposal.negotiation_state
    if not is_legal(position.stage, stage):
        overrides.append(Override("illegal_transition", f"{position.stage.value}->{stage.value}", position.stage.value))
        stage = position.stage
    elif position.stage is Stage.WALKAWAY and stage is Stage.HAGGLING and happiness <= REENTRY_HAPPINESS:
        overrides.append(Override("walkaway_reentry_happiness", stage.value, Stage.WALKAWAY.value))
        stage = Stage.WALKAWAY

    # 4. Turn limit: the last allowed turn closes the session unless it made a deal.
    forced = False
    if position.turn >= limits.max_turns and stage is not Stage.DEAL:
        overrides.append(Override("max_turns", stage.value, Stage.CLOSURE.value))
        stage = Stage.CLOSURE
        forced = True

    # 5. Quotes only fall while haggling, and never below the floor.
    quote = proposal.counter_price if proposal.counter_price is not None else position.quote
    if quote is not None:
        # A vendor who called a walking learner back has already started bargaining.
        haggling = position.stage in (Stage.HAGGLING, Stage.WALKAWAY) or stage is Stage.HAGGLING
        if haggling and position.quote is not None and quote > position.quote:
            overrides.append(Override("quote_rise", quote, position.quote))
            quote = position.quote
        # The floor is checked last so that it wins even over a standing quote below it.
        if position.floor is not None and quote < position.floor:
            overrides.append(Override("below_floor", quote, position.floor))
            quote = position.floor

    # 6. Mood follows the validated score.
    mood = mood_for(happiness)
    if proposal.vendor_mood is not None and proposal.vendor_mood is not mood:
        overrides.append(Override("vendor_mood", proposal.vendor_mood.value, mood.value))

    return Verdict(
        stage=stage,
        happiness=happiness,
        mood=mood,
        delta=happiness - position.happiness,
        quote=quote,
        assessment=assessment,
        forced_closure=forced,
        is_terminal=stage.is_terminal,
        overrides=tuple(overrides),
        # Every clamp reaches the clients, named by its rule (schemas/flags.py says each in plain words).
        flags=tuple(dict.fromkeys(o.rule for o in overrides)),
    )
