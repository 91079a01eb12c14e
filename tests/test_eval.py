"""`samvad eval` end to end at a small size: two real servers, simulated learners over the socket, a
share of them speaking through espeak-ng and the embedded recogniser; the figures it writes are
checked where the server's behaviour fixes them. The full run (200 learners) is a benchmark: its
figures are in docs/learning.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clients.bots.eval_figures import MEASURES, learner_recall, paired
from clients.bots.learners import RETRIEVAL_KEEP, SimulatedLearner
from schemas.enums import Level
from schemas.scenario import load_scenario
from tests.ci import need_tools


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    out = tmp_path_factory.mktemp("eval") / "eval.json"
    done = subprocess.run([sys.executable, "-m", "server.cli", "eval", "--learners", "9", "--sessions", "2",
                           "--speakers", "0.5", "--out", str(out)], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "| hint uptake |" in done.stdout  # the table is printed
    got: dict[str, object] = json.loads(out.read_text("utf-8"))
    return got


def test_both_conditions_play_every_learners_sessions(result: dict[str, object]) -> None:
    conditions = result["conditions"]
    assert isinstance(conditions, dict) and set(conditions) == {"invite", "no_invite"}
    for figures in conditions.values():
        assert figures["sessions"] == 18 and figures["error_count"] == 0
        assert sum(level["sessions"] for level in figures["levels"].values()) == 18


def test_only_the_server_that_re_elicits_invites(result: dict[str, object]) -> None:
    conditions = result["conditions"]
    assert isinstance(conditions, dict)
    # The learners hear the pack's invitation lines as a person would: REVIEWS_INVITE=false never
    # speaks one, the default does, and the learners then say more lines from memory.
    assert conditions["no_invite"]["invitations"] == 0 < conditions["invite"]["invitations"]
    assert conditions["invite"]["lines_from_memory"] > conditions["no_invite"]["lines_from_memory"]


def test_the_servers_coaching_holds_where_its_rules_fix_it(result: dict[str, object]) -> None:
    conditions = result["conditions"]
    assert isinstance(conditions, dict)
    for figures in conditions.values():
        counts = figures["counts"]
        # Every mumbled line (confidence 0.35, under the 0.7 threshold) is asked again.
        assert counts["mumbled"] > 0 and figures["mumbles_clarified"] == 1.0
        # Every grounded card's words are the pack's knowledge's own.
        assert counts["grounded_cards"] > 0 and figures["tip_grounding_rate"] == 1.0
        # Hints were revealed and some were taken up; clear lines are rarely asked again (spoken
        # ones only can be: the recogniser may not be sure).
        assert counts["revealed"] > 0 and 0 < figures["hint_uptake"] <= 1
        assert figures["false_clarify_rate"] is not None and figures["false_clarify_rate"] <= 0.25
        # Items made in the first session are judged in the second (REVIEWS_DUE_AHEAD_SECONDS makes
        # them due minutes later, as days would).
        assert figures["recall"]["items_with_a_later_session"] > 0 and figures["recall"]["judged_later"] > 0
        spoken = [w for level in figures["levels"].values() for w in level["words_per_minute_by_session"].values()
                  if w is not None]
        assert spoken and all(40 < w < 260 for w in spoken)  # espeak-ng's pace, as the recogniser timed it


def test_the_conditions_are_compared_learner_by_learner(result: dict[str, object]) -> None:
    paired = result["paired"]
    assert isinstance(paired, dict) and set(paired) == set(MEASURES)
    for got in paired.values():
        if got["mean_difference"] is None:  # too few learners with items in both conditions
            continue
        low, high = got["ci95"]
        assert got["learners"] <= 9 and low <= got["mean_difference"] <= high
        assert got["better"] + got["worse"] <= got["learners"]


def _answer(learner: str, items: list[list[tuple[str, bool | None, str]]]) -> dict[str, object]:
    """A learners API answer: three sessions, and items each a history of (session, recalled, rating)."""
    return {"learner_id": learner, "progress": [{"session_id": s} for s in ("s1", "s2", "s3")],
            "items": [{"kind": "phrase", "history": [{"session_id": s, "recalled": r, "rating": g} for s, r, g in h]}
                      for h in items]}


def test_a_learners_recall_counts_items_with_a_later_session_and_recall_without_a_hint() -> None:
    answer = _answer("a", [
        [("s1", None, "again"), ("s2", True, "hard")],  # recalled, but a hint revealed it that session
        [("s1", None, "again"), ("s2", False, "again"), ("s3", True, "good")],  # recalled unaided
        [("s2", None, "again"), ("s3", False, "again")],
        [("s3", None, "again")],  # made in the last session: no later one, not counted
    ])
    assert learner_recall(answer) == {"items": 3, "recalled": 2, "unaided": 1, "reviews": 4,
                                      "reviews_recalled": 2}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10), st.integers(0, 10), st.integers(0, 10)), min_size=2, max_size=40))
def test_the_paired_difference_is_zero_for_equal_conditions_and_its_interval_holds_it(
        learners: list[tuple[int, int, int]]) -> None:
    on = {f"l{n}": {"items": i, "recalled": min(r, i), "unaided": 0, "reviews": 0, "reviews_recalled": 0}
          for n, (i, r, _) in enumerate(learners)}
    got = paired(on, on, "item_recall")
    assert got["mean_difference"] == 0 and got["ci95"] == [0, 0] and got["better"] == got["worse"] == 0
    better = {k: {**v, "recalled": v["items"]} for k, v in on.items()}  # every item recalled
    up = paired(better, on, "item_recall")
    assert up["mean_difference"] >= 0 and up["worse"] == 0
    assert up["ci95"][0] <= up["mean_difference"] <= up["ci95"][1]
    assert up["bootstrap_ci95"][0] <= up["mean_difference"] + 1e-9 and up["bootstrap_ci95"][1] >= 0


def test_a_simulated_learner_remembers_what_it_retrieves_longer_and_answers_the_invited_moment() -> None:
    pack = load_scenario("jaipur-bazaar")
    learner = SimulatedLearner("sim-x", Level.BEGINNER, pack, 0)
    item = learner.start_session()
    learner.memory = {"open": "Bhaiya, 60 rupees?", "counter": "Achha bhaiya, 80 final?"}
    base = learner.forget_p("open")
    line = learner.line("open", item, offer=70, invited=("open", "counter"))  # invited: this moment first
    assert line.recalled and line.text == "Bhaiya, 70 rupees?"  # seed 0 retrieves it (INVITED_P, 90 %)
    assert learner.forget_p("open") == base * RETRIEVAL_KEEP
    assert learner.forget_p("counter") == base  # not retrieved: forgotten as often as before
