"""The negotiation's published numbers: the stage table, the mood bands and the limits.

Data only. `session/rules.py` applies them and is the only place that decides anything; they
live here so that a brain can describe the rules (the LLM prompt does) without importing the
session layer.
"""

from __future__ import annotations

from schemas.enums import Mood, Stage

INSULT_MIN_DROP = 10
LOWBALL_MIN_DROP = 6
REENTRY_HAPPINESS = 40  # WALKAWAY -> HAGGLING only when happiness after the turn is above this
DEFAULT_MAX_MOOD_DELTA = 15
DEFAULT_MAX_TURNS = 30
WRAP_UP_AFTER_TURN = 25  # after this turn the brain is told to wrap up

# The legal moves out of each stage; staying in the same stage is always allowed as well.
TRANSITIONS: dict[Stage, frozenset[Stage]] = {
    Stage.GREETING: frozenset({Stage.INQUIRY}),
    Stage.INQUIRY: frozenset({Stage.HAGGLING, Stage.WALKAWAY}),
    Stage.HAGGLING: frozenset({Stage.DEAL, Stage.WALKAWAY, Stage.CLOSURE}),
    Stage.WALKAWAY: frozenset({Stage.HAGGLING, Stage.CLOSURE}),
    Stage.DEAL: frozenset(),
    Stage.CLOSURE: frozenset(),
}

# Mood bands by inclusive upper bound of the happiness score.
MOOD_BANDS: tuple[tuple[int, Mood], ...] = (
    (20, Mood.ANGRY),
    (40, Mood.ANNOYED),
    (60, Mood.NEUTRAL),
    (80, Mood.FRIENDLY),
    (100, Mood.ENTHUSIASTIC),
)


def mood_for(score: int) -> Mood:
    for upper, mood in MOOD_BANDS:
        if score <= upper:
            return mood
    return Mood.ENTHUSIASTIC


OPENING_HINT = 0.4  # a suggested first offer as a share of the vendor's quote: the server calls it fair


def round_price(value: float) -> int:
    """Prices a vendor would say: whole units, and multiples of 5 from 50 up."""
    if value >= 50:
        return 5 * round(value / 5)
    return round(value)


def suggested_offer(quote: int, last_offer: int | None) -> int:
    """The next offer a coach suggests: a third of the way from the learner's last offer (or an
    opening offer, `OPENING_HINT` of the quote) up to the vendor's quote."""
    base = last_offer if last_offer is not None and last_offer < quote else round(quote * OPENING_HINT)
    return round_price(base + (quote - base) / 3)
