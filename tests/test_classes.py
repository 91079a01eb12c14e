"""Teachers, classes and assignments without Neo4j (issue #35 item 4, docs/studio.md): the pure rules of
what counts toward an assignment, and the routes' authorization and refusals on a running server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.enums import Level
from server.classes.api import progress_csv
from server.classes.core import (
    AssignmentIn,
    Criteria,
    Played,
    StoredAssignment,
    StoredClass,
    class_progress,
    counts_toward,
    failed_criteria,
    fair_gap_pct,
)
from tests.servers import Served, create, running_server
from tests.test_learners_api import DEAL, play

ADMIN = "classes-admin-key-" + "c" * 24
AUTH = {"authorization": f"Bearer {ADMIN}"}
WITHIN_15 = Criteria(within_fair_pct=15, no_insult=True, max_hints=2)


def played(learner: str, sid: str, *, price: float | None = 65, outcome: str | None = "deal", insults: int = 0,
           hints: int = 0, score: int | None = 70, ended_at: float = 150.0, level: str = "beginner",
           version: int = 1, slips: tuple[str, ...] = ()) -> Played:
    return Played(learner_id=learner, session_id=sid, scenario="jaipur-bazaar", version=version, level=level,
                  outcome=outcome, item="Tomato", price=price, fair=(40, 60), insults=insults, hints=hints,
                  score=score, slips=slips, at=ended_at - 10, ended_at=ended_at)


def assignment(criteria: Criteria = WITHIN_15, *, version: int | None = None,
               due_at: float = 200.0) -> StoredAssignment:
    return StoredAssignment("a1", "c1", AssignmentIn(scenario="jaipur-bazaar", version=version, level=Level.BEGINNER,
                                                     due_at=due_at, criteria=criteria), created_at=100.0)


def test_the_fair_gap_is_zero_inside_the_range_and_relative_to_the_nearer_end_outside() -> None:
    assert fair_gap_pct(50, (40, 60)) == 0.0
    assert fair_gap_pct(69, (40, 60)) == pytest.approx(15.0)
    assert fair_gap_pct(70, (40, 60)) == pytest.approx(16.667, abs=1e-3)
    assert fair_gap_pct(34, (40, 60)) == pytest.approx(15.0)


def test_each_criterion_is_named_when_it_fails() -> None:
    assert failed_criteria(WITHIN_15, played("a", "s")) == []
    assert failed_criteria(WITHIN_15, played("a", "s", price=70)) == ["within_fair_pct"]
    assert failed_criteria(WITHIN_15, played("a", "s", insults=1, hints=3)) == ["no_insult", "max_hints"]
    assert failed_criteria(WITHIN_15, played("a", "s", outcome="walked_away", price=None)) == [
        "deal", "within_fair_pct"]
    assert failed_criteria(Criteria(min_score=80), played("a", "s", score=None)) == ["min_score"]


def test_a_session_counts_only_inside_the_assignment_window_at_its_level_and_version() -> None:
    task = assignment(version=2)
    assert counts_toward(task, played("a", "s", version=2))
    assert not counts_toward(task, played("a", "s", version=1))
    assert not counts_toward(task, played("a", "s", version=2, ended_at=99.0))  # before it was set
    assert not counts_toward(task, played("a", "s", version=2, ended_at=201.0))  # after it was due
    assert not counts_toward(task, played("a", "s", version=2, level="advanced"))


def test_the_class_figures_as_worked_out_by_hand() -> None:
    klass = StoredClass("c1", "7B", "t1", ("ana", "ben", "cai", "dev"), 0.0)
    sessions = [
        played("ana", "s1", price=65, score=80),  # meets it
        played("ben", "s2", price=70, score=60, ended_at=120),  # 16.7 % over the fair range: no
        played("ben", "s3", price=60, score=90, ended_at=130),  # then yes
        played("cai", "s4", price=65, insults=2, score=40, slips=("insult", "lowball")),  # insulted: no
        played("cai", "s5", price=65, ended_at=250, score=50, slips=("insult",)),  # after the due date
        played("zed", "s6"),  # not in the class
    ]
    figures = class_progress(klass, [assignment()], sessions)
    row = figures["assignments"][0]  # type: ignore[index]
    assert row["completed"] == ["ana", "ben"] and row["attempted"] == ["ana", "ben", "cai"]
    assert (row["completed_count"], row["learners"], row["completion_pct"]) == (2, 4, 50.0)
    learners = {r["learner_id"]: r for r in figures["learners"]}  # type: ignore[attr-defined]
    assert learners["ben"]["trend"] == [60, 90] and learners["ben"]["mean_score"] == 75.0
    assert learners["cai"]["slips"] == {"insult": 2, "lowball": 1} and learners["cai"]["completed"] == []
    assert learners["dev"] == {"learner_id": "dev", "sessions": 0, "deals": 0, "mean_score": None, "trend": [],
                               "slips": {}, "completed": []}
    assert figures["common_slips"] == [{"slip": "insult", "count": 2}, {"slip": "lowball", "count": 1}]
    lines = progress_csv(figures).splitlines()
    assert lines[0] == "learner_id,sessions,deals,mean_score,trend,slips,done:a1"
    assert lines[2] == "ben,2,2,75.0,60 90,,yes" and lines[4] == "dev,0,0,,,,no"


@given(st.lists(st.tuples(st.sampled_from(["ana", "ben", "cai"]), st.integers(30, 120), st.integers(0, 2),
                          st.integers(0, 4), st.floats(90, 210)), max_size=12))
def test_a_learner_completes_exactly_when_one_counting_session_meets_every_criterion(
        rows: list[tuple[str, int, int, int, float]]) -> None:
    klass = StoredClass("c1", "7B", "t1", ("ana", "ben", "cai"), 0.0)
    sessions = [played(who, f"s{n}", price=price, insults=insults, hints=hints, ended_at=at)
                for n, (who, price, insults, hints, at) in enumerate(rows)]
    done = class_progress(klass, [assignment()], sessions)["assignments"][0]["completed"]  # type: ignore[index]
    by_hand = sorted({who for who, price, insults, hints, at in rows
                      if 100 <= at <= 200 and 34 <= price <= 69 and insults == 0 and hints <= 2})
    assert sorted(done) == by_hand


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    async with running_server(SAMVAD_ENV="production", ADMIN_KEY=ADMIN) as s:
        yield s


async def teacher_token(http: httpx.AsyncClient, teacher: str) -> dict[str, str]:
    answer = await http.post(f"/api/teachers/{teacher}/token", headers=AUTH)
    assert answer.status_code == 200
    return {"authorization": f"Bearer {answer.json()['teacher_token']}"}


DUE = {"scenario": "jaipur-bazaar", "level": "beginner", "due_at": 4102444800,
       "criteria": {"within_fair_pct": 15, "no_insult": True, "max_hints": 2}}


@pytest.mark.anyio
async def test_a_teacher_sees_their_own_classes_only(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        meera, ravi = await teacher_token(http, "meera"), await teacher_token(http, "ravi")
        mine = (await http.post("/api/classes", json={"name": "7B"}, headers=meera)).json()
        assert mine["teacher_id"] == "meera"
        cid = mine["class_id"]
        assert (await http.post(f"/api/classes/{cid}/learners", json={"learner_ids": ["ana", "ben", "ana"]},
                                headers=meera)).json()["learner_ids"] == ["ana", "ben"]
        set_ = await http.post(f"/api/classes/{cid}/assignments", json=DUE, headers=meera)
        assert set_.status_code == 201 and set_.json()["criteria"]["within_fair_pct"] == 15
        for method, path, body in (("GET", f"/api/classes/{cid}", None),
                                   ("POST", f"/api/classes/{cid}/learners", {"learner_ids": ["zed"]}),
                                   ("POST", f"/api/classes/{cid}/assignments", DUE),
                                   ("GET", f"/api/classes/{cid}/progress", None)):
            answer = await http.request(method, path, json=body, headers=ravi)
            assert (answer.status_code, answer.json()["error"]["code"]) == (403, "not_your_class"), path
        assert (await http.get("/api/classes", headers=ravi)).json() == {"classes": []}
        refused = await http.post("/api/classes", json={"name": "x", "teacher_id": "meera"}, headers=ravi)
        assert refused.status_code == 403
        got = (await http.get(f"/api/classes/{cid}", headers=meera)).json()
        assert got["learner_ids"] == ["ana", "ben"] and len(got["assignments"]) == 1  # ravi changed nothing
        assert [c["class_id"] for c in (await http.get("/api/classes", headers=AUTH)).json()["classes"]] == [cid]
        # A teacher's token opens no admin route and no learner's record.
        assert (await http.get("/api/learners", headers=meera)).status_code == 401
        assert (await http.get("/api/lobby", headers=meera)).status_code == 401
        # Without Neo4j there are no figures, and the answer says why.
        answer = await http.get(f"/api/classes/{cid}/progress", headers=meera)
        assert (answer.status_code, answer.json()["error"]["code"]) == (503, "no_graph_store")


@pytest.mark.anyio
async def test_bad_input_gets_its_code_and_changes_nothing(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        meera = await teacher_token(http, "meera")
        cid = (await http.post("/api/classes", json={"name": "7B"}, headers=meera)).json()["class_id"]
        bad: list[tuple[str, str, Any]] = [
            ("POST", "/api/classes", {"name": ""}),
            ("POST", "/api/classes", {"name": "x", "extra": 1}),
            ("POST", "/api/classes", b"{not json"),
            ("POST", f"/api/classes/{cid}/learners", {"learner_ids": ["bad id with spaces"]}),
            ("POST", f"/api/classes/{cid}/learners", {"learner_ids": []}),
            ("POST", f"/api/classes/{cid}/assignments", {**DUE, "scenario": "atlantis"}),
            ("POST", f"/api/classes/{cid}/assignments", {**DUE, "version": 9}),
            ("POST", f"/api/classes/{cid}/assignments", {**DUE, "level": "expert"}),
            ("POST", f"/api/classes/{cid}/assignments", {**DUE, "criteria": {"within_fair_pct": -1}}),
            ("GET", f"/api/classes/{cid}/progress?format=xml", None),
        ]
        for method, path, body in bad:
            content = body if isinstance(body, bytes) else None
            answer = await http.request(method, path, headers=meera, content=content,
                                        json=None if content is not None else body)
            assert (answer.status_code, answer.json()["error"]["code"]) == (422, "invalid"), (path, body)
        assert (await http.post("/api/classes", json={"name": "x"}, headers=AUTH)).status_code == 422  # no teacher
        assert (await http.post("/api/teachers/bad%20id/token", headers=AUTH)).status_code == 422
        got = (await http.get(f"/api/classes/{cid}", headers=meera)).json()
        assert got["learner_ids"] == [] and got["assignments"] == []
        assert len((await http.get("/api/classes", headers=AUTH)).json()["classes"]) == 1
        missing = await http.get("/api/classes/c0000/progress", headers=meera)
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "unknown_class")


@pytest.mark.anyio
async def test_a_teacher_signs_in_with_their_token_and_the_cookie_opens_their_classes() -> None:
    # Development with a key: production's cookie is `Secure`, which a client sends over https only.
    async with running_server(ADMIN_KEY=ADMIN) as served, httpx.AsyncClient(base_url=served.base_url) as http:
        meera = await teacher_token(http, "meera")
        assert (await http.post("/api/signin", headers=meera)).status_code == 204
        assert (await http.get("/api/signin")).json() == {"admin": False, "open": False, "teacher": "meera"}
        assert (await http.post("/api/classes", json={"name": "7B"})).status_code == 201  # by the cookie
        foreign = await http.get("/api/classes", headers={"origin": "https://evil.example"})
        assert foreign.status_code == 401  # another site's page does not get the cookie's rights
        assert (await http.put("/api/scenarios/jaipur-bazaar", content=b"{}")).status_code == 422  # the studio
        assert (await http.post("/api/signout")).status_code == 204
        assert (await http.get("/api/classes")).status_code == 401


@pytest.mark.anyio
async def test_a_teacher_reads_the_learners_of_their_classes_and_no_other(served: Served) -> None:
    await play(served, await create(served, learner_id="ana"), DEAL)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        meera, ravi = await teacher_token(http, "meera"), await teacher_token(http, "ravi")
        cid = (await http.post("/api/classes", json={"name": "7B"}, headers=meera)).json()["class_id"]
        await http.post(f"/api/classes/{cid}/learners", json={"learner_ids": ["ana"]}, headers=meera)
        with anyio.fail_after(5):  # the profile is recorded in the background
            while True:
                if (await http.get("/api/learners/ana", headers=AUTH)).status_code == 200:
                    break
                await anyio.sleep(0.05)
        mine = await http.get("/api/learners/ana", headers=meera)
        assert mine.status_code == 200 and mine.json()["profile"]["sessions"] == 1
        assert (await http.get("/api/learners/ana", headers=ravi)).status_code == 403
        assert (await http.get("/api/learners/zed", headers=meera)).status_code == 403
        assert (await http.delete("/api/learners/ana", headers=meera)).status_code == 401  # erasure: the admin's
