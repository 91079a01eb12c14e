"""The rule vendor's memory of a known learner (brain/recall.py), in process: which greeting he
picks from the pack, in which language, and when he does not use one."""

from __future__ import annotations

from typing import Any

import pytest

from brain.rules_vendor import RuleBasedVendor
from schemas.brain import BrainRequest
from schemas.enums import Outcome, Stage
from schemas.learner import LearnerRecall
from schemas.scenario import load_scenario

VENDOR = RuleBasedVendor()


def request(learner: LearnerRecall | None, **changes: Any) -> BrainRequest:
    values: dict[str, Any] = {
        "session_id": "s", "scenario": "jaipur-bazaar", "turn": 1, "max_turns": 30,
        "transcript": "Namaste bhaiya", "stage": Stage.GREETING, "happiness_score": 56,
        "vendor_mood": "neutral", "learner": learner,
    }
    return BrainRequest.model_validate({**values, **changes})


def recall(outcome: Outcome = Outcome.DEAL, item: str | None = "Tomato", paid: int | None = 40) -> LearnerRecall:
    return LearnerRecall(sessions=1, last_outcome=outcome, last_item=item, last_paid=paid, start_happiness=56)


# The pack's second line of each remember_* pool (schemas/data/jaipur-bazaar/manifest.json), filled in by hand.
@pytest.mark.parametrize(("remembered", "expected"), [
    (recall(), "Welcome back, ji, you took my tomatoes for 40 rupees last time and still I smile!"),
    (recall(Outcome.WALKED_AWAY, paid=None),
     "Welcome back, ji, you left without my tomatoes last time, come, look again."),
    (recall(Outcome.TIMED_OUT, item=None, paid=None), "You again, ji, come, see what is fresh today!"),
])
def test_a_known_learner_is_greeted_from_the_packs_remember_lines(remembered: LearnerRecall, expected: str) -> None:
    decision = VENDOR.decide(request(remembered))
    assert decision.reply_text == expected
    assert decision.negotiation_state is Stage.GREETING


def test_the_deal_greeting_names_what_was_paid() -> None:
    text = VENDOR.decide(request(recall(paid=40))).reply_text
    assert "40 rupees" in text and "tomatoes" in text


def test_the_same_turn_of_a_stranger_gets_the_usual_greeting_and_the_same_numbers() -> None:
    known, stranger = VENDOR.decide(request(recall())), VENDOR.decide(request(None))
    assert known.reply_text != stranger.reply_text
    assert "last time" not in stranger.reply_text.lower()
    assert (known.happiness_score, known.negotiation_state, known.counter_price) == (
        stranger.happiness_score, stranger.negotiation_state, stranger.counter_price)  # words only


def test_only_the_first_turn_and_only_a_greeting_are_replaced() -> None:
    later = VENDOR.decide(request(recall(), turn=2))
    assert "last time" not in later.reply_text.lower()
    asked = VENDOR.decide(request(recall(), transcript="How much are the tomatoes?", item="Tomato"))
    assert asked.counter_price is not None and "last time" not in asked.reply_text.lower()  # business first


def test_each_pack_greets_a_known_learner_in_its_own_words() -> None:
    texts = {name: VENDOR.decide(request(recall(item=item, paid=paid), scenario=name)).reply_text
             for name, item, paid in (("jaipur-bazaar", "Tomato", 40), ("kyoto-antiques", None, None),
                                      ("marrakech-souk", None, None))}
    assert len(set(texts.values())) == 3
    for name, text in texts.items():
        pool = "remember_deal" if name == "jaipur-bazaar" else "remember_plain"
        assert text in {line.format(price=40, last_items="tomatoes", items="", unit="", quality="")
                        for line in load_scenario(name).lines_for(None)[pool]}, name
