"""Learners across sessions against the real Neo4j: the Learner node and PLAYED, the progress
series computed in Cypher against figures worked out by hand, the plan of that query (an index
seek, no label scan), profiles that outlive the process, and erasure.

Each test uses learner ids of its own (the test database keeps what earlier runs wrote)."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any, LiteralString

import httpx
import pytest
from neo4j import AsyncGraphDatabase

from schemas.enums import Outcome
from schemas.learner import SESSION_WINDOW, SessionFigures
from schemas.scenario import load_scenario
from server.learners.cypher import DELETE_LEARNER, DELETE_LEARNER_SESSIONS, GET_PROFILE, LOCK_PROFILE, PROGRESS
from server.learners.graph import Neo4jLearnerStore
from server.learners.profile import hint_points
from tests.servers import Served, create, player, running_server, state
from tests.test_learner_window import real_session, session, unbounded
from tests.test_learners_api import ADMIN, DEAL, WALK, api, play, profile_after

pytestmark = [pytest.mark.neo4j, pytest.mark.anyio]

# Everything left in the graph that names the learner or belongs to one of the sessions.
LEFT_OVER: LiteralString = """
MATCH (n)
WHERE (n:Learner AND n.learner_id = $learner_id) OR (n:Session AND n.learner_id = $learner_id)
   OR ((n:Session OR n:Turn OR n:Item OR n:StageTransition) AND n.session_id IN $session_ids)
RETURN labels(n) AS labels, count(*) AS nodes
"""

PLAYED: LiteralString = """
MATCH (l:Learner {learner_id: $learner_id})-[p:PLAYED]->(s:Session)
RETURN s.session_id AS session_id, p.score AS score, p.level AS level ORDER BY s.created_at
"""


def learner() -> str:
    return f"learner-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def served(neo4j_uri: str) -> AsyncIterator[Served]:
    async with running_server(USE_MOCKS=False, MIRROR="neo4j", NEO4J_URI=neo4j_uri, BRAIN="rules",
                              ADMIN_KEY=ADMIN) as s:
        yield s


async def hints_then_play(served: Served, created: dict[str, Any], hints: int, lines: tuple[str, ...]) -> None:
    """Ask for `hints` hints before the first line, then play `lines` holding a tomato."""
    async with await player(served, created) as c:
        await c.until("welcome")
        for n in range(hints):
            await c.send({"type": "command", "id": f"h{n}", "name": "hint"})
            await c.until("hint")
    await play(served, created, lines)


async def test_the_progress_series_is_computed_in_cypher_as_worked_out_by_hand(served: Served) -> None:
    who = learner()
    first = await create(served, learner_id=who)
    await play(served, first, DEAL)
    await profile_after(served, who, 1)
    second = await create(served, learner_id=who)
    await hints_then_play(served, second, 2, WALK)
    await profile_after(served, who, 2)
    third = await create(served, learner_id=who)
    await play(served, third, DEAL)
    got = await profile_after(served, who, 3)
    assert got["store"] == "neo4j" and got["durable"] is True
    # By hand (docs/coaching.md's score; the Tomato's fair range is 40-60, the first quote 150):
    # 1. a deal at 70 in 4 turns from a start of 50: price round(30 * (150 - 70) / (150 - 60)) = 27,
    #    respect 25 (bhaiya in all 4 lines), goodwill round(20 * 63 / 100) = 13, manners 15: 80;
    #    discount 100 * (1 - 70 / 150) = 53.3.
    # 2. walked away in 5 turns from 56 (50 + 6 after a deal): price 0, respect 0, goodwill
    #    round(20 * 49 / 100) = 10, manners 15 - 2 for one lowball = 13: 23; two hints asked.
    # 3. a deal at 70 in 4 turns from 46 (50 - 4 after walking away): 27 + 25 + round(20 * 59 / 100)
    #    = 12 + 15: 79.
    returning = load_scenario("jaipur-bazaar").returning.start_offset
    assert (returning[Outcome.DEAL], returning[Outcome.WALKED_AWAY]) == (6, -4)
    points = [(p["session_id"], p["outcome"], p["turns"], p["turns_to_deal"], p["discount_pct"], p["score"],
               p["hints"]) for p in got["progress"]]
    assert points == [
        (first["session_id"], "deal", 4, 4, 53.3, 80, 0),
        (second["session_id"], "walked_away", 5, None, None, 23, 2),
        (third["session_id"], "deal", 4, 4, 53.3, 79, 0),
    ]
    listing = (await api(served, "GET", "/api/learners")).json()["learners"]
    row = next(r for r in listing if r["learner_id"] == who)
    assert row["sessions"] == 3 and row["latest"]["session_id"] == third["session_id"]
    assert row["trend"] == "declining" and row["trend_delta"] == -29.0  # mean(23, 79) - 80
    store = served.services.learners.store if served.services else None
    assert isinstance(store, Neo4jLearnerStore)
    played = await store.read(PLAYED, learner_id=who)
    assert [(r["session_id"], r["score"]) for r in played] == [
        (first["session_id"], 80), (second["session_id"], 23), (third["session_id"], 79)]
    report = await api(served, "GET", got["progress"][0]["report_url"], None)
    assert report.status_code == 200 and 'data-score="80"' in report.text  # the report says the same
    profile = got["profile"]
    assert profile["hints_by_level"][1]["hints"] == [1, 1, 0]  # level 0, then level 1
    assert profile["scenarios"]["jaipur-bazaar"]["outcomes"] == {"deal": 2, "walked_away": 1}


def plan_operators(plan: Any) -> list[str]:
    operators = [str(plan["operatorType"])]
    for child in plan.get("children", []):
        operators += plan_operators(child)
    return operators


@pytest.mark.parametrize(("statement", "seek"), [
    (PROGRESS, "NodeUniqueIndexSeek"),  # the Learner by its constraint
    (GET_PROFILE, "NodeUniqueIndexSeek"),
    (LOCK_PROFILE, "NodeUniqueIndexSeek"),  # and whether PLAYED reaches the session
    (DELETE_LEARNER, "NodeUniqueIndexSeek"),
    (DELETE_LEARNER_SESSIONS, "NodeIndexSeek"),  # sessions by samvad_session_learner
])
async def test_the_learner_queries_seek_an_index_and_scan_no_label(served: Served, neo4j_uri: str,
                                                                   statement: LiteralString, seek: str) -> None:
    async with AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
        result = await driver.execute_query("EXPLAIN " + statement, learner_id="x", session_id="s")
    plan = result.summary.plan
    assert plan is not None
    operators = plan_operators(plan)
    assert any(op.startswith(seek) for op in operators), operators
    assert not any(op.startswith(("NodeByLabelScan", "AllNodesScan")) for op in operators), operators


async def test_profiles_outlive_the_process(neo4j_uri: str) -> None:
    who = learner()
    settings = {"USE_MOCKS": False, "MIRROR": "neo4j", "NEO4J_URI": neo4j_uri, "BRAIN": "rules", "ADMIN_KEY": ADMIN}
    async with running_server(**settings) as served:
        await play(served, await create(served, learner_id=who, level="beginner"), DEAL)
        await profile_after(served, who, 1)
    async with running_server(**settings) as served:  # a new process's memory: only Neo4j knows her
        again = await create(served, learner_id=who)
        assert again["known_learner"] is True
        start = await state(served, again["session_id"], again["player_token"])
        assert start["level"] == "beginner" and start["happiness_score"] == 56
        reply = next(f for f in await play(served, again, ("Namaste bhaiya",)) if f["type"] == "reply")
        assert "70 rupees" in reply["text"] and "tomatoes" in reply["text"]


async def test_erasure_leaves_nothing_of_the_learner_readable(served: Served, neo4j_uri: str) -> None:
    who, other = learner(), learner()
    ended = await create(served, learner_id=who)
    await play(served, ended, DEAL)
    await profile_after(served, who, 1)
    live = await create(served, learner_id=who)
    async with await player(served, live) as c:  # one turn stored, the session still being played
        await c.until("welcome")
        await c.turn("t1", "Namaste bhaiya, how much are the tomatoes?")
    kept = await create(served, learner_id=other)
    await play(served, kept, DEAL)
    await profile_after(served, other, 1)
    sids = [ended["session_id"], live["session_id"]]
    async with AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
        before = (await driver.execute_query(LEFT_OVER, learner_id=who, session_ids=sids)).records
        assert sum(r["nodes"] for r in before) > 10  # sessions, turns, items, transitions, the learner

        erased = await api(served, "DELETE", f"/api/learners/{who}")
        assert erased.status_code == 200

        after = (await driver.execute_query(LEFT_OVER, learner_id=who, session_ids=sids)).records
        assert [dict(r) for r in after] == []
        text = (await driver.execute_query(
            "MATCH (t:Turn) WHERE t.session_id IN $ids RETURN count(t) AS n", ids=sids)).records
        assert text[0]["n"] == 0
    assert (await api(served, "GET", f"/api/learners/{who}")).json()["error"]["code"] == "unknown_learner"
    assert who not in [r["learner_id"] for r in (await api(served, "GET", "/api/learners")).json()["learners"]]
    for created in (ended, live):
        sid, token = created["session_id"], created["player_token"]
        for path in ("", "/report", "/graph"):
            answer = await api(served, "GET", f"/api/sessions/{sid}{path}", token)
            assert answer.status_code == 404, (path, answer.text)
    async with httpx.AsyncClient(base_url=served.base_url) as client:
        gone = await client.get(f"/api/learners/{who}", headers={"authorization": f"Bearer {ended['learner_token']}"})
    assert gone.status_code == 404
    # The other learner is untouched.
    kept_answer = await api(served, "GET", f"/api/learners/{other}")
    assert kept_answer.status_code == 200 and len(kept_answer.json()["progress"]) == 1


async def test_two_writers_recording_one_learner_at_once_lose_no_session(neo4j_uri: str) -> None:
    import anyio

    from schemas.enums import LanguageCode, Level
    from schemas.learner import SessionFigures

    who = learner()
    sids = [f"{who}-s{n}" for n in range(8)]
    async with AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
        await driver.execute_query(  # what the mirror would have written: bare ended sessions
            "UNWIND $ids AS id CREATE (:Session {session_id: id, learner_id: $who, scenario: 'jaipur-bazaar', "
            "outcome: 'no_deal', turn_count: 3, created_at: 1.0})", ids=sids, who=who)
    stores = [Neo4jLearnerStore(neo4j_uri), Neo4jLearnerStore(neo4j_uri)]  # two servers' stores
    try:
        async with anyio.create_task_group() as tg:
            for n, sid in enumerate(sids):
                tg.start_soon(stores[n % 2].record, SessionFigures(
                    session_id=sid, learner_id=who, scenario="jaipur-bazaar", level=Level.INTERMEDIATE,
                    input_language=LanguageCode.EN_IN, target_language=LanguageCode.EN_IN,
                    outcome=Outcome.NO_DEAL, turns=3, score=10 + n, created_at=1.0, ended_at=2.0))
        profile = await stores[0].get(who)
        assert profile is not None and profile.sessions == len(sids)
        assert sorted(sid for _, sid in profile.latest_sessions) == sorted(sids)
        assert len(await stores[1].progress(who)) == len(sids)
        assert await stores[0].erase(who) is True
        assert await stores[1].get(who) is None
    finally:
        for store in stores:
            await store.aclose()


# A learner of many sessions at one stall: the profile's JSON on the Learner node. At 1,000 sessions
# it was 148,466 bytes before the bound and 2,559 with it (2026-11-27; the window's 32 ids and starts
# are some 1,900 of it). Past the window it no longer grows with the sessions, so the test plays 160
# of them, five windows (1,000 took 18 s of the suite, a record at a time).
MANY_SESSIONS = 160
MANY_SESSIONS_JSON = 4_096

# What the mirror would have written: bare ended sessions.
BARE_SESSIONS: LiteralString = """
UNWIND $sessions AS row
CREATE (:Session {session_id: row.id, learner_id: $who, scenario: 'jaipur-bazaar', outcome: 'deal',
                  turn_count: 4, created_at: row.at, coaching_hints_0: row.h0, coaching_hints_1: row.h1})
"""


async def bare_sessions(neo4j_uri: str, who: str, sessions: list[SessionFigures]) -> None:
    async with AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
        await driver.execute_query(BARE_SESSIONS, who=who, sessions=[
            {"id": f.session_id, "at": f.created_at, "h0": f.hints[0], "h1": f.hints[1]} for f in sessions])


async def test_a_learner_of_many_sessions_keeps_a_small_profile_in_the_graph(neo4j_uri: str) -> None:
    who = learner()
    rng = random.Random(16)
    played = [real_session(rng, n, who) for n in range(MANY_SESSIONS)]
    await bare_sessions(neo4j_uri, who, played)
    store = Neo4jLearnerStore(neo4j_uri)
    try:
        # The first session ends last, after every other: the profile's window alone would take it
        # for counted; the graph knows it is not linked, and folds it.
        for f in (*played[1:], played[0]):
            await store.record(f)
        [row] = await store.read(GET_PROFILE, learner_id=who)
        assert len(row["profile"].encode()) < MANY_SESSIONS_JSON
        profile = await store.get(who)
        assert profile is not None and profile.sessions == MANY_SESSIONS
        assert len(profile.latest_sessions) == SESSION_WINDOW
        for again in (played[1], played[MANY_SESSIONS // 2], played[0]):  # long out of the window, and in it
            assert await store.record(again) == profile
        series = await store.progress(who)
        assert len(series) == MANY_SESSIONS
        assert [(h.session_id, h.hints) for h in hint_points(series)] == [(f.session_id, f.hints) for f in played]
        await store.erase(who)
    finally:
        await store.aclose()


async def test_a_profile_stored_unbounded_is_migrated_when_read_and_written_bounded(neo4j_uri: str) -> None:
    who = learner()
    sessions = [session(f"{who}-s{n}", 1000.0 * n, 1000.0 * n + 60, who) for n in range(41)]
    await bare_sessions(neo4j_uri, who, sessions)
    async with AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
        await driver.execute_query(  # the Learner as a build before the bound left it, after 40 sessions
            "CREATE (l:Learner {learner_id: $who, profile: $profile, sessions: 40}) WITH l "
            "MATCH (s:Session) WHERE s.session_id IN $ids CREATE (l)-[:PLAYED]->(s)",
            who=who, profile=json.dumps(unbounded(sessions[:40])), ids=[f.session_id for f in sessions[:40]])
    store = Neo4jLearnerStore(neo4j_uri)
    try:
        profile = await store.get(who)
        assert profile is not None and profile.sessions == 40
        assert [sid for _, sid in profile.latest_sessions] == [f.session_id for f in sessions[8:40]]
        assert await store.record(sessions[0]) == profile  # played before: counted once
        after = await store.record(sessions[40])
        assert after.sessions == 41
        [row] = await store.read(GET_PROFILE, learner_id=who)
        stored = json.loads(row["profile"])
        assert "session_ids" not in stored and "hints_by_level" not in stored
        assert stored["latest_sessions"][-1] == [40_000.0, sessions[40].session_id]
        await store.erase(who)
    finally:
        await store.aclose()
