"""The learner profile as a fold of sessions (server/learners/profile.py): contradictions held as
pending until confirmed, recurring slips, best discounts, what a vendor remembers, the trend, and
the in-memory store."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.enums import LanguageCode, Level, Outcome
from schemas.learner import SessionFigures
from schemas.scenario import load_scenario
from server.learners.profile import fold, hint_points, recall, trend
from server.learners.store import MemoryLearnerStore


def figures(n: int, **changes: Any) -> SessionFigures:
    values: dict[str, Any] = {
        "session_id": f"s{n}", "learner_id": "asha", "scenario": "jaipur-bazaar", "level": Level.BEGINNER,
        "input_language": LanguageCode.EN_IN, "target_language": LanguageCode.HI_IN, "outcome": Outcome.DEAL,
        "item": "Tomato", "turns": 4, "first_quote": 150, "paid": 70, "discount_pct": 53.3, "score": 60,
        "hints": (1, 0, 0), "slips": (), "created_at": 1000.0 * n, "ended_at": 1000.0 * n + 60,
    }
    return SessionFigures(**{**values, **changes})


def folded(*sessions: SessionFigures) -> Any:
    profile = None
    for f in sessions:
        profile = fold(profile, f)
    assert profile is not None
    return profile


def test_the_first_session_sets_the_profile() -> None:
    p = folded(figures(1))
    assert (p.level, p.input_language, p.target_language) == (Level.BEGINNER, LanguageCode.EN_IN, LanguageCode.HI_IN)
    assert p.pending == {} and p.sessions == 1 and p.languages == (LanguageCode.HI_IN,)
    record = p.scenarios["jaipur-bazaar"]
    assert (record.played, record.last_outcome, record.last_item, record.last_paid) == (1, Outcome.DEAL, "Tomato", 70)


def test_one_unusual_session_is_held_as_pending_and_does_not_overwrite_the_level() -> None:
    p = folded(figures(1), figures(2, level=Level.ADVANCED))
    assert p.level is Level.BEGINNER
    assert p.pending["level"].value == "advanced" and p.pending["level"].sessions == 1
    assert p.pending["level"].since_session == "s2"


def test_a_second_session_in_a_row_confirms_the_new_level() -> None:
    p = folded(figures(1), figures(2, level=Level.ADVANCED), figures(3, level=Level.ADVANCED))
    assert p.level is Level.ADVANCED and "level" not in p.pending


def test_a_session_back_at_the_profile_value_drops_what_was_pending() -> None:
    p = folded(figures(1), figures(2, level=Level.ADVANCED), figures(3), figures(4, level=Level.ADVANCED))
    assert p.level is Level.BEGINNER  # advanced twice, but not in a row
    assert p.pending["level"].sessions == 1 and p.pending["level"].since_session == "s4"


def test_a_third_value_starts_the_count_again() -> None:
    p = folded(figures(1), figures(2, level=Level.ADVANCED), figures(3, level=Level.INTERMEDIATE))
    assert p.level is Level.BEGINNER and p.pending["level"].value == "intermediate"
    assert p.pending["level"].sessions == 1


def test_languages_follow_the_same_rule_and_every_language_practised_is_listed() -> None:
    p = folded(figures(1), figures(2, target_language=LanguageCode.KN_IN))
    assert p.target_language is LanguageCode.HI_IN and p.pending["target_language"].value == "kn-IN"
    assert p.languages == (LanguageCode.HI_IN, LanguageCode.KN_IN)
    p = fold(p, figures(3, target_language=LanguageCode.KN_IN))
    assert p.target_language is LanguageCode.KN_IN and p.pending == {}


def test_a_session_is_folded_in_once() -> None:
    once = folded(figures(1))
    assert fold(once, figures(1)) is once


def test_slips_recur_when_two_of_the_latest_five_sessions_had_them() -> None:
    p = folded(figures(1, slips=("lowball",)), figures(2, slips=("no_respect",)))
    assert p.recurring_slips == ()
    p = fold(p, figures(3, slips=("lowball", "insult")))
    assert p.recurring_slips == ("lowball",) and p.slips == {"lowball": 2, "no_respect": 1, "insult": 1}
    for n in range(4, 8):  # four clean sessions: the lowballs leave the window of five
        p = fold(p, figures(n))
    assert p.recurring_slips == () and p.slips["lowball"] == 2


def test_the_best_discount_per_item_is_kept() -> None:
    p = folded(figures(1, discount_pct=40.0, paid=90), figures(2, discount_pct=53.3, paid=70),
               figures(3, discount_pct=20.0, paid=120), figures(4, item="Mango", discount_pct=10.0, paid=180),
               figures(5, outcome=Outcome.WALKED_AWAY, paid=None, discount_pct=None))
    best = {(b.item, b.discount_pct, b.paid, b.session_id) for b in p.best_discounts}
    assert best == {("Tomato", 53.3, 70, "s2"), ("Mango", 10.0, 180, "s4")}


@pytest.mark.anyio
async def test_hints_are_kept_per_session_with_the_level_they_were_played_at() -> None:
    """In the progress series, not the profile, which is read at every session's start and end."""
    store = MemoryLearnerStore()
    await store.record(figures(1, hints=(2, 1, 1)))
    await store.record(figures(2, level=Level.ADVANCED, hints=(0, 0, 1)))
    points = hint_points(await store.progress("asha"))
    assert [(h.session_id, h.at, h.level, h.hints) for h in points] == [
        ("s1", 1000.0, Level.BEGINNER, (2, 1, 1)), ("s2", 2000.0, Level.ADVANCED, (0, 0, 1))]


def test_the_vendor_remembers_only_his_own_stall_and_the_start_follows_the_last_outcome() -> None:
    bounds = load_scenario("jaipur-bazaar").returning
    p = folded(figures(1))
    remembered = recall(p, "jaipur-bazaar", 50)
    assert remembered is not None and remembered.last_paid == 70 and remembered.sessions == 1
    assert remembered.start_happiness == 50 + bounds.start_offset[Outcome.DEAL]
    assert recall(p, "kyoto-antiques", 50) is None  # Tanaka-san never met her
    p = fold(p, figures(2, outcome=Outcome.WALKED_AWAY, paid=None, discount_pct=None))
    walked = recall(p, "jaipur-bazaar", 50)
    assert walked is not None and walked.start_happiness == 50 + bounds.start_offset[Outcome.WALKED_AWAY]
    assert walked.sessions == 2 and walked.last_outcome is Outcome.WALKED_AWAY


def test_the_start_never_leaves_the_packs_bounds() -> None:
    returning = load_scenario("jaipur-bazaar").returning
    low, high = returning.start_bounds
    assert returning.start_happiness(high, Outcome.DEAL) == high
    assert returning.start_happiness(low, Outcome.WALKED_AWAY) == low
    assert returning.start_happiness(50, None) == 50


@pytest.mark.parametrize(("scores", "expected"), [
    ([], ("new", None)),
    ([40], ("new", None)),
    ([40, 50], ("improving", 10.0)),
    ([40, 42, 41], ("steady", 1.5)),
    ([70, 60, 50, 40, 30, 20], ("declining", -30.0)),
    ([10, 20, 30, 40, 50, 60, 70], ("improving", 30.0)),  # 50, 60, 70 against 20, 30, 40
])
def test_trend(scores: list[int], expected: tuple[str, float | None]) -> None:
    assert trend(scores) == expected


@pytest.mark.anyio
async def test_the_memory_store_folds_lists_and_erases() -> None:
    store = MemoryLearnerStore()
    await store.record(figures(2, score=70))
    await store.record(figures(1, score=50))
    await store.record(figures(1, score=50))  # again: nothing changes
    await store.record(figures(3, learner_id="ravi", score=30))
    profile = await store.get("asha")
    assert profile is not None and profile.sessions == 2
    series = await store.progress("asha")
    assert [(p.session_id, p.score, p.turns_to_deal, p.discount_pct, p.hints) for p in series] == [
        ("s1", 50, 4, 53.3, 1), ("s2", 70, 4, 53.3, 1)]  # ordered by when the sessions started
    rows = {row.learner_id: row for row in await store.learners()}
    assert rows["asha"].trend == "improving" and rows["asha"].latest is not None
    assert rows["asha"].latest.session_id == "s2" and rows["ravi"].trend == "new"
    assert [row.learner_id for row in await store.learners()] == ["ravi", "asha"]  # latest activity first
    assert await store.erase("asha") is True
    assert await store.get("asha") is None and await store.progress("asha") == []
    assert await store.erase("asha") is False
