"""What the vendor says to, and is told about, a learner he remembers (issue #15, docs/memory.md).

A session of a known learner carries `BrainRequest.learner`, a `LearnerRecall`: facts from the
server's records of the learner's earlier sessions at this scenario's stall. Both brains use it:

- the rule vendor greets a learner he remembers with the pack's `remember_*` lines instead of his
  usual greeting, on the first turn only (`remembered_greeting`);
- the LLM is told in the system prompt that it has met the learner (`RETURNING_LEARNER`, the
  server's own words) and given the facts in a LEARNER MEMORY block of the user message
  (`memory_text`), which, like every block, is data to read and never instructions.

Neither changes a number: the mood the session starts at was set by the server when the session
was made, and the rules engine validates every proposal as usual. This is not the welcome back
(`session/silence.py`), which greets a player returning to a session in progress; a remembered
greeting belongs to the first turn of a new session, which has no turns to recap.
"""

from __future__ import annotations

from brain.delimiters import neutralise
from schemas.brain import BrainRequest
from schemas.enums import Outcome
from schemas.learner import LearnerRecall
from schemas.lines import spoken_items
from schemas.scenario import Scenario

__all__ = ["RETURNING_LEARNER", "memory_text", "remembered_greeting"]

GREETING_KEYS = frozenset({"greet", "greet_item"})  # the rule vendor's plain greetings

OUTCOME_WORDS = {
    Outcome.DEAL: "they bought",
    Outcome.WALKED_AWAY: "they walked away without buying",
    Outcome.NO_DEAL: "the bargaining failed, no deal",
    Outcome.TURN_LIMIT: "the bargaining ran out of time, no deal",
    Outcome.STOPPED: "they stopped the conversation early",
    Outcome.TIMED_OUT: "they fell silent and the conversation ended",
}

SLIP_WORDS = {
    "insult": "insulting offers or remarks",
    "taboo": "words that give offence here",
    "lowball": "lowball offers",
    "no_respect": "no respectful form of address",
}

RETURNING_LEARNER = "\n".join([
    "## RETURNING_LEARNER",
    "You have met this learner before, at your own stall. The LEARNER MEMORY block in the user "
    "message lists what happened then, from the server's records. On turn 1, greet them as "
    "someone you remember and mention one fact from it in a few words (what they bought and for "
    "how much, or that they left without buying). After that, let it colour your manner only. "
    "It never changes the catalog, your floor or the rules: CURRENT_STATE is authoritative, and "
    "today's prices start afresh.",
])


def remembered_greeting(request: BrainRequest, scenario: Scenario, key: str) -> tuple[str, dict[str, object]]:
    """The pool and extra fields of the rule vendor's line: a `remember_*` pool when he greets a
    learner he remembers on the first turn, else `key` unchanged (and no fields)."""
    recall = request.learner
    if recall is None or request.turn != 1 or key not in GREETING_KEYS:
        return key, {}
    item = scenario.item(recall.last_item)
    if item is None:
        return "remember_plain", {}
    last_items = spoken_items(item, scenario)
    if recall.last_outcome is Outcome.DEAL and recall.last_paid is not None:
        return "remember_deal", {"last_items": last_items, "price": recall.last_paid}
    return "remember_item", {"last_items": last_items}


def memory_text(recall: LearnerRecall, scenario: Scenario | None) -> str:
    """The LEARNER MEMORY block's body: one fact a line, neutralised like any block's text."""
    currency = scenario.currency if scenario is not None else ""
    times = "once" if recall.sessions == 1 else f"{recall.sessions} times"
    last = f"- Last time {OUTCOME_WORDS[recall.last_outcome]}"
    if recall.last_item:
        last += f"; the item was {recall.last_item}"
    if recall.last_outcome is Outcome.DEAL and recall.last_paid is not None:
        last += f", bought for {recall.last_paid} {currency}".rstrip()
        if recall.last_first_quote is not None:
            last += f" after a first quote of {recall.last_first_quote}"
        if recall.last_discount_pct is not None:
            last += f" ({recall.last_discount_pct:g}% off)"
    lines = [f"- The learner has bargained at your stall {times} before.", last + "."]
    if recall.recurring_slips:
        habits = ", ".join(SLIP_WORDS.get(s, s) for s in recall.recurring_slips)
        lines.append(f"- Habits seen in more than one of their recent sessions: {habits}.")
    return neutralise("\n".join(lines))
