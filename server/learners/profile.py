"""The learner profile as a fold of sessions, and what is read from it. Pure: no I/O, no clock.

Every store folds with `fold` (or `add`), in the order sessions end, so the in-memory profile and
the one in Neo4j are the same. The rules (docs/memory.md):

- A session is folded in once (`counted`), in a bounded room: the profile keeps the latest
  `SESSION_WINDOW` (32) sessions folded in, each as (created_at, session_id), and
  `counted_through`, the greatest of those keys that has left the window. A session is counted
  already when its id is in the window or its key is no greater than `counted_through`. A repeat
  is never counted twice: its key is its own, and `counted_through` passed it when it left the
  window. A new session is taken for counted only when it started before one that has left the
  window, that is when more than `SESSION_WINDOW` of the learner's sessions were folded in while it
  was open (sessions are folded in the order they end). A store that knows which sessions it
  folded (Neo4j's PLAYED links) asks itself instead, and folds with `add`.
- Contradictions (seed 003's `pending`): `level`, `input_language` and `target_language` are the
  profile's confirmed values. A session that says another value does not overwrite one: the value
  is held in `pending` with a count of consecutive sessions that said it, and it replaces the
  profile's value when `CONFIRM_AFTER` (2) sessions in a row have said it. A session that says the
  profile's value again drops what was pending; one that says a third value starts the count again.
  The first session sets all three.
- The level estimated from a session's evidence (session/level_estimate.py) is evidence too: a
  confident estimate (`CONFIDENT`) of another level waits in `pending` under `estimated_level` and
  moves the confirmed level when two sessions in a row said it (`_estimated`).
- Recurring slips: a slip is recurring when at least `RECUR_AT` (2) of the latest `RECENT` (5)
  sessions had it.
- Best discount: per (scenario, item), the highest discount of a deal, the earliest on a tie.
- Trend: the mean score of the latest `TREND_WINDOW` (3) sessions against the mean of the up to 3
  before them (with 3 sessions or fewer: the sessions after the first against the first); a
  change of 5 points or more either way is `improving` or `declining`, else `steady`; with fewer
  than two sessions, `new`.
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.enums import Level, Outcome
from schemas.learner import (
    CONTESTED_FIELDS,
    SESSION_WINDOW,
    BestDiscount,
    HintPoint,
    LearnerProfile,
    LearnerRecall,
    PendingValue,
    ProgressPoint,
    ScenarioRecord,
    SessionFigures,
    Slip,
    Trend,
)
from schemas.scenario import load_scenario

__all__ = ["CONFIRM_AFTER", "add", "counted", "fold", "hint_points", "progress_point", "recall", "trend"]

CONFIRM_AFTER = 2  # consecutive sessions that must say a new level or language before it stands
ESTIMATED = "estimated_level"  # `pending`'s key for a level the sessions' estimates say
CONFIDENT = 0.6  # an estimate this sure is evidence (session/level_estimate.py: six lines that agree)
RECENT = 5  # sessions looked at for recurring slips
RECUR_AT = 2  # a slip in this many of them recurs
TREND_WINDOW = 3  # sessions on each side of the trend's comparison
TREND_STEP = 5.0  # score points of change that make a trend


def _contested(profile: LearnerProfile, figures: SessionFigures) -> dict[str, object]:
    """The confirmed values and what is pending, after `figures` (seed 003's `pending`)."""
    changes: dict[str, object] = {}
    pending = dict(profile.pending)
    for name in CONTESTED_FIELDS:
        # By name, not `dict(model)`: iterating a model walks all its fields (about 25 here), which
        # was most of a fold's cost at scenario b's churn.
        said = getattr(figures, name)
        if said == getattr(profile, name):
            pending.pop(name, None)
            continue
        held = pending.get(name)
        count = held.sessions + 1 if held is not None and held.value == said.value else 1
        if count >= CONFIRM_AFTER:
            changes[name] = said
            pending.pop(name, None)
        else:
            since = held.since_session if count > 1 and held is not None else figures.session_id
            pending[name] = PendingValue(value=said.value, sessions=count, since_session=since)
    changes["pending"] = pending
    return changes


def _estimated(level: Level, pending: dict[str, PendingValue], f: SessionFigures) -> Level | None:
    """The level the sessions' estimates confirm, if this one completes it (seed 003's rule again):
    a confident estimate of another level is held in `pending`, and moves the level when
    `CONFIRM_AFTER` sessions in a row said it. One of the level itself drops what was held; an
    estimate not sure enough is no evidence, so it neither counts nor breaks the run."""
    said = f.estimate
    if said is None or said.confidence < CONFIDENT:
        return None
    if said.level == level:
        pending.pop(ESTIMATED, None)
        return None
    held = pending.get(ESTIMATED)
    count = held.sessions + 1 if held is not None and held.value == said.level.value else 1
    if count >= CONFIRM_AFTER:
        pending.pop(ESTIMATED, None)
        return said.level
    since = held.since_session if count > 1 and held is not None else f.session_id
    pending[ESTIMATED] = PendingValue(value=said.level.value, sessions=count, since_session=since)
    return None


def _scenario_record(before: ScenarioRecord | None, f: SessionFigures) -> ScenarioRecord:
    outcomes = dict(before.outcomes) if before is not None else {}
    outcomes[f.outcome] = outcomes.get(f.outcome, 0) + 1
    return ScenarioRecord(
        played=(before.played if before is not None else 0) + 1, outcomes=outcomes, last_outcome=f.outcome,
        last_session_id=f.session_id, last_item=f.item, last_paid=f.paid, last_first_quote=f.first_quote,
        last_discount_pct=f.discount_pct, last_at=f.ended_at,
    )


def _best(discounts: tuple[BestDiscount, ...], f: SessionFigures) -> tuple[BestDiscount, ...]:
    if f.outcome is not Outcome.DEAL or f.item is None or f.discount_pct is None or f.paid is None:
        return discounts
    new = BestDiscount(scenario=f.scenario, item=f.item, discount_pct=f.discount_pct, paid=f.paid,
                       session_id=f.session_id)
    kept = [d for d in discounts if (d.scenario, d.item) != (f.scenario, f.item)]
    old = next((d for d in discounts if (d.scenario, d.item) == (f.scenario, f.item)), None)
    best = old if old is not None and old.discount_pct >= new.discount_pct else new
    return tuple(sorted([*kept, best], key=lambda d: (d.scenario, d.item)))


def _recurring(recent: tuple[tuple[Slip, ...], ...]) -> tuple[Slip, ...]:
    counts: dict[Slip, int] = {}
    for slips in recent:
        for slip in set(slips):
            counts[slip] = counts.get(slip, 0) + 1
    return tuple(sorted(s for s, n in counts.items() if n >= RECUR_AT))


def counted(profile: LearnerProfile, figures: SessionFigures) -> bool:
    """Whether the session is folded into the profile already (the module's first rule)."""
    sid = figures.session_id
    if any(kept == sid for _, kept in profile.latest_sessions):
        return True
    through = profile.counted_through
    return through is not None and (figures.created_at, sid) <= through


def _window(profile: LearnerProfile, f: SessionFigures, size: int) -> dict[str, object]:
    """The window of sessions counted and its bound, after `f`."""
    window = (*profile.latest_sessions, (f.created_at, f.session_id))
    through = profile.counted_through
    if len(window) > size:
        left = max(window[:-size])
        through = left if through is None else max(through, left)
        window = window[-size:]
    return {"latest_sessions": window, "counted_through": through}


def fold(profile: LearnerProfile | None, figures: SessionFigures, *, window: int = SESSION_WINDOW) -> LearnerProfile:
    """The profile after one more ended session (unchanged if that session was folded in already).
    `window`: the sessions whose ids the profile keeps (the tests try smaller ones)."""
    if profile is not None and counted(profile, figures):
        return profile
    return add(profile, figures, window=window)


def add(profile: LearnerProfile | None, figures: SessionFigures, *, window: int = SESSION_WINDOW) -> LearnerProfile:
    """The profile after a session the caller knows is not folded in yet."""
    if profile is None:
        profile = LearnerProfile(
            learner_id=figures.learner_id, level=figures.level, input_language=figures.input_language,
            target_language=figures.target_language, first_at=figures.created_at,
        )
    recent = (*profile.recent_slips, tuple(sorted(set(figures.slips))))[-RECENT:]
    slips = dict(profile.slips)
    for slip in set(figures.slips):
        slips[slip] = slips.get(slip, 0) + 1
    languages = profile.languages
    if figures.target_language not in languages:
        languages = (*languages, figures.target_language)
    scenarios = dict(profile.scenarios)
    scenarios[figures.scenario] = _scenario_record(scenarios.get(figures.scenario), figures)
    contested = _contested(profile, figures)
    level = contested.get("level", profile.level)
    assert isinstance(level, Level)
    pending = contested["pending"]
    assert isinstance(pending, dict)
    estimated = _estimated(level, pending, figures)
    if estimated is not None:
        contested["level"] = estimated
        pending.pop("level", None)  # the evidence settled it
    return profile.model_copy(update={
        **contested,
        **_window(profile, figures, window),
        "languages": languages,
        "sessions": profile.sessions + 1,
        "scenarios": scenarios,
        "best_discounts": _best(profile.best_discounts, figures),
        "slips": slips,
        "recent_slips": recent,
        "recurring_slips": _recurring(recent),
        "last_at": max(profile.last_at, figures.ended_at),
    })


def recall(profile: LearnerProfile | None, scenario: str, usual_happiness: int,
           version: int = 1) -> LearnerRecall | None:
    """What the vendor of `scenario` remembers of the learner: None if they never played at his
    stall. The starting mood follows the last outcome there, within the pack's bounds."""
    if profile is None:
        return None
    record = profile.scenarios.get(scenario)
    if record is None:
        return None
    start = load_scenario(scenario, version).returning.start_happiness(usual_happiness, record.last_outcome)
    return LearnerRecall(
        sessions=record.played, last_outcome=record.last_outcome, last_item=record.last_item,
        last_paid=record.last_paid, last_first_quote=record.last_first_quote,
        last_discount_pct=record.last_discount_pct, recurring_slips=profile.recurring_slips,
        start_happiness=start,
    )


def progress_point(f: SessionFigures) -> ProgressPoint:
    """A session as a point of the progress series (the in-memory store's; Neo4j computes its own)."""
    return ProgressPoint(
        session_id=f.session_id, scenario=f.scenario, at=f.created_at, level=f.level, outcome=f.outcome,
        item=f.item, turns=f.turns, turns_to_deal=f.turns_to_deal, discount_pct=f.discount_pct, score=f.score,
        hints=sum(f.hints), hints_by_level=f.hints,
        **({"words_per_minute": f.fluency.words_per_minute, "pause_ratio": f.fluency.pause_ratio,
            "mean_length_of_run": f.fluency.mean_length_of_run, "fillers": f.fluency.fillers} if f.fluency else {}),
        **({"estimated_band": f.estimate.band, "estimate_confidence": f.estimate.confidence} if f.estimate else {}),
    )


def hint_points(series: Sequence[ProgressPoint]) -> list[HintPoint]:
    """The hints each session needed, at the level it was played at, from the progress series: the
    profile's `hints_by_level` as the learners API shows it (the profile no longer keeps it)."""
    return [HintPoint(session_id=p.session_id, at=p.at, level=p.level, hints=p.hints_by_level) for p in series]


def trend(scores: Sequence[int]) -> tuple[Trend, float | None]:
    """The trend of a learner's scores, oldest first, and the change in mean score behind it."""
    if len(scores) < 2:
        return "new", None
    latest = scores[-TREND_WINDOW:]
    before = scores[-2 * TREND_WINDOW:-TREND_WINDOW] if len(scores) > TREND_WINDOW else scores[:1]
    if len(scores) <= TREND_WINDOW:
        latest = scores[1:]
    delta = round(sum(latest) / len(latest) - sum(before) / len(before), 1)
    if delta >= TREND_STEP:
        return "improving", delta
    if delta <= -TREND_STEP:
        return "declining", delta
    return "steady", delta
