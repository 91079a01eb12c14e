"""The pure coaching core: undo restores the exact state (a property), hints change nothing and
follow the situation, learner levels come from the pack, the timer heap and the end by silence."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.rules_vendor import RuleBasedVendor
from schemas.enums import Level, OfferAssessment, Outcome, Stage
from schemas.frames import Reply, SessionEnded, SessionReport, StageChanged
from schemas.scenario import available_scenarios, load_scenario
from session.ending import end_now
from session.hints import build_hint, situation
from session.negotiation import CLOSING_LINES, Negotiation
from session.rules import LOWBALL_MIN_DROP
from session.silence import silence_passed, welcome_back_reply
from tests.fakes import decision

VENDOR = RuleBasedVendor()
LINES = ["Namaste bhaiya", "tamatar kitne ka hai?", "Bahut mehenga, 40 mein de do?", "60 rupees?",
         "thoda kam karo bhaiya", "80 final", "I'll give 20", "chalo, bye", "acha, 70?", "theek hai, pakka"]


def new(level: Level = Level.INTERMEDIATE, scenario: str = "jaipur-bazaar") -> Negotiation:
    return Negotiation(session_id="s1", scenario_name=scenario, created_at=1000.0, level=level)


def play(n: Negotiation, text: str, now: float = 1001.0) -> Any:
    pending = n.begin_turn(text, f"id-{n.turn + 1}-{len(n.history)}", now)
    return n.complete_turn(pending, VENDOR.propose_now(n.brain_request(pending)), now)


def state(n: Negotiation) -> dict[str, Any]:
    """Everything an undo restores (the seq, the cost and the clock excepted)."""
    snap = n.snapshot().model_dump()
    for key in ("seq", "updated_at", "ledger"):
        snap.pop(key)
    return {"snapshot": snap, "history": [(h.turn, h.role, h.text, h.quote, h.offer) for h in n.history],
            "changes": list(n.stage_changes), "quotes": dict(n.quotes), "first": dict(n.first_quotes),
            "insults": n.insults, "last_offer": n.last_offer}


@settings(max_examples=60, deadline=None)
@given(said=st.lists(st.sampled_from(LINES), min_size=1, max_size=8), back=st.integers(1, 4))
def test_undo_restores_exactly_what_each_turn_changed(said: list[str], back: int) -> None:
    n = new()
    before: list[dict[str, Any]] = []
    for text in said:
        if n.is_terminal:
            break
        before.append(copy.deepcopy(state(n)))
        play(n, text)
    if n.is_terminal:
        return  # undo is not possible after the end (the actor refuses it)
    seq = n.seq
    for i in range(back):
        point = n.undo(2000.0 + i)
        if i >= 3 or not before:
            assert point is None  # three in a row at most, and nothing before the first turn
            break
        assert point is not None and point.turn == len(before)
        assert state(n) == before.pop()
        seq += 1
        assert n.seq == seq  # an undo takes one seq, its `undo` event's; events are never erased
    assert n.coaching.undos == min(back, 3, len(said))


def test_hints_change_nothing_and_follow_the_situation() -> None:
    n = new()
    assert situation(n) == "greet"
    play(n, "Namaste bhaiya, tamatar kitne ka hai?")
    assert situation(n) == "open"
    frozen = copy.deepcopy(state(n))
    hints = [build_hint(n, 100 + level, level) for level in range(4)]
    assert [h.kind for h in hints] == ["contextual", "structural", "reveal", "reveal"]
    assert "____" in hints[1].text and "____" in hints[1].english
    assert hints[2].text == n.history[-1].suggestion and hints[2].english == n.history[-1].suggestion_english
    assert state(n) == frozen
    n.history[-1].suggestion = ""  # no brain suggestion (a rebuilt turn): the pack's line, filled in
    pack = build_hint(n, 200, 2)
    assert str(n.quote) not in pack.text and "{" not in pack.text and "{" not in pack.english


def test_every_pack_has_a_hint_for_every_situation_in_every_kind() -> None:
    for name in available_scenarios():
        pack = load_scenario(name)
        for key, help_ in pack.coaching.items():
            assert "____" in help_.frame and "____" in help_.frame_english, (name, key)
            fields = {"local": "x", "items": "xs", "offer": 1, "price": 2}
            assert pack.hints[key].format(**fields) and help_.english.format(**fields)


@pytest.mark.parametrize("scenario", available_scenarios())
def test_a_beginner_hears_one_sentence_and_a_gentler_lowball(scenario: str) -> None:
    pack = load_scenario(scenario)
    beginner = pack.levels[Level.BEGINNER]
    assert beginner.max_sentences == 1 and beginner.lowball_cost is not None
    n = new(Level.BEGINNER, scenario)
    assert n.rule_limits.lowball_min_drop == min(LOWBALL_MIN_DROP, beginner.lowball_cost)
    item = pack.items[0]
    pending = n.begin_turn(f"how much is the {item.name}?", "a", 1.0)
    long_line = "One. Two. Three. Four."
    out = n.complete_turn(pending, VENDOR.propose_now(n.brain_request(pending)).model_copy(
        update={"decision": decision(long_line, 50, Stage.INQUIRY, counter_price=item.opening_quote)}), 2.0)
    reply = out.events[0]
    assert reply.text == "One." and "too_long" in reply.flags  # type: ignore[union-attr]


def test_a_lowball_costs_a_beginner_less_than_an_intermediate() -> None:
    drops = {}
    for level in (Level.BEGINNER, Level.INTERMEDIATE):
        n = new(level)
        play(n, "Namaste bhaiya, tamatar kitne ka hai?")
        quote = n.quote
        assert quote is not None
        offer = int(quote * 0.3)  # a lowball by the pack's bands
        before = n.happiness
        out = play(n, f"{offer} rupees?")
        assert out.events[0].offer_assessment is OfferAssessment.LOWBALL
        drops[level] = before - n.happiness
    assert 0 < drops[Level.BEGINNER] < drops[Level.INTERMEDIATE]


def test_an_advanced_vendor_concedes_more_slowly() -> None:
    quotes = {}
    for level in (Level.INTERMEDIATE, Level.ADVANCED):
        n = new(level)
        play(n, "Namaste bhaiya, tamatar kitne ka hai?")
        play(n, "Thoda kam karo bhaiya, 60 mein de do?")
        quotes[level] = n.quote
    assert quotes[Level.ADVANCED] > quotes[Level.INTERMEDIATE]  # type: ignore[operator]


def test_nudges_and_welcome_back_change_nothing_but_the_seq() -> None:
    n = new()
    assert welcome_back_reply(n, 10_000.0, 7200) is None  # a new session is simply new
    play(n, "Namaste bhaiya, tamatar kitne ka hai?", now=1001.0)
    frozen = copy.deepcopy(state(n))
    [nudge] = silence_passed(n, 1100.0, None, 3, None)
    assert isinstance(nudge, Reply) and nudge.seq == n.seq
    assert nudge.mark == "nudge" and nudge.turn == 1 and nudge.counter_price == n.quote
    assert welcome_back_reply(n, 1100.0 + 7000, 7200) is None  # not long enough
    recap = welcome_back_reply(n, 1100.0 + 7300, 7200)
    assert recap is not None and recap.mark == "welcome_back" and str(n.quote) in recap.text
    assert state(n) == frozen and n.coaching.welcome_backs == 1 and n.coaching.timeouts == 1


def test_ending_by_silence_is_a_forced_closure() -> None:
    n = new()
    play(n, "Namaste bhaiya")
    changed, ended, report = end_now(n, 1200.0, Outcome.TIMED_OUT, None)
    assert isinstance(changed, StageChanged) and isinstance(ended, SessionEnded)
    assert isinstance(report, SessionReport) and report.seq == n.seq == ended.seq + 1
    assert changed.to is Stage.CLOSURE and changed.forced and ended.outcome is Outcome.TIMED_OUT
    assert n.is_terminal and n.summary() is not None and n.summary().outcome is Outcome.TIMED_OUT  # type: ignore[union-attr]


def test_a_line_cut_for_a_beginner_keeps_the_sentence_with_the_new_price() -> None:
    n = new(Level.BEGINNER)
    play(n, "Namaste bhaiya, tamatar kitne ka hai?")
    pending = n.begin_turn("Bahut mehenga, 50 rupees?", "b", 2.0)
    proposal = decision("Mehenga? Arre, these are the best. For you, 135 a kilo.", 50, Stage.HAGGLING,
                        counter_price=135)
    out = n.complete_turn(pending, VENDOR.propose_now(n.brain_request(pending)).model_copy(
        update={"decision": proposal}), 3.0)
    reply = out.events[0]
    assert reply.text == "For you, 135 a kilo." and "too_long" in reply.flags  # type: ignore[union-attr]
    assert reply.counter_price == 135  # type: ignore[union-attr]


def test_every_outcome_has_a_closing_line() -> None:
    assert set(CLOSING_LINES) == set(Outcome)
