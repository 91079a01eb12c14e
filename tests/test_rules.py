"""The rules engine: every legal and illegal transition, the clamps, and properties over random proposals."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import event, example, given, settings, target
from hypothesis import strategies as st

from schemas.decision import AIDecision
from schemas.enums import Mood, OfferAssessment, Stage
from schemas.flags import RULE_FLAGS
from session.rules import (
    INSULT_MIN_DROP,
    LOWBALL_MIN_DROP,
    TRANSITIONS,
    Limits,
    Position,
    is_legal,
    mood_for,
    validate,
)

LEGAL = {
    (Stage.GREETING, Stage.INQUIRY),
    (Stage.INQUIRY, Stage.HAGGLING),
    (Stage.INQUIRY, Stage.WALKAWAY),
    (Stage.HAGGLING, Stage.DEAL),
    (Stage.HAGGLING, Stage.WALKAWAY),
    (Stage.HAGGLING, Stage.CLOSURE),
    (Stage.WALKAWAY, Stage.HAGGLING),
    (Stage.WALKAWAY, Stage.CLOSURE),
}
NON_TERMINAL = [s for s in Stage if not s.is_terminal]


def proposal(stage: Stage, happiness: int = 60, **extra: object) -> AIDecision:
    """A proposal whose mood is the one its own score gives, as a consistent brain proposes."""
    extra.setdefault("vendor_mood", mood_for(happiness))
    return AIDecision(reply_text="Hmm.", happiness_score=happiness, negotiation_state=stage,
                      **extra)  # type: ignore[arg-type]


def test_transition_table_is_exactly_the_seeds() -> None:
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert table == LEGAL


@pytest.mark.parametrize(("current", "proposed"), list(itertools.product(Stage, Stage)))
def test_every_pair_of_stages(current: Stage, proposed: Stage) -> None:
    position = Position(stage=current, happiness=55, turn=3, quote=None)
    verdict = validate(position, proposal(proposed, happiness=60))
    if current == proposed or (current, proposed) in LEGAL:
        assert is_legal(current, proposed)
        assert verdict.stage is proposed
        assert not any(o.rule == "illegal_transition" for o in verdict.overrides)
    else:
        assert not is_legal(current, proposed)
        assert verdict.stage is current
        assert [o.rule for o in verdict.overrides] == ["illegal_transition"]


@pytest.mark.parametrize(("before", "proposed", "expected"), [
    (45, 46, Stage.HAGGLING),  # 46 > 40: may come back
    (45, 41, Stage.HAGGLING),
    (45, 40, Stage.WALKAWAY),  # exactly 40 is not above 40
    (38, 35, Stage.WALKAWAY),
    (30, 45, Stage.HAGGLING),  # +15 stands: 45 > 40
])
def test_walkaway_reentry_needs_happiness_above_40_after_the_turn(
    before: int, proposed: int, expected: Stage
) -> None:
    verdict = validate(Position(stage=Stage.WALKAWAY, happiness=before, turn=5, quote=None),
                       proposal(Stage.HAGGLING, happiness=proposed))
    assert verdict.stage is expected
    denied = any(o.rule == "walkaway_reentry_happiness" for o in verdict.overrides)
    assert denied == (expected is Stage.WALKAWAY)


def test_walkaway_reentry_is_judged_on_the_clamped_score_not_the_proposal() -> None:
    verdict = validate(Position(stage=Stage.WALKAWAY, happiness=20, turn=5, quote=None),
                       proposal(Stage.HAGGLING, happiness=90))
    assert verdict.happiness == 35
    assert verdict.stage is Stage.WALKAWAY  # not forced to CLOSURE either


def test_walkaway_reentry_denied_when_the_insult_drop_pulls_happiness_down() -> None:
    position = Position(stage=Stage.WALKAWAY, happiness=45, turn=6, quote=100, learner_offer=10,
                        server_assessment=OfferAssessment.INSULT)
    verdict = validate(position, proposal(Stage.HAGGLING, happiness=50))
    assert verdict.happiness == 45 - INSULT_MIN_DROP
    assert verdict.stage is Stage.WALKAWAY


@pytest.mark.parametrize(("start", "proposed", "applied"), [
    (50, 90, 65), (50, 10, 35), (95, 100, 100), (5, 0, 0), (50, 60, 60), (50, 50, 50),
])
def test_happiness_moves_at_most_15_and_stays_in_range(start: int, proposed: int, applied: int) -> None:
    verdict = validate(Position(stage=Stage.GREETING, happiness=start, turn=1, quote=None),
                       proposal(Stage.GREETING, happiness=proposed))
    assert verdict.happiness == applied
    assert verdict.delta == applied - start


def test_max_mood_delta_comes_from_limits() -> None:
    verdict = validate(Position(stage=Stage.GREETING, happiness=50, turn=1, quote=None),
                       proposal(Stage.GREETING, happiness=80), Limits(max_mood_delta=5))
    assert verdict.happiness == 55


@pytest.mark.parametrize(("score", "mood"), [
    (0, Mood.ANGRY), (20, Mood.ANGRY), (21, Mood.ANNOYED), (40, Mood.ANNOYED), (41, Mood.NEUTRAL),
    (60, Mood.NEUTRAL), (61, Mood.FRIENDLY), (80, Mood.FRIENDLY), (81, Mood.ENTHUSIASTIC),
    (100, Mood.ENTHUSIASTIC),
])
def test_mood_bands(score: int, mood: Mood) -> None:
    assert mood_for(score) is mood


def test_mood_is_derived_never_taken_from_the_proposal() -> None:
    bad = AIDecision(reply_text="Wonderful!", happiness_score=10, negotiation_state=Stage.GREETING,
                     vendor_mood=Mood.ENTHUSIASTIC)
    verdict = validate(Position(stage=Stage.GREETING, happiness=20, turn=1, quote=None), bad)
    assert verdict.mood is Mood.ANGRY


@pytest.mark.parametrize(("assessment", "drop"), [
    (OfferAssessment.INSULT, INSULT_MIN_DROP), (OfferAssessment.LOWBALL, LOWBALL_MIN_DROP),
])
def test_server_judged_insults_and_lowballs_cost_a_minimum(assessment: OfferAssessment, drop: int) -> None:
    position = Position(stage=Stage.HAGGLING, happiness=60, turn=4, quote=100, learner_offer=20,
                        server_assessment=assessment)
    verdict = validate(position, proposal(Stage.HAGGLING, happiness=70, offer_assessment=OfferAssessment.FAIR))
    assert verdict.happiness == 60 - drop
    assert verdict.assessment is assessment
    assert {o.rule for o in verdict.overrides} >= {"offer_assessment", f"{assessment.value}_min_drop"}


def test_a_bigger_drop_than_the_minimum_stands() -> None:
    position = Position(stage=Stage.HAGGLING, happiness=60, turn=4, quote=100, learner_offer=20,
                        server_assessment=OfferAssessment.INSULT)
    assert validate(position, proposal(Stage.HAGGLING, happiness=46)).happiness == 46


def test_the_brains_label_counts_only_without_a_server_number() -> None:
    position = Position(stage=Stage.HAGGLING, happiness=60, turn=4, quote=100)
    verdict = validate(position, proposal(Stage.HAGGLING, happiness=62, offer_assessment=OfferAssessment.LOWBALL))
    assert verdict.assessment is OfferAssessment.LOWBALL
    assert verdict.happiness == 60 - LOWBALL_MIN_DROP


def test_quotes_only_fall_while_haggling_and_a_rise_is_flagged() -> None:
    position = Position(stage=Stage.HAGGLING, happiness=60, turn=4, quote=100, floor=35)
    verdict = validate(position, proposal(Stage.HAGGLING, counter_price=120))
    assert verdict.quote == 100
    assert "quote_rise" in verdict.flags
    assert any(o.rule == "quote_rise" and o.proposed == 120 and o.applied == 100 for o in verdict.overrides)
    assert validate(position, proposal(Stage.HAGGLING, counter_price=90)).quote == 90


def test_a_quote_may_rise_before_haggling_begins() -> None:
    position = Position(stage=Stage.GREETING, happiness=60, turn=1, quote=100)
    assert validate(position, proposal(Stage.INQUIRY, counter_price=150)).quote == 150


def test_no_quote_below_the_floor() -> None:
    position = Position(stage=Stage.HAGGLING, happiness=60, turn=4, quote=100, floor=35)
    verdict = validate(position, proposal(Stage.HAGGLING, counter_price=20))
    assert verdict.quote == 35
    assert "below_floor" in verdict.flags


@pytest.mark.parametrize("stage", NON_TERMINAL)
def test_the_last_turn_forces_closure(stage: Stage) -> None:
    verdict = validate(Position(stage=stage, happiness=50, turn=30, quote=None), proposal(stage))
    assert verdict.stage is Stage.CLOSURE and verdict.forced_closure and verdict.is_terminal


def test_a_valid_deal_on_the_last_turn_stands() -> None:
    verdict = validate(Position(stage=Stage.HAGGLING, happiness=50, turn=30, quote=60), proposal(Stage.DEAL))
    assert verdict.stage is Stage.DEAL and not verdict.forced_closure


def test_an_illegal_deal_on_the_last_turn_still_closes() -> None:
    verdict = validate(Position(stage=Stage.INQUIRY, happiness=50, turn=30, quote=60), proposal(Stage.DEAL))
    assert verdict.stage is Stage.CLOSURE


def test_terminal_stages_stay_terminal() -> None:
    for stage in (Stage.DEAL, Stage.CLOSURE):
        for proposed in Stage:
            verdict = validate(Position(stage=stage, happiness=50, turn=5, quote=None), proposal(proposed))
            assert verdict.stage is stage


decisions = st.builds(
    AIDecision,
    reply_text=st.just("Okay."),
    happiness_score=st.integers(0, 100),
    negotiation_state=st.sampled_from(list(Stage)),
    vendor_mood=st.sampled_from(list(Mood)),
    counter_price=st.one_of(st.none(), st.integers(0, 1000)),
    offer_assessment=st.sampled_from(list(OfferAssessment)),
)


# Random proposals end a session early (a legal DEAL or CLOSURE is terminal), so with the default 30
# turns the limit was never reached. The limit is drawn too (1 to 30), `target` steers towards the
# sessions that last, the examples play every turn of a default session, and `event` shows in
# `pytest --hypothesis-show-statistics` how often the limit's branch ran.
STAY = AIDecision(reply_text="Okay.", happiness_score=50, negotiation_state=Stage.GREETING,
                  vendor_mood=Mood.NEUTRAL, offer_assessment=OfferAssessment.FAIR)


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(0, 100),
    floor=st.one_of(st.none(), st.integers(1, 200)),
    steps=st.lists(st.tuples(decisions, st.sampled_from(list(OfferAssessment))), max_size=40),
    max_turns=st.integers(1, 30),
)
@example(start=50, floor=None, steps=[(STAY, OfferAssessment.FAIR)] * 30, max_turns=30)
@example(start=95, floor=10, steps=[(STAY.model_copy(update={"happiness_score": 100}), OfferAssessment.FAIR)] * 31,
         max_turns=30)
def test_no_sequence_of_proposals_breaks_an_invariant(
    start: int, floor: int | None, steps: list[tuple[AIDecision, OfferAssessment]], max_turns: int
) -> None:
    limits = Limits(max_turns=max_turns)
    stage, happiness, quote = Stage.GREETING, start, None
    played = 0
    for turn, (decision, server_assessment) in enumerate(steps, start=1):
        if stage.is_terminal:
            break
        played = turn
        position = Position(stage=stage, happiness=happiness, turn=turn, quote=quote,
                            floor=floor, server_assessment=server_assessment)
        verdict = validate(position, decision, limits)
        assert 0 <= verdict.happiness <= 100
        assert abs(verdict.happiness - happiness) <= limits.max_mood_delta
        assert verdict.mood is mood_for(verdict.happiness)
        assert verdict.stage == stage or verdict.stage in TRANSITIONS[stage] or verdict.forced_closure
        if stage is Stage.WALKAWAY and verdict.stage is Stage.HAGGLING:
            assert verdict.happiness > 40
        if server_assessment is OfferAssessment.INSULT:
            assert verdict.happiness <= max(0, happiness - 10) or verdict.happiness == 0
        if server_assessment is OfferAssessment.LOWBALL:
            assert verdict.happiness <= max(0, happiness - 6)
        if Stage.HAGGLING in (stage, verdict.stage) and quote is not None and verdict.quote is not None:
            assert verdict.quote <= quote
        if floor is not None and verdict.quote is not None:
            assert verdict.quote >= floor
        if turn >= limits.max_turns:
            event("reached the turn limit")
            assert verdict.is_terminal
            assert verdict.stage is Stage.DEAL or (verdict.stage is Stage.CLOSURE and (
                verdict.forced_closure or decision.negotiation_state is Stage.CLOSURE))
        else:
            assert not verdict.forced_closure
        # Every clamp reaches the clients as a flag named by its rule, and each has plain words.
        assert verdict.flags == tuple(dict.fromkeys(o.rule for o in verdict.overrides))
        assert set(verdict.flags) <= set(RULE_FLAGS)
        stage, happiness, quote = verdict.stage, verdict.happiness, verdict.quote
    event("more than 13 turns played" if played > 13 else "at most 13 turns played")
    target(played / max_turns, label="share of the turn limit played")
    target(played, label="turns played")


def test_a_quote_cannot_rise_while_the_learner_is_walking_away() -> None:
    position = Position(stage=Stage.WALKAWAY, happiness=45, turn=6, quote=90)
    verdict = validate(position, proposal(Stage.WALKAWAY, counter_price=120))
    assert verdict.quote == 90 and "quote_rise" in verdict.flags


@pytest.mark.parametrize(("happiness", "assessment"), [(7, OfferAssessment.INSULT), (3, OfferAssessment.LOWBALL)])
def test_a_minimum_drop_takes_what_is_left_and_no_more(happiness: int, assessment: OfferAssessment) -> None:
    """An insult at 7 (or a lowball at 3) goes to 0: nothing to override, nothing below the range."""
    position = Position(stage=Stage.HAGGLING, happiness=happiness, turn=5, quote=150, learner_offer=1,
                        server_assessment=assessment)
    verdict = validate(position, proposal(Stage.HAGGLING, happiness=0, offer_assessment=assessment))
    assert verdict.happiness == 0 and verdict.overrides == ()
    too_soft = validate(position, proposal(Stage.HAGGLING, happiness=happiness - 1, offer_assessment=assessment))
    assert too_soft.happiness == 0 and [o.rule for o in too_soft.overrides] == [f"{assessment.value}_min_drop"]


def test_every_rule_of_the_engine_has_plain_words() -> None:
    """Each `Override` the engine can make is named in schemas/flags.py (read from the source, so a
    new rule without words fails here)."""
    import re
    from pathlib import Path

    source = (Path(__file__).parent.parent / "session" / "rules.py").read_text()
    named = set(re.findall(r'Override\("(\w+)"', source))
    named |= {f"{a.value}_min_drop" for a in (OfferAssessment.INSULT, OfferAssessment.LOWBALL)}
    assert len(named) >= 10
    assert named == set(RULE_FLAGS)


def test_an_unsure_reading_sets_the_brains_insult_aside() -> None:
    """The server read a number but could not place it: no insult label, no insult clamp."""
    position = Position(stage=Stage.HAGGLING, happiness=60, turn=4, quote=18000, offer_unsure=True)
    verdict = validate(position, proposal(Stage.HAGGLING, happiness=58, offer_assessment=OfferAssessment.INSULT))
    assert verdict.assessment is OfferAssessment.NONE and verdict.happiness == 58
    assert {o.rule for o in verdict.overrides} == {"offer_assessment"}
    sure = validate(Position(stage=Stage.HAGGLING, happiness=60, turn=4, quote=18000),
                    proposal(Stage.HAGGLING, happiness=58, offer_assessment=OfferAssessment.INSULT))
    assert sure.assessment is OfferAssessment.INSULT and sure.happiness == 60 - INSULT_MIN_DROP
