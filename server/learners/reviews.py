"""Review items as a fold of ended sessions, scheduled with FSRS (docs/learning.md). Pure: no I/O,
no clock (every time is the session's own, passed in).

- `items_after`: the learner's items after one ended session. Each piece of evidence (a revealed
  hint, a slip, an unclear line, a grounded card earned) makes an item, or adds to the one with the same scenario, kind
  and key; each target the session judged (`SessionFigures.practice`) is reviewed with its
  rating. An item gets one review per session, the worst of what the session said of it: needing
  it again (fresh evidence) is `again`, whatever the judgement.
- `due`: the items of a scenario due at a time, phrases and habits before cards, the most overdue
  first, at most `MAX_TARGETS`.
- `retention`: FSRS's retrievability of an item at a time, the chance the learner recalls it.

The scheduler is `fsrs.Scheduler` with its default parameters and desired retention (0.9), with
two settings of ours: no learning or relearning steps (a review is a whole session, never minutes
apart, so every card goes straight to the Review state with a whole-day interval), and no fuzzing
(the same sessions always give the same schedule, which the tests work out by hand).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import cast

from fsrs import Card, Rating, Scheduler, State

from schemas.learner import SessionFigures
from schemas.review import Evidence, ItemKind, Practice, ReviewEntry, ReviewItem
from schemas.review import Rating as RatingName
from schemas.scenario import Scenario, load_scenario
from session.practice import cue_words

__all__ = ["HISTORY_KEPT", "MAX_TARGETS", "SCHEDULER", "due", "item_id", "items_after", "retention"]

SCHEDULER = Scheduler(learning_steps=(), relearning_steps=(), enable_fuzzing=False)
MAX_TARGETS = 3  # due items one session brings back: more would crowd a short haggle
EVIDENCE_KEPT = 5  # the latest pieces of evidence an item keeps
# The latest reviews an item keeps in its history. FSRS schedules from the card (state, stability,
# difficulty, due, last review; `reps` and `lapses` count every review), so the history is a
# record for the learner and the evaluation, and a kept item must not grow with every session
# (issue #33). A session already folded in is found by the profile's session ids first; here by
# its review, which is among the latest unless the item was reviewed this many times since.
HISTORY_KEPT = 32
_RATINGS: dict[RatingName, Rating] = {"again": Rating.Again, "hard": Rating.Hard, "good": Rating.Good,
                                      "easy": Rating.Easy}


def _time(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


def item_id(learner_id: str, scenario: str, kind: ItemKind, key: str) -> str:
    """An item's id: the same learner, scenario, kind and key are always the same item."""
    return hashlib.sha256(f"{learner_id}\x00{scenario}\x00{kind}\x00{key}".encode()).hexdigest()[:20]


def _card(item: ReviewItem) -> Card:
    return Card(card_id=1, state=State(item.state), step=item.step, stability=item.stability,
                difficulty=item.difficulty, due=_time(item.due),
                last_review=_time(item.last_review) if item.last_review is not None else None)


# What FSRS's `review_card` reads of a card and a review (with no fuzzing): the card's state, step,
# stability and difficulty, the whole days since its last review (None before the first), and the
# rating. Its answer is the new state, step, stability and difficulty, and the interval to the
# next review, added to the review's time.
_Scheduled = tuple[int, int | None, float, float, timedelta]
_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)  # where a remembered schedule is worked out
SCHEDULES_REMEMBERED = 4096


@lru_cache(maxsize=SCHEDULES_REMEMBERED)
def _scheduled(state: int, step: int | None, stability: float | None, difficulty: float | None,
               days: int | None, rating: RatingName) -> _Scheduled:
    """One FSRS review as a pure function of what it reads, kept: new items (the most reviewed)
    always schedule alike, and learners with the same history do too (`test_reviews` holds this to
    the scheduler's own answer)."""
    last = None if days is None else _REFERENCE - timedelta(days=days)
    card = Card(card_id=1, state=State(state), step=step, stability=stability, difficulty=difficulty,
                due=_REFERENCE, last_review=last)
    reviewed, _ = SCHEDULER.review_card(card, _RATINGS[rating], _REFERENCE)
    assert reviewed.stability is not None and reviewed.difficulty is not None
    return int(reviewed.state), reviewed.step, reviewed.stability, reviewed.difficulty, reviewed.due - _REFERENCE


def _review(item: ReviewItem, rating: RatingName, at: float, session_id: str, recalled: bool | None,
            also: dict[str, object] | None = None) -> ReviewItem:
    """`item` reviewed with `rating` at `at`, with `also`'s other changes to it (none to its card)."""
    when = _time(at)
    days = (when - _time(item.last_review)).days if item.last_review is not None else None
    state, step, stability, difficulty, interval = _scheduled(item.state, item.step, item.stability,
                                                              item.difficulty, days, rating)
    due_at = (when + interval).timestamp()
    entry = ReviewEntry(at=at, session_id=session_id, rating=rating, recalled=recalled, stability=stability,
                        difficulty=difficulty, due=due_at)
    return item.model_copy(update={
        **(also or {}),
        "state": state, "step": step, "stability": stability, "difficulty": difficulty,
        "due": due_at, "last_review": at, "reps": item.reps + 1,
        "lapses": item.lapses + (1 if rating == "again" and item.reps > 0 else 0),
        "history": (*item.history, entry)[-HISTORY_KEPT:],
    })


def retention(item: ReviewItem, at: float) -> float:
    """The chance the learner recalls the item at `at` (FSRS retrievability; 0 before any review)."""
    return float(SCHEDULER.get_card_retrievability(_card(item), _time(at)))


def _shape(evidence: Evidence, scenario: Scenario) -> tuple[ItemKind, str, str, tuple[str, ...]]:
    """An evidence's item: its kind, key, phrase and cue words."""
    rules = scenario.rules
    if evidence.source == "slip":
        if evidence.key == "no_respect":
            words = ", ".join(rules.respectful_address[:3])
            return "respect", "respect", f"a respectful form of address ({words})", tuple(rules.respectful_address)
        if evidence.key == "taboo":
            return "avoid", "taboo", "words that give offence here", tuple(rules.taboo_phrases)
        what = "an insulting offer" if evidence.key == "insult" else "a lowball offer"
        return "avoid", evidence.key, f"no {what}: open near the fair price", ()
    if evidence.source == "card":
        return "card", f"card:{evidence.key}", evidence.text, (evidence.key,)
    names = [n for item in scenario.items for n in (item.name, item.local)]
    cues = cue_words(evidence.text, drop=[*names, *rules.respectful_address])
    key = evidence.key if evidence.source == "hint" else f"{evidence.source}:{' '.join(cues)[:60]}"
    return "phrase", key, evidence.text, cues


def items_after(items: Mapping[str, ReviewItem], figures: SessionFigures) -> list[ReviewItem]:
    """The items this session made or changed, scheduled at the session's end (see the module doc)."""
    scenario = load_scenario(figures.scenario)
    judged: dict[str, Practice] = {p.item_id: p for p in figures.practice if p.rating is not None}
    shaped = [(evidence, shape) for evidence in figures.evidence
              if (shape := _shape(evidence, scenario))[0] != "phrase" or shape[3]]  # a phrase needs cue words
    ids = [item_id(figures.learner_id, figures.scenario, kind, key) for _, (kind, key, _, _) in shaped]
    # A session folded in before has a review in every item it touched: only those are read, so the
    # check costs what the session touched, not the learner's whole past.
    if any(entry.session_id == figures.session_id for iid in {*judged, *ids} if iid in items
           for entry in items[iid].history):
        return []  # this session was folded in already
    at = figures.ended_at
    worst: dict[str, RatingName] = {}
    recalled: dict[str, bool | None] = {}
    # Each item the evidence touches, as it was (or made), and the changes the evidence makes to it:
    # applied with its review, in one copy of the model (a copy for each was a fifth of a record).
    made: dict[str, ReviewItem] = {}
    updates: dict[str, dict[str, object]] = {}
    for practice in judged.values():
        if practice.item_id in items and practice.rating is not None:
            worst[practice.item_id] = practice.rating
            recalled[practice.item_id] = practice.recalled
    for (evidence, (kind, key, phrase, cues)), iid in zip(shaped, ids, strict=True):
        item = made.get(iid) or items.get(iid) or ReviewItem(
            item_id=iid, learner_id=figures.learner_id, scenario=figures.scenario,
            language=figures.target_language, kind=kind, key=key, source=evidence.source, phrase=phrase,
            english=evidence.english, cues=cues, created_at=at, due=at)
        made[iid] = item
        update = updates.setdefault(iid, {})
        kept = cast(tuple[tuple[str, Evidence], ...], update.get("evidence", item.evidence))
        update["evidence"] = (*kept, (figures.session_id, evidence))[-EVIDENCE_KEPT:]
        if kind == "phrase":  # the newest words of the line (a hint's item and price change)
            english = evidence.english or cast(str, update.get("english", item.english))
            update.update(phrase=phrase, english=english, cues=cues)
        worst[iid] = "again"
        recalled.setdefault(iid, None)
    changed = [_review(made.get(iid) or items[iid], rating, at, figures.session_id, recalled.get(iid),
                       updates.get(iid)) for iid, rating in worst.items()]
    return sorted(changed, key=lambda i: i.item_id)


def due(items: Iterable[ReviewItem], scenario: str, at: float) -> list[ReviewItem]:
    """The scenario's items due at `at`, at most `MAX_TARGETS`: what the learner must say or do first
    (phrases and habits before cards, which only a topic brings back), then the most overdue, the oldest."""
    ready = [i for i in items if i.scenario == scenario and i.due <= at]
    return sorted(ready, key=lambda i: (i.kind == "card", i.due, i.created_at, i.item_id))[:MAX_TARGETS]
