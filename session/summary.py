"""The running summary of a session (seed 001 §7): what a negotiation keeps of it, when it is due, and the
summary the server writes itself. Plain data and pure functions; docs/memory.md.

Every `SUMMARY_EVERY` (10) answered learner turns a new summary is made from the previous one and the
last `SUMMARY_LINES` (20) lines. The actor's part, `session/memory.py`, starts it after the turn's reply
is out and never waits for it: with an LLM brain it is one model call in the background, with the rule
brain it is `facts()`, the summary the server builds from the session's own record (items discussed,
quotes and offers, the stage reached, etiquette slips, what the learner needed help with). `facts()`
also grounds the LLM's summary: the model is given them beside the lines.

Undo. A summary covers the turns up to `covers`. An undo that takes back turn `covers` or an earlier
one goes back to the summary before it (`previous`), and a refresh in flight that read a taken-back
turn is dropped when it comes back; the next refresh is then due when the turn is played again.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from schemas.brain import Ledger, StageVisit
from schemas.enums import OfferAssessment, Outcome, Stage
from session.coaching import Coaching
from session.records import TurnRecord

__all__ = ["SUMMARY_EVERY", "SUMMARY_LINES", "SUMMARY_MAX_CHARS", "Memory", "facts"]

SUMMARY_EVERY = 10  # answered learner turns between two summaries (seed 001 §7)
SUMMARY_LINES = 20  # the latest history lines each summary is made from (seed 001 §7)
SUMMARY_MAX_CHARS = 1200  # a summary is cut to this (about 300 tokens of English)
_TOKENS = itertools.count(1)


@dataclass(slots=True)
class Memory:
    """A negotiation's running summary. The first four fields are stored (the Session node in Neo4j);
    the rest is the bookkeeping of one process and starts again empty after a restart."""

    summary: str = ""
    covers: int = 0  # the last learner turn `summary` covers (0: there is none)
    previous: str = ""  # the summary before it: what an undo below `covers` goes back to
    previous_covers: int = 0
    started: int = field(default=0, compare=False)  # the turn after which the latest refresh started
    flight: int = field(default=0, compare=False)  # the refresh in flight (0: none), see `start`
    charge: Ledger | None = field(default=None, compare=False)  # an LLM refresh's cost, for the next reply

    def __post_init__(self) -> None:
        self.started = max(self.started, self.covers)

    def due(self, turn: int) -> bool:
        """A refresh is due after answered turn `turn`: a multiple of SUMMARY_EVERY has been passed since
        the last one started (a late one is made at the next turn), and none is in flight."""
        return (not self.flight and turn >= SUMMARY_EVERY
                and turn // SUMMARY_EVERY > self.started // SUMMARY_EVERY)

    def start(self, turn: int) -> int:
        """Mark a refresh covering `turn` as in flight; its token comes back with its result."""
        self.started = turn
        self.flight = next(_TOKENS)
        return self.flight

    def finish(self, token: int, text: str, covers: int) -> bool:
        """Take a refresh's result; False when it is stale or empty (`accept`). The actor does the
        same through a `SummaryWritten` change (session/memory.py)."""
        accepted = self.accept(token, text)
        if accepted is None:
            return False
        self.written(accepted, covers, self.summary, self.covers)
        return True

    def accept(self, token: int, text: str) -> str | None:
        """A refresh's result as the summary keeps it, or None when it is stale (an undo took back a
        turn it read) or empty (a failed call: the summary before it stays). Ends the refresh."""
        if token != self.flight:
            return None
        self.flight = 0
        text = " ".join(text.split())
        if not text:
            return None
        if len(text) > SUMMARY_MAX_CHARS:
            text = text[: SUMMARY_MAX_CHARS - 3].rstrip() + "..."
        return text

    def written(self, summary: str, covers: int, previous: str, previous_covers: int) -> None:
        """The stored fields, as a `SummaryWritten` change sets them (session/fold.py)."""
        self.summary, self.covers, self.previous, self.previous_covers = summary, covers, previous, previous_covers

    def undo(self, turn: int) -> bool:
        """Learner turn `turn` and every later one were taken back; True when the summary changed."""
        changed = False
        if self.covers >= turn:
            self.summary, self.covers = self.previous, self.previous_covers
            self.previous, self.previous_covers = "", 0
            changed = True
            if self.covers >= turn:  # cannot happen with undos of 3 and summaries 10 turns apart
                self.summary, self.covers = "", 0
        if self.started >= turn:
            self.started = self.covers
            self.flight = 0  # a refresh in flight read a taken-back turn: its answer will be dropped
        return changed

    def charged(self, ledger: Ledger) -> None:
        """Keep an LLM refresh's cost until the next reply reports it (`session/memory.py`)."""
        self.charge = ledger if self.charge is None else _plus(self.charge, ledger)


def _plus(a: Ledger, b: Ledger) -> Ledger:
    return a.model_copy(update={
        "llm_calls": a.llm_calls + b.llm_calls, "retries": a.retries + b.retries,
        "prompt_tokens": a.prompt_tokens + b.prompt_tokens,
        "completion_tokens": a.completion_tokens + b.completion_tokens,
        "summary_calls": a.summary_calls + b.summary_calls,
    })


def _list(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def facts(history: list[TurnRecord], stage: Stage, stage_changes: list[StageVisit], coaching: Coaching,
          outcome: Outcome | None = None, vendor: str = "the vendor") -> str:
    """The server's own summary of a session, deterministic, from its record: a few short sentences."""
    turns = max((h.turn for h in history), default=0)
    items: dict[str, list[str]] = {}
    slips: dict[OfferAssessment, int] = {}
    fallbacks = 0
    for h in history:
        if h.item and h.item not in items:
            items[h.item] = []
        if h.role == "user":
            if h.offer is not None and h.item:
                items[h.item].append(f"offered {h.offer}")
            if h.assessment in (OfferAssessment.INSULT, OfferAssessment.LOWBALL):
                slips[h.assessment] = slips.get(h.assessment, 0) + 1
        else:
            if h.quote is not None and h.item and f"quoted {h.quote}" not in items[h.item][-1:]:
                items[h.item].append(f"quoted {h.quote}")
            if "fallback" in h.flags:
                fallbacks += 1
    sentences = [f"After {turns} learner turn{'s' if turns != 1 else ''} the conversation is at {stage.value}"
                 + (f" (outcome {outcome.value})." if outcome else ".")]
    if stage_changes:
        path = " -> ".join([stage_changes[0].from_stage.value, *(c.to_stage.value for c in stage_changes)])
        sentences.append(f"Stages: {path}.")
    for item, moves in items.items():
        # The first quote, the last few moves: enough to see where the haggle stands.
        shown = moves if len(moves) <= 6 else [*moves[:1], "...", *moves[-5:]]
        sentences.append(f"{item}: {', '.join(shown)}." if shown else f"{item}: talked about, no price yet.")
    if slips:
        counted = [f"{n} {kind.value} offer{'s' if n != 1 else ''}" for kind, n in slips.items()]
        sentences.append(f"Etiquette slips: {_list(counted)}.")
    needed = []
    hints = sum(coaching.hints)
    if hints:
        needed.append(f"{hints} hint{'s' if hints != 1 else ''} (deepest level {_deepest(coaching)})")
    for count, what in ((coaching.repeats, "repeat"), (coaching.unclear, "unclear line"),
                        (coaching.timeouts, "long silence"), (coaching.undos, "undo")):
        if count:
            needed.append(f"{count} {what}{'s' if count != 1 else ''}")
    if needed:
        sentences.append(f"The learner needed: {_list(needed)}.")
    if fallbacks:
        sentences.append(f"{vendor} lost the thread {fallbacks} time{'s' if fallbacks != 1 else ''}.")
    return " ".join(sentences)


def _deepest(coaching: Coaching) -> int:
    return max(level for level, n in enumerate(coaching.hints) if n)
