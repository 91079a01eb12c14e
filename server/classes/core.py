"""Classes and assignments, the pure part: what counts toward an assignment and what a class page shows.

No clock, no store, no I/O: the routes read the class, its assignments and its learners' sessions
(server/classes/graph.py) and hand them here. The rules, written once (docs/studio.md, classes):

- a session **counts toward** an assignment when it is one of the learner's, of the assignment's
  scenario (and version, when the assignment names one) and level, and it ended between the
  assignment's creation and its due date;
- it **meets** the assignment when every criterion holds: a deal (when `deal`), a price within
  `within_fair_pct` % of the item's fair range (0 inside the range; else the distance to its nearer
  end over that end), no insult (when `no_insult`), at most `max_hints` hints, a score of at least
  `min_score`;
- a learner has **completed** an assignment once one counting session meets it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from schemas.enums import Level

__all__ = [
    "AssignmentIn",
    "ClassIn",
    "Criteria",
    "LearnerIds",
    "Played",
    "StoredAssignment",
    "StoredClass",
    "class_progress",
    "counts_toward",
    "failed_criteria",
    "fair_gap_pct",
]

MAX_LEARNERS = 200  # per class: a school class, not a district
MAX_ASSIGNMENTS = 100  # per class
TREND_POINTS = 10  # the most recent scores a learner's trend shows
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$"  # the learner ids the learner routes accept


class _In(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class ClassIn(_In):
    """`POST /api/classes`: a teacher names their class; the admin names its teacher as well."""

    name: str = Field(min_length=1, max_length=80)
    teacher_id: str | None = Field(None, pattern=_ID)


class LearnerIds(_In):
    """`POST /api/classes/{id}/learners`: learners added by id (already members are kept once)."""

    learner_ids: list[Annotated[str, Field(pattern=_ID)]] = Field(min_length=1, max_length=MAX_LEARNERS)


class Criteria(_In):
    """What a session must show to complete an assignment; a criterion left out is not asked."""

    deal: bool = True
    within_fair_pct: float | None = Field(None, ge=0, le=100)
    no_insult: bool = False
    max_hints: int | None = Field(None, ge=0, le=100)
    min_score: int | None = Field(None, ge=0, le=100)


class AssignmentIn(_In):
    """`POST /api/classes/{id}/assignments`."""

    title: str = Field("", max_length=120)
    scenario: str = Field(min_length=1, max_length=64)
    version: int | None = Field(None, ge=1)
    level: Level = Level.INTERMEDIATE  # a session's default level too
    due_at: float = Field(gt=0)  # Unix seconds
    criteria: Criteria = Criteria()


@dataclass(frozen=True, slots=True)
class StoredClass:
    class_id: str
    name: str
    teacher_id: str
    learner_ids: tuple[str, ...]
    created_at: float


@dataclass(frozen=True, slots=True)
class StoredAssignment:
    assignment_id: str
    class_id: str
    spec: AssignmentIn
    created_at: float


@dataclass(frozen=True, slots=True)
class Played:
    """One ended session of a class's learner, as the graph has it; `fair` is its item's fair range in
    the version it played (None when the item is unknown)."""

    learner_id: str
    session_id: str
    scenario: str
    version: int
    level: str
    outcome: str | None
    item: str | None
    price: float | None
    fair: tuple[int, int] | None
    insults: int
    hints: int
    score: int | None
    slips: tuple[str, ...]
    at: float  # created
    ended_at: float


def fair_gap_pct(price: float, fair: tuple[int, int]) -> float:
    """How far `price` lies outside the fair range, in % of its nearer end (0 inside it)."""
    low, high = fair
    if price < low:
        return 100.0 * (low - price) / low
    if price > high:
        return 100.0 * (price - high) / high
    return 0.0


def counts_toward(assignment: StoredAssignment, played: Played) -> bool:
    spec = assignment.spec
    return (played.scenario == spec.scenario and (spec.version is None or played.version == spec.version)
            and played.level == spec.level.value and assignment.created_at <= played.ended_at <= spec.due_at)


def failed_criteria(criteria: Criteria, played: Played) -> list[str]:
    """The criteria `played` does not meet, by name; empty when it meets the assignment."""
    failed: list[str] = []
    if criteria.deal and played.outcome != "deal":
        failed.append("deal")
    if criteria.within_fair_pct is not None and (
            played.price is None or played.fair is None
            or fair_gap_pct(played.price, played.fair) > criteria.within_fair_pct):
        failed.append("within_fair_pct")
    if criteria.no_insult and played.insults > 0:
        failed.append("no_insult")
    if criteria.max_hints is not None and played.hints > criteria.max_hints:
        failed.append("max_hints")
    if criteria.min_score is not None and (played.score is None or played.score < criteria.min_score):
        failed.append("min_score")
    return failed


def class_progress(klass: StoredClass, assignments: Sequence[StoredAssignment],
                   sessions: Sequence[Played]) -> dict[str, object]:
    """The class page's figures: per assignment, who completed it; per learner, their sessions,
    mean score, slips and trend; the class's most common slips."""
    by_learner: dict[str, list[Played]] = {lid: [] for lid in klass.learner_ids}
    for played in sorted(sessions, key=lambda p: (p.ended_at, p.session_id)):
        if played.learner_id in by_learner:
            by_learner[played.learner_id].append(played)
    rows: list[dict[str, object]] = []
    for assignment in assignments:
        done: list[str] = []
        attempted: list[str] = []
        for lid, played_list in by_learner.items():
            counting = [p for p in played_list if counts_toward(assignment, p)]
            if counting:
                attempted.append(lid)
            if any(not failed_criteria(assignment.spec.criteria, p) for p in counting):
                done.append(lid)
        total = len(klass.learner_ids)
        rows.append({"assignment_id": assignment.assignment_id, "title": assignment.spec.title,
                     "scenario": assignment.spec.scenario, "version": assignment.spec.version,
                     "level": assignment.spec.level.value, "due_at": assignment.spec.due_at,
                     "criteria": assignment.spec.criteria.model_dump(), "completed": done,
                     "attempted": attempted, "completed_count": len(done), "learners": total,
                     "completion_pct": round(100.0 * len(done) / total, 1) if total else 0.0})
    slips: Counter[str] = Counter()
    learners: list[dict[str, object]] = []
    for lid, played_list in by_learner.items():
        scores = [p.score for p in played_list if p.score is not None]
        own: Counter[str] = Counter(s for p in played_list for s in p.slips)
        slips.update(own)
        learners.append({"learner_id": lid, "sessions": len(played_list),
                         "deals": sum(p.outcome == "deal" for p in played_list),
                         "mean_score": round(sum(scores) / len(scores), 1) if scores else None,
                         "trend": scores[-TREND_POINTS:], "slips": dict(own.most_common()),
                         "completed": [r["assignment_id"] for r in rows if lid in r["completed"]]})  # type: ignore[operator]
    return {"class_id": klass.class_id, "name": klass.name, "teacher_id": klass.teacher_id,
            "assignments": rows, "learners": learners,
            "common_slips": [{"slip": s, "count": n} for s, n in slips.most_common()]}
