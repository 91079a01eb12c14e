"""The learning loop end to end (issue #36, docs/learning.md): three sessions of one learner on a real
server with the rule vendor and the real Neo4j.

1. The learner asks for hints up to a reveal before saying anything, then haggles to a deal: the
   revealed line becomes a review item (so does each grounded card the lines earned), reviewed `again`
   at the session's end.
2. Two days later it is due: the vendor invites it (the pack's `invite_greet` line, on turn 2), the
   learner says it in Devanagari, the judgement calls it recalled (`good`), the report lists it, and
   the item is rescheduled.
3. A day later it is not due: the vendor does not invite it, and the learners API shows the item
   with its history and its retention.

The server's clock is fixed (the registry's, the one clock the sessions and the learners read), so the
FSRS figures below are worked out by hand from fsrs 6.3.2's documented default parameters."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator
from typing import Any, LiteralString

import anyio
import pytest

from schemas.scenario import load_scenario
from server.learners.graph import Neo4jLearnerStore
from tests.servers import Served, create, player, running_server
from tests.test_learners_api import ADMIN, DEAL, api, hints_before_a_line, play

pytestmark = pytest.mark.anyio

DAY = 86_400.0
# Session 1 at 2023-11-14 22:13:20 UTC, each session starting and ending at its own instant. In the past,
# so that no test counting sessions since it began (the stats) ever sees these.
T1 = 1_700_000_000.0
T2 = T1 + 2 * DAY
T3 = T2 + 1 * DAY

# fsrs 6.3.2's default parameters w0..w20 (fsrs.scheduler.DEFAULT_PARAMETERS), and the two the
# arithmetic below needs: DECAY = -w20, FACTOR = 0.9 ** (1 / DECAY) - 1, so that an interval of S days
# has a retrievability of 0.9 (the default desired retention).
W = (0.212, 1.2931, 2.3065, 8.2956, 6.4133, 0.8334, 3.0194, 0.001, 1.8722, 0.1666, 0.796, 1.4835, 0.0614,
     0.2629, 1.6483, 0.6014, 1.8729, 0.5425, 0.0912, 0.0658, 0.1542)
DECAY = -W[20]
FACTOR = 0.9 ** (1 / DECAY) - 1

# Session 1, a new item rated Again: S = w0 = 0.212, D = w4 - e^(w5 * 0) + 1 = 6.4133. No learning steps
# (server/learners/reviews.py), so it goes straight to Review with round(S) = 0 days, at least 1: due T1 + 1 day.
S1, D1 = 0.212, 6.4133
# Session 2, two whole days later, rated Good. Retrievability R = (1 + FACTOR * 2 / S1) ^ DECAY = 0.698483...;
# S2 = S1 * (1 + e^w8 * (11 - D1) * S1^-w9 * (e^((1 - R) * w10) - 1)) = 2.432948...;
# D2 = w7 * (w4 - e^(w5 * 3) + 1) + (1 - w7) * D1 = 6.402115... (Good moves it only by mean reversion);
# interval round(S2) = 2 days: due T2 + 2 days.
R2 = (1 + FACTOR * 2 / S1) ** DECAY
S2 = S1 * (1 + math.exp(W[8]) * (11 - D1) * S1 ** -W[9] * (math.exp((1 - R2) * W[10]) - 1))
D2 = W[7] * (W[4] - math.exp(W[5] * 3) + 1) + (1 - W[7]) * D1
# At session 3, one day after the review: retention (1 + FACTOR * 1 / S2) ^ DECAY = 0.949131...
R3 = (1 + FACTOR * 1 / S2) ** DECAY

ITEM: LiteralString = """
MATCH (:Learner {learner_id: $learner_id})-[:REVIEWS]->(i:Item:ReviewItem {key: $key})
OPTIONAL MATCH (i)-[r:REVIEWED_IN]->(s:Session)
WITH i, r, s ORDER BY r.at
RETURN i.key AS key, i.due AS due, i.stability AS stability, i.reps AS reps,
       collect([s.session_id, r.rating, r.recalled]) AS reviews
"""


@pytest.fixture
async def served(neo4j_uri: str) -> AsyncIterator[Served]:
    async with running_server(USE_MOCKS=False, MIRROR="neo4j", NEO4J_URI=neo4j_uri, BRAIN="rules",
                              ADMIN_KEY=ADMIN) as s:
        yield s


def test_the_hand_worked_figures_are_what_the_arithmetic_says() -> None:
    """The figures spelled out above, to four places: a typo in W would show here first."""
    assert (round(R2, 4), round(S2, 4), round(D2, 4), round(R3, 4)) == (0.6985, 2.4329, 6.4021, 0.9491)
    assert max(1, round(S1)) == 1 and round(S2) == 2


async def items_after(served: Served, learner: str, reps: int, sessions: int | None = None) -> dict[str, Any]:
    """The learner's GET answer once the hint's item has `reps` reviews, one a session (recorded in the background)."""
    with anyio.fail_after(10):
        while True:
            answer = await api(served, "GET", f"/api/learners/{learner}")
            got: dict[str, Any] = answer.json() if answer.status_code == 200 else {}
            hint = [i for i in got.get("items", []) if i["source"] == "hint"]
            if hint and hint[0]["reps"] >= reps and len(got["progress"]) >= (sessions or reps):
                return got
            await anyio.sleep(0.05)


@pytest.mark.neo4j
async def test_a_revealed_hint_comes_back_is_recalled_across_scripts_and_is_rescheduled(served: Served) -> None:
    assert served.services is not None
    now = [T1]
    served.services.registry.clock = lambda: now[0]  # the one clock sessions and learners read
    who = f"learner-{uuid.uuid4().hex[:10]}"
    scenario = load_scenario("jaipur-bazaar")

    # 1. Three hints before the first line: the third reveals the pack's greeting line.
    first = await create(served, learner_id=who)
    reveal = await hints_before_a_line(served, first)
    assert reveal["kind"] == "reveal" and reveal["situation"] == "greet"
    assert reveal["text"] == "Namaste bhaiya, ye tamatar kitne ka hai?"
    await play(served, first, DEAL)
    got = await items_after(served, who, 1)
    [item] = [i for i in got["items"] if i["source"] == "hint"]
    cards = [i for i in got["items"] if i["source"] == "card"]
    assert cards and all(i["kind"] == "card" and i["cues"] == [i["key"].removeprefix("card:")] for i in cards)
    # The hint's item: the line, its cue words (less the item's name and the respect words, which the profile
    # judges apart), and one review, Again, at the session's end.
    assert (item["kind"], item["key"], item["source"], item["phrase"]) == (
        "phrase", "greet", "hint", "Namaste bhaiya, ye tamatar kitne ka hai?")
    assert item["cues"] == ["namaste", "kitne"] and item["scenario"] == "jaipur-bazaar"
    assert item["language"] == "en-IN"
    assert [(e["session_id"], e["source"], e["key"]) for e in item["evidence"]] == [
        (first["session_id"], "hint", "greet")]
    assert item["stability"] == pytest.approx(S1) and item["difficulty"] == pytest.approx(D1)
    assert item["due"] == pytest.approx(T1 + DAY) and item["last_review"] == pytest.approx(T1)
    assert [h["rating"] for h in item["history"]] == ["again"]

    # 2. Two days on, it is due: the vendor invites it on turn 2, the learner says it in Devanagari.
    now[0] = T2
    second = await create(served, learner_id=who)
    assert second["known_learner"] is True
    async with await player(served, second) as c:
        await c.until("welcome")
        await c.send({"type": "scene", "id": "hold", "object_grabbed": "Tomato"})
        await c.until("ack", id="hold")
        greeted = (await c.turn("t1", "Namaste bhaiya"))[0]  # one cue word of two: not yet
        assert greeted["text"] not in scenario.lines_for(None)["invite_greet"]  # turn 1: he remembers them
        invited = (await c.turn("t2", "Just looking"))[0]
        assert invited["text"] in scenario.lines_for(None)["invite_greet"]
        said = (await c.turn("t3", "नमस्ते भैया, ये टमाटर कितने का है?"))[0]
        assert said["text"] not in scenario.lines_for(None)["invite_greet"]  # produced: no more invitations
        await c.send({"type": "command", "id": "stop", "name": "stop"})
        report = (await c.until("session.report"))["report"]
    # The hint's item first, then (MAX_TARGETS is 3) the two oldest of the grounded cards session 1 earned.
    assert report["practised"][0] == {
        "item_id": item["item_id"], "kind": "phrase", "phrase": "Namaste bhaiya, ye tamatar kitne ka hai?",
        "recalled": True, "turn": 3, "said": "नमस्ते भैया, ये टमाटर कितने का है?", "rating": "good"}
    assert [p["kind"] for p in report["practised"]] == ["phrase", "card", "card"]
    got = await items_after(served, who, 2)
    [item] = [i for i in got["items"] if i["source"] == "hint"]
    assert item["stability"] == pytest.approx(S2, rel=1e-9) and item["difficulty"] == pytest.approx(D2, rel=1e-9)
    assert item["due"] == pytest.approx(T2 + 2 * DAY) and item["last_review"] == pytest.approx(T2)
    assert [(h["session_id"], h["rating"], h["recalled"]) for h in item["history"]] == [
        (first["session_id"], "again", None), (second["session_id"], "good", True)]
    page = await api(served, "GET", got["progress"][1]["report_url"], None)
    assert page.status_code == 200 and 'data-recalled="true"' in page.text and "(review: good)" in page.text

    # 3. A day later it is not due: no invitation; the learners API shows its retention.
    now[0] = T3
    third = await create(served, learner_id=who)
    async with await player(served, third) as c:
        await c.until("welcome")
        await c.send({"type": "scene", "id": "hold", "object_grabbed": "Tomato"})
        await c.until("ack", id="hold")
        await c.turn("t1", "Namaste bhaiya")
        usual = (await c.turn("t2", "Just looking"))[0]
        assert usual["text"] not in scenario.lines_for(None)["invite_greet"]
        await c.send({"type": "command", "id": "stop", "name": "stop"})
        report = (await c.until("session.report"))["report"]
    assert item["item_id"] not in [p["item_id"] for p in report["practised"]]
    got = await items_after(served, who, 2, sessions=3)
    [item] = [i for i in got["items"] if i["source"] == "hint"]
    assert item["reps"] == 2 and item["is_due"] is False  # session 3 did not review it
    assert item["retention"] == pytest.approx(round(R3, 4))
    store = served.services.learners.store
    assert isinstance(store, Neo4jLearnerStore)
    [row] = await store.read(ITEM, learner_id=who, key="greet")
    assert row["key"] == "greet" and row["reps"] == 2 and row["due"] == pytest.approx(T2 + 2 * DAY)
    assert row["reviews"] == [[first["session_id"], "again", None], [second["session_id"], "good", True]]
    # A new session reads only the items due (issue #33), and they are the items that say they are due.
    everything = await store.items(who)
    for at in (T2, T2 + 2 * DAY, T2 + 400 * DAY):
        due = await store.due_items(who, "jaipur-bazaar", at)
        assert due == [i for i in everything if i.scenario == "jaipur-bazaar" and i.due <= at]
    assert len(due) == len(everything) > 0  # a year on, every item is due
    assert await store.due_items(who, "no-such-scenario", T2 + 400 * DAY) == []

    # Erasure takes the items with the learner.
    assert (await api(served, "DELETE", f"/api/learners/{who}")).status_code == 200
    assert await store.read(ITEM, learner_id=who, key="greet") == []
    left = await store.read("MATCH (i:ReviewItem {learner_id: $learner_id}) RETURN count(i) AS n", learner_id=who)
    assert left == [{"n": 0}]
