"""The pieces behind the rule-based vendor: cue words, lines, prices, and the personas' words."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.intents import Cue, _tables, read_intents
from brain.rules_vendor import acceptable_price, mood_band
from clients.bots.personas import (
    EXPECTED_OUTCOMES,
    HINDI_PRICES,
    PERSONAS,
    SCENE_ITEMS,
    LearnerView,
)
from schemas.codec import event_dict
from schemas.enums import Mood, Stage
from schemas.frames import Reply
from schemas.lines import say, spoken_items
from schemas.policy import round_price
from schemas.scenario import available_scenarios, load_scenario
from session.offers import parse_offer
from session.rules import mood_for
from session.spoken import speakable

SCENARIO = load_scenario("jaipur-bazaar")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Namaste bhaiya!", {"greeting", "polite"}),
        ("Bhaiya, ye kitne ka hai?", {"polite", "inquiry"}),
        ("How much for the apples?", {"inquiry"}),
        ("Bahut mehenga hai, thoda kam karo", {"pushback"}),
        ("Chalo, rehne do", {"walk"}),
        ("chalo", {"walk"}),
        ("Chalo, theek hai, pakka", {"accept", "reengage"}),
        ("OK I'll take it", {"accept", "reengage"}),
        ("No deal, I'm going to another shop", {"walk"}),
        ("I'm done", {"walk"}),
        ("You are a chor! Rotten tomatoes", {"rude"}),
        ("These look so fresh", {"compliment"}),
        ("wait, ok ok", {"reengage"}),
        ("Cash dunga", {"cash"}),
        ("hmm", set()),
    ],
)
def test_cue_words(text: str, expected: set[str]) -> None:
    said = read_intents(text)
    flags = {"greeting", "polite", "inquiry", "pushback", "walk", "accept", "rude",
             "compliment", "reengage", "cash"}
    assert {f for f in flags if getattr(said, f)} == expected


@pytest.mark.parametrize(("text", "kilos"), [("Do kilo le raha hoon", 2), ("3 kg please", 3),
                                               ("ek kilo", 1), ("tamatar", 1), ("2kg", 2)])
def test_quantities(text: str, kilos: int) -> None:
    said = read_intents(text)
    assert said.quantity == kilos and said.bulk is (kilos > 1)


def test_whole_word_mentions() -> None:
    said = read_intents("Sahi daam lagao, hari mirch bhi")
    assert said.mentions("hari mirch") and not said.mentions("aam")


@pytest.mark.parametrize("pack", available_scenarios())
def test_every_line_of_every_pack_is_short_and_speakable_for_every_item(pack: str) -> None:
    scenario = load_scenario(pack)
    for language, pools in scenario.lines.items():
        for key, pool in pools.items():
            for index in range(len(pool)):
                for item in (*scenario.items, None):
                    text = say(scenario, language, key, index, item, price=1234, offer=999, qty=2, heard="seventy",
                               last_items=spoken_items(item, scenario))
                    assert len(text) <= 240, text
                    assert speakable(text) == (text, ()), text  # two sentences at most, no markup
                    assert text[-1] in ".!?" and not re.search(r"[*#\n{}_`]", text), text


def test_lines_vary_with_the_turn() -> None:
    item = SCENARIO.item("Tomato")
    assert len({say(SCENARIO, None, "callback", turn, item, price=90) for turn in range(3)}) == 3


# The seed's bands, worked out by hand: 0-20 angry, 21-40 annoyed, 41-60 neutral, 61-80 friendly, 81-100
# enthusiastic (21 + 20 + 20 + 20 + 20 = 101 scores).
BANDS_BY_HAND = ([Mood.ANGRY] * 21 + [Mood.ANNOYED] * 20 + [Mood.NEUTRAL] * 20 + [Mood.FRIENDLY] * 20
                 + [Mood.ENTHUSIASTIC] * 20)


def test_the_vendor_and_the_session_band_every_score_as_the_seed_says() -> None:
    assert len(BANDS_BY_HAND) == 101
    assert [mood_band(score) for score in range(101)] == BANDS_BY_HAND
    assert [mood_for(score) for score in range(101)] == BANDS_BY_HAND


def test_round_price() -> None:
    assert [round_price(v) for v in (12.4, 47.6, 52, 133, 137.5)] == [12, 48, 50, 135, 140]


@pytest.mark.parametrize("name", SCENE_ITEMS)
def test_acceptable_price_falls_with_mood_and_time_but_not_below_the_floor(name: str) -> None:
    item = SCENARIO.item(name)
    calm = read_intents("hmm")
    bulk = read_intents("do kilo, cash")
    for turn in range(1, 31):
        prices = [acceptable_price(item, h, turn, turn > 25, calm) for h in range(0, 101, 5)]
        assert all(p >= item.floor for p in prices)
        assert prices == sorted(prices, reverse=True)
        assert acceptable_price(item, 60, turn, turn > 25, bulk) <= prices[12]
    assert acceptable_price(item, 60, 2, False, calm) > acceptable_price(item, 60, 12, False, calm)
    assert acceptable_price(item, 60, 12, False, calm) <= item.fair[1]


# --------------------------------------------------------------------------- personas


def test_every_persona_states_its_outcome() -> None:
    assert set(PERSONAS) == {"polite", "lowballer", "walker", "rude", "relative"}
    assert set(EXPECTED_OUTCOMES) == set(PERSONAS)
    assert all(EXPECTED_OUTCOMES[name] == cls.expected.summary for name, cls in PERSONAS.items())


def test_personas_refuse_unknown_items() -> None:
    with pytest.raises(ValueError):
        PERSONAS["polite"](item="Durian")


@pytest.mark.parametrize("price", sorted(HINDI_PRICES))
def test_hindi_prices_are_read_back(price: int) -> None:
    assert parse_offer(f"Bahut mehenga hai, bhaiya. {HINDI_PRICES[price]} mein de do?") == price


def test_learner_view_from_a_reply_event() -> None:
    reply = Reply(session_id="s", seq=3, turn=2, text="150 rupees.", happiness_score=54,
                  negotiation_state=Stage.INQUIRY, vendor_mood=Mood.NEUTRAL, counter_price=150,
                  suggested_user_response="", is_terminal=False, item="Tomato")
    view = LearnerView.from_reply(event_dict(reply))
    assert view == LearnerView(stage="INQUIRY", happiness=54, counter_price=150, item="Tomato",
                               turn=2, last_reply="150 rupees.")
    assert not view.is_over


@pytest.mark.parametrize("name", sorted(PERSONAS))
def test_two_fresh_personas_say_the_same_lines(name: str) -> None:
    """No state shared between instances (across processes: tests/test_determinism.py)."""
    views = [LearnerView(), LearnerView(stage="INQUIRY", counter_price=150, turn=1),
             LearnerView(stage="HAGGLING", counter_price=120, turn=2),
             LearnerView(stage="WALKAWAY", counter_price=90, turn=3),
             LearnerView(stage="HAGGLING", counter_price=80, turn=4)]
    first, second = PERSONAS[name](item="Orange"), PERSONAS[name](item="Orange")
    said = [first.next_line(v) for v in views]
    assert said == [second.next_line(v) for v in views]
    assert all(line.strip() for line in said)


_CUE_WORDS = sorted({w for cue in _tables(SCENARIO.cues).values() for m in cue.multis for w in m.split()}
                    | {"x", "ram", "kam"})


@given(st.lists(st.sampled_from(_CUE_WORDS), max_size=12))
def test_a_cue_phrase_is_found_by_the_compiled_search_exactly_when_a_scan_finds_it(words: list[str]) -> None:
    padded = f" {' '.join(words)} "
    for cue in _tables(SCENARIO.cues).values():
        assert isinstance(cue, Cue)
        found = cue.search is not None and cue.search.search(padded) is not None
        assert found == any(m in padded for m in cue.multis)
