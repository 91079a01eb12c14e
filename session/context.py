"""The graph context a brain is given: turns per stage, the happiness trend, the items discussed,
the transitions and how long the conversation has stayed where it is. Pure, from the history."""

from __future__ import annotations

from schemas.brain import GraphContext, StageVisit
from schemas.enums import Stage
from session.records import TurnRecord

__all__ = ["graph_context", "stability_hint"]

TREND_WINDOW = 5


def graph_context(history: list[TurnRecord], stage: Stage, stage_changes: list[StageVisit]) -> GraphContext:
    """What the graph says about a session so far, computed from memory (the brain's GRAPH CONTEXT)."""
    vendor = [h for h in history if h.role == "vendor"]
    per_stage: dict[Stage, int] = {}
    for h in vendor:
        per_stage[h.stage] = per_stage.get(h.stage, 0) + 1
    trend = tuple(h.happiness for h in vendor[-TREND_WINDOW:])
    direction = "steady"
    if len(trend) >= 2 and trend[-1] - trend[0] >= 3:
        direction = "rising"
    elif len(trend) >= 2 and trend[0] - trend[-1] >= 3:
        direction = "falling"
    items: dict[str, int] = {}
    for h in history:
        if h.role == "user" and h.item:
            items[h.item] = items.get(h.item, 0) + 1
    in_stage = 0
    for h in reversed(vendor):
        if h.stage is not stage:
            break
        in_stage += 1
    return GraphContext(
        turns_per_stage=per_stage,
        happiness_trend=trend,
        trend_direction=direction,
        items_discussed=items,
        transitions=tuple(stage_changes),
        turns_in_current_stage=in_stage,
        stability_hint=stability_hint(stage, in_stage),
    )


def stability_hint(stage: Stage, turns_here: int) -> str:
    if stage.is_terminal:
        return "The negotiation is over."
    if turns_here <= 1:
        return f"The conversation only just reached {stage.value}; do not rush to the next stage."
    if turns_here >= 6:
        return f"{turns_here} turns in {stage.value}: it is time to move the conversation on."
    return f"{turns_here} turns in {stage.value}; move on when the learner gives you a reason."
