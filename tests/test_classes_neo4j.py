"""A class and its assignment over Neo4j (issue #35 item 4): learners play, and the class page's
figures (completion, scores, slips, trends, CSV) match what is worked out by hand; the bots play as
a class's learners; the class queries seek indexes (EXPLAIN)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, LiteralString

import anyio
import httpx
import pytest
from neo4j import AsyncGraphDatabase

from clients.bots.runner import RunConfig, run
from server.classes.graph import ASSIGNMENTS, CLASS_SESSIONS, CLASSES_OF, GET_CLASS
from tests.servers import Served, create, running_server
from tests.test_learners_api import DEAL, play
from tests.test_learners_neo4j import plan_operators

pytestmark = [pytest.mark.neo4j, pytest.mark.anyio]

ADMIN = "classes-neo4j-admin-" + "k" * 24
AUTH = {"authorization": f"Bearer {ADMIN}"}
# The rule vendor's deals on the Tomato (fair 40-60, first quote 150), played out in tests/test_classes.py's
# neighbours: DEAL ends at 70 (16.7 % over the fair range), LOW at 65 (8.3 %), RUDE at 70 after an insult.
LOW = ("Namaste bhaiya", "Bhaiya, how much are the tomatoes?", "I can pay 50 rupees bhaiya",
       "55 rupees bhaiya, please", "60 rupees bhaiya, please", "62 rupees bhaiya please", "65 rupees bhaiya, final",
       "ok 65 bhaiya deal")
RUDE = ("Namaste bhaiya", "how much are the tomatoes?", "you are a thief, idiot", "I can pay 60 rupees bhaiya",
        "70 rupees bhaiya, please")
CRITERIA = {"within_fair_pct": 15, "no_insult": True, "max_hints": 2}


@pytest.fixture
async def served(neo4j_uri: str) -> AsyncIterator[Served]:
    async with running_server(USE_MOCKS=False, MIRROR="neo4j", NEO4J_URI=neo4j_uri, BRAIN="rules",
                              ADMIN_KEY=ADMIN) as s:
        yield s


async def teacher(http: httpx.AsyncClient, name: str) -> dict[str, str]:
    token = (await http.post(f"/api/teachers/{name}/token", headers=AUTH)).json()["teacher_token"]
    return {"authorization": f"Bearer {token}"}


async def recorded(http: httpx.AsyncClient, learner: str, sessions: int,
                   auth: dict[str, str] = AUTH) -> list[dict[str, Any]]:
    """The learner's progress once `sessions` sessions are recorded (the learner store writes in the background)."""
    with anyio.fail_after(10):
        while True:
            answer = await http.get(f"/api/learners/{learner}", headers=auth)
            if answer.status_code == 200 and len(answer.json()["progress"]) >= sessions:
                points: list[dict[str, Any]] = answer.json()["progress"]
                return points
            await anyio.sleep(0.05)


async def test_the_class_page_shows_completion_scores_and_slips_as_worked_out_by_hand(served: Served) -> None:
    tag = uuid.uuid4().hex[:8]
    ana, ben, cai, dev, zed = (f"{n}-{tag}" for n in ("ana", "ben", "cai", "dev", "zed"))
    async with httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        meera = await teacher(http, f"meera-{tag}")
        cid = (await http.post("/api/classes", json={"name": "7B"}, headers=meera)).json()["class_id"]
        await http.post(f"/api/classes/{cid}/learners", json={"learner_ids": [ana, ben, cai, dev]}, headers=meera)
        # A session before the assignment is set does not count toward it.
        await play(served, await create(served, learner_id=ana), LOW)
        await recorded(http, ana, 1)
        task = (await http.post(f"/api/classes/{cid}/assignments", headers=meera, json={
            "title": "Tomatoes at a fair price", "scenario": "jaipur-bazaar", "level": "intermediate",
            "due_at": 4102444800, "criteria": CRITERIA})).json()
        plays = ((ben, DEAL), (ben, LOW), (cai, RUDE), (zed, LOW), (ana, DEAL))
        for who, lines in plays:
            await play(served, await create(served, learner_id=who), lines)
        scores = {who: [p["score"] for p in await recorded(http, who, n)]
                  for who, n in ((ana, 2), (ben, 2), (cai, 1))}
        figures = (await http.get(f"/api/classes/{cid}/progress", headers=meera)).json()
    # By hand: ana's 65 came before the assignment and her deal since is at 70 (16.7 % over the fair
    # 60): not done. ben's second deal is at 65 (8.3 % over): done. cai insulted the vendor: not done,
    # though attempted. dev never played. zed is not in the class. 1 of 4: 25 %.
    row = figures["assignments"][0]
    assert row["assignment_id"] == task["assignment_id"]
    assert (row["completed"], sorted(row["attempted"])) == ([ben], sorted([ana, ben, cai]))
    assert (row["completed_count"], row["learners"], row["completion_pct"]) == (1, 4, 25.0)
    learners = {r["learner_id"]: r for r in figures["learners"]}
    assert set(learners) == {ana, ben, cai, dev}
    assert [learners[w]["sessions"] for w in (ana, ben, cai, dev)] == [2, 2, 1, 0]
    for who in (ana, ben, cai):  # the trend is the scores the learner's own progress shows
        assert learners[who]["trend"] == scores[who]
        assert learners[who]["mean_score"] == round(sum(scores[who]) / len(scores[who]), 1)
    assert learners[cai]["slips"].get("insult") == 1 and learners[ben]["completed"] == [task["assignment_id"]]
    assert {"slip": "insult", "count": 1} in figures["common_slips"]


@pytest.mark.slow
async def test_bots_playing_as_a_class_count_toward_its_assignment(served: Served) -> None:
    prefix = f"bots-{uuid.uuid4().hex[:8]}-"
    async with httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        cid = (await http.post("/api/classes", json={"name": "bots", "teacher_id": "t-bots"}, headers=AUTH)).json()[
            "class_id"]
        await http.post(f"/api/classes/{cid}/learners", json={"learner_ids": [f"{prefix}0", f"{prefix}1"]},
                        headers=AUTH)
        await http.post(f"/api/classes/{cid}/assignments", headers=AUTH, json={
            "scenario": "jaipur-bazaar", "level": "intermediate", "due_at": 4102444800,
            "criteria": {"deal": True, "no_insult": True}})
        config = RunConfig(url=served.base_url, sessions=2, personas=("polite", "rude"), think_ms=10,
                           duration_s=2.0, ramp_s=0.1, admin_key=ADMIN, learner_prefix=prefix)
        summary = (await run(config)).summary()
        assert summary["errors"]["count"] == 0, summary["errors"]
        # Sessions the run's end cut short never end, so they have no outcome and count toward nothing.
        ended = {persona: sum(n for outcome, n in counts.items() if outcome != "unfinished")
                 for persona, counts in summary["outcomes"].items()}
        for n, persona in enumerate(("polite", "rude")):
            await recorded(http, f"{prefix}{n}", ended.get(persona, 0))
        figures = (await http.get(f"/api/classes/{cid}/progress", headers=AUTH)).json()
        csv = (await http.get(f"/api/classes/{cid}/progress?format=csv", headers=AUTH))
    # bot 0 is polite and deals; bot 1 insults the vendor every session, so never completes.
    assert summary["outcomes"]["polite"].get("deal", 0) >= 1
    learners = {r["learner_id"]: r for r in figures["learners"]}
    assert learners[f"{prefix}0"]["sessions"] == ended["polite"]
    assert learners[f"{prefix}1"]["sessions"] == ended.get("rude", 0)
    assert figures["assignments"][0]["completed"] == [f"{prefix}0"]
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines()[1].startswith(f"{prefix}0,") and csv.text.splitlines()[1].endswith(",yes")


@pytest.mark.parametrize(("statement", "seeks"), [
    (CLASS_SESSIONS, ("NodeUniqueIndexSeek", "NodeIndexSeek")),  # the Class, then sessions by learner_id
    (GET_CLASS, ("NodeUniqueIndexSeek",)),
    (ASSIGNMENTS, ("NodeUniqueIndexSeek",)),
    (CLASSES_OF, ("NodeIndexSeek",)),
])
async def test_the_class_queries_seek_indexes_and_scan_no_label(
        served: Served, neo4j_uri: str, statement: LiteralString, seeks: tuple[str, ...]) -> None:
    async with httpx.AsyncClient(base_url=served.base_url) as http:  # the store makes its schema first
        assert (await http.get("/api/classes", headers=AUTH)).status_code == 200
    async with AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
        result = await driver.execute_query("EXPLAIN " + statement, class_id="x", teacher_id="t")
    plan = result.summary.plan
    assert plan is not None
    operators = plan_operators(plan)
    for seek in seeks:
        assert any(op.startswith(seek) for op in operators), operators
    assert not any(op.startswith(("NodeByLabelScan", "AllNodesScan")) for op in operators), operators
