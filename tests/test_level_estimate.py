"""The level estimate of one session (issue #36): its places worked by hand, its properties, the
profile's two-session rule for it, and a played session's report and progress."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.enums import LanguageCode, Level, Outcome
from schemas.learner import SessionFigures
from schemas.report import LevelEstimate, LevelEvidence
from server.learners.profile import CONFIDENT, ESTIMATED, fold
from session.level_estimate import from_evidence, places, target_vocabulary


def evidence(**given: object) -> LevelEvidence:
    base: dict[str, object] = {"learner_turns": 6, "mean_words": 5.0, "target_share": None, "hints_per_turn": 0.0,
                               "repairs_per_turn": 0.0, "words_per_minute": None}
    return LevelEvidence.model_validate({**base, **given})


def test_a_session_placed_by_hand() -> None:
    # 5 words a line: B1 (2); half the words in the target language: B1 (2); 0.3 hints a line: B1 (2);
    # no repair: C1 (4); 100 words a minute: B1 (2). Mean 2.4: B1, intermediate.
    got = from_evidence(evidence(target_share=0.5, hints_per_turn=0.3, words_per_minute=100.0))
    assert places(got.evidence) == [2, 2, 4, 2, 2]
    assert (got.band, got.level) == ("B1", Level.INTERMEDIATE)
    # Confidence: 6 lines give 6 / 10 = 0.6; the places' standard deviation is 0.8, so they agree
    # 1 - 0.8 / 2 = 0.6: 0.36.
    assert got.confidence == 0.36


def test_a_beginner_and_an_advanced_learner_by_hand() -> None:
    low = from_evidence(evidence(mean_words=2.0, hints_per_turn=1.5, repairs_per_turn=0.6, learner_turns=4))
    assert places(low.evidence) == [0, 0, 0] and (low.band, low.level, low.confidence) == ("A1", Level.BEGINNER, 0.5)
    high = from_evidence(evidence(mean_words=10.0, target_share=0.9, learner_turns=12))
    assert places(high.evidence) == [4, 4, 4, 4] and (high.band, high.level, high.confidence) == (
        "C1", Level.ADVANCED, 0.75)


shares = st.none() | st.floats(0, 1)
rates = st.none() | st.floats(20, 250)


@given(st.integers(1, 40), st.floats(0, 20), shares, st.floats(0, 3), st.floats(0, 2), rates, st.floats(0, 3))
def test_more_hints_never_raise_the_band(turns: int, words: float, share: float | None, hints: float,
                                         repairs: float, rate: float | None, more: float) -> None:
    a = from_evidence(evidence(learner_turns=turns, mean_words=words, target_share=share, hints_per_turn=hints,
                               repairs_per_turn=repairs, words_per_minute=rate))
    b = from_evidence(evidence(learner_turns=turns, mean_words=words, target_share=share,
                               hints_per_turn=hints + more, repairs_per_turn=repairs, words_per_minute=rate))
    assert b.band <= a.band  # "A1" < "A2" < "B1" < "B2" < "C1"
    assert 0.0 <= a.confidence <= 1.0


@given(st.integers(1, 40), st.floats(0, 20), st.floats(0, 10), shares, st.floats(0, 3))
def test_longer_lines_never_lower_the_band_and_more_lines_never_lower_the_confidence(
        turns: int, words: float, longer: float, share: float | None, hints: float) -> None:
    a = from_evidence(evidence(learner_turns=turns, mean_words=words, target_share=share, hints_per_turn=hints))
    b = from_evidence(evidence(learner_turns=turns, mean_words=words + longer, target_share=share,
                               hints_per_turn=hints))
    c = from_evidence(evidence(learner_turns=turns + 5, mean_words=words, target_share=share, hints_per_turn=hints))
    assert b.band >= a.band and c.confidence >= a.confidence and c.band == a.band


def test_the_packs_languages_share_no_word() -> None:
    for pack, local in (("jaipur-bazaar", LanguageCode.HI_EN), ("kyoto-antiques", LanguageCode.JA_JP)):
        words = target_vocabulary(pack, 1)
        assert words[local] and words[LanguageCode.EN_IN] and not words[local] & words[LanguageCode.EN_IN]
    jaipur = target_vocabulary("jaipur-bazaar", 1)
    assert {"kitne", "bahut"} <= jaipur[LanguageCode.HI_EN] and "expensive" in jaipur[LanguageCode.EN_IN]


def figures(n: int, estimate: LevelEstimate | None, level: Level = Level.BEGINNER) -> SessionFigures:
    return SessionFigures(session_id=f"s{n}", learner_id="asha", scenario="jaipur-bazaar", level=level,
                          input_language=LanguageCode.EN_IN, target_language=LanguageCode.HI_EN,
                          outcome=Outcome.DEAL, created_at=float(n), ended_at=float(n) + 0.5, estimate=estimate)


def said(level: Level, confidence: float) -> LevelEstimate:
    band = {Level.BEGINNER: "A2", Level.INTERMEDIATE: "B1", Level.ADVANCED: "B2"}[level]
    return LevelEstimate.model_validate({"band": band, "level": level, "confidence": confidence,
                                         "evidence": evidence().model_dump()})


def test_the_confirmed_level_moves_on_two_confident_estimates_in_a_row() -> None:
    # Each session is created without a level, so it plays at the profile's confirmed one.
    profile = fold(None, figures(1, said(Level.BEGINNER, 0.9)))
    assert profile.level is Level.BEGINNER and ESTIMATED not in profile.pending

    def then(n: int, estimate: LevelEstimate) -> None:
        nonlocal profile
        profile = fold(profile, figures(n, estimate, profile.level))

    then(2, said(Level.INTERMEDIATE, 0.7))
    assert profile.level is Level.BEGINNER and profile.pending[ESTIMATED].sessions == 1
    then(3, said(Level.ADVANCED, CONFIDENT - 0.01))  # not sure enough: no evidence either way
    assert profile.pending[ESTIMATED].value == "intermediate" and profile.pending[ESTIMATED].sessions == 1
    then(4, said(Level.INTERMEDIATE, CONFIDENT))
    assert profile.level is Level.INTERMEDIATE and ESTIMATED not in profile.pending
    then(5, said(Level.ADVANCED, 0.8))
    then(6, said(Level.INTERMEDIATE, 0.8))  # its own level again: the run is over
    assert profile.level is Level.INTERMEDIATE and ESTIMATED not in profile.pending
    then(7, said(Level.ADVANCED, 0.8))
    then(8, said(Level.BEGINNER, 0.8))  # another level: the count starts again
    assert profile.level is Level.INTERMEDIATE and profile.pending[ESTIMATED].value == "beginner"
    assert profile.pending[ESTIMATED].sessions == 1 and profile.pending[ESTIMATED].since_session == "s8"


@pytest.mark.anyio
async def test_a_played_sessions_report_and_progress_carry_its_estimate() -> None:
    from tests.servers import create, running_server
    from tests.test_learners_api import ADMIN, DEAL, api, play, profile_after

    async with running_server(ADMIN_KEY=ADMIN) as served:
        created = await create(served, learner_id="tara")
        frames = await play(served, created, DEAL)
        got = next(f for f in frames if f["type"] == "session.report")["report"]["estimate"]
        # DEAL's four lines have 2 + 6 + 6 + 4 words; no hint, no repair, typed.
        assert got["evidence"]["learner_turns"] == 4 and got["evidence"]["mean_words"] == 4.5
        assert (got["evidence"]["hints_per_turn"], got["evidence"]["repairs_per_turn"]) == (0.0, 0.0)
        assert got["evidence"]["words_per_minute"] is None
        assert got == from_evidence(LevelEvidence.model_validate(got["evidence"])).model_dump(mode="json")
        [point] = (await profile_after(served, "tara", 1))["progress"]
        assert (point["estimated_band"], point["estimate_confidence"]) == (got["band"], got["confidence"])
        page = await api(served, "GET", point["report_url"], None)
        assert f'data-band="{got["band"]}"' in page.text and "Estimated level this session" in page.text


@given(st.lists(st.integers(min_value=0, max_value=8), max_size=5))
def test_the_kept_spread_of_places_is_their_population_standard_deviation(found: list[int]) -> None:
    from session.level_estimate import _spread

    expected = statistics.pstdev(found) if len(found) > 1 else 0.0
    assert _spread(tuple(found)) == expected
    assert _spread(tuple(found)) == expected  # and again, from what was kept
