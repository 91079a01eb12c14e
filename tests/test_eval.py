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
