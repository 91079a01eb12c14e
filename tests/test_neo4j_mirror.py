"""The Neo4j mirror against a real Neo4j: schema, idempotent and order-independent writes, the turn
chain, exact recovery, the graph context computed in Cypher, the graph and stats endpoints."""

from __future__ import annotations

import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import fields
from typing import Any

import anyio
import httpx
import pytest
from neo4j import AsyncGraphDatabase

from brain.rules_vendor import RuleBasedVendor
from clients.bots.personas import LearnerView, Lowballer, Persona, Polite, Rude, Walker
from schemas.frames import ResumeFrame, SceneFrame, TranscriptFrame
from server.app import create_app
from server.config import load_settings
from server.mirror import Entry, Neo4jMirror, SessionFold, plan
from server.mirror.schema import SHOW_CONSTRAINTS, SHOW_INDEXES, drop_schema
from session.actor import SessionActor
from session.changes import Change, VendorTurnTaken
from session.negotiation import Negotiation
from session.protocols import Brain, Mirror
from session.registry import SessionRegistry
from session.rules import Limits
from tests.fakes import DeferredMirror, FakeConnection, ScriptedBrain
from tests.neo4j_support import COUNT_SESSION_GRAPH, SECRET, running_mirror, wait_for

pytestmark = [pytest.mark.neo4j, pytest.mark.anyio]


@asynccontextmanager
async def registry_on(mirror: Mirror, brain: Brain | None = None) -> AsyncIterator[SessionRegistry]:
    registry = SessionRegistry(brain or RuleBasedVendor(), mirror, loader=mirror if hasattr(mirror, "load") else None)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        yield registry
        tg.cancel_scope.cancel()


async def play(
    registry: SessionRegistry,
    persona: Persona,
    *,
    item: str | None = None,
    after_turn: Callable[[SessionActor], Awaitable[None]] | None = None,
    closing_lines: int = 0,
) -> tuple[SessionActor, FakeConnection]:
    """Play `persona` to the end of a negotiation through the real actor, as a socket would."""
    actor = registry.create(learner_id=persona.name)
    conn = FakeConnection()
    actor.connect(conn)
    if item:
        actor.submit(conn, SceneFrame(type="scene", id="scene-1", object_grabbed=item))
    view = LearnerView()
    n = 0
    while not view.is_over and n < 30:
        n += 1
        actor.submit(conn, TranscriptFrame(type="transcript", id=f"t{n}", text=persona.next_line(view)))
        await wait_for(lambda n=n: len(conn.of_type("reply")) >= n, 5, f"reply {n}", every=0.002)  # type: ignore[misc]
        view = LearnerView.from_reply(conn.of_type("reply")[-1])
        if after_turn is not None:
            await after_turn(actor)
    for extra in range(closing_lines):
        actor.submit(conn, TranscriptFrame(type="transcript", id=f"after-{extra}", text="Dhanyavaad, bhaiya."))
        await wait_for(lambda k=n + extra + 1: len(conn.of_type("reply")) >= k, 5, "closing reply", every=0.002)  # type: ignore[misc]
    return actor, conn


async def flushed(mirror: Neo4jMirror, actor: SessionActor) -> None:
    assert await mirror.flushed(actor.session_id, 10.0), mirror.statistics()


def same_negotiation(a: Negotiation, b: Negotiation) -> None:
    for f in fields(Negotiation):
        if f.compare:  # not a cache (`_rule_limits` is worked out again from the level)
            assert getattr(a, f.name) == getattr(b, f.name), f.name


# ---------------------------------------------------------------------------- schema


async def samvad_schema(mirror: Neo4jMirror) -> tuple[dict[str, Any], dict[str, Any]]:
    constraints = {c["name"]: c for c in await mirror.read(SHOW_CONSTRAINTS) if c["name"].startswith("samvad_")}
    indexes = {i["name"]: i for i in await mirror.read(SHOW_INDEXES) if i["name"].startswith("samvad_")}
    return constraints, indexes


async def test_constraints_and_indexes_are_created_at_start_up(neo4j_uri: str) -> None:
    # The test database keeps its schema between runs: take it away first, so that only the
    # mirror's start-up can have made what is checked below.
    async with running_mirror(neo4j_uri) as mirror, AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
        constraints, indexes = await samvad_schema(mirror)
        for name in constraints:
            await driver.execute_query(drop_schema("CONSTRAINT", name))
        for name in set(indexes) - set(constraints):
            await driver.execute_query(drop_schema("INDEX", name))
        assert await samvad_schema(mirror) == ({}, {})
    async with running_mirror(neo4j_uri) as mirror:  # run() alone: nothing is written or asked for
        deadline = time.monotonic() + 15
        while True:
            constraints, indexes = await samvad_schema(mirror)
            online = all(i["state"] == "ONLINE" for i in indexes.values())
            if (len(constraints) == 5 and len(indexes) == 9 and online) or time.monotonic() > deadline:
                break
            await anyio.sleep(0.1)
    expected = {
        "samvad_session_id": (["Session"], ["session_id"]),
        "samvad_turn_key": (["Turn"], ["turn_key"]),
        "samvad_item_key": (["Item"], ["session_id", "name"]),
        "samvad_transition_key": (["StageTransition"], ["session_id", "at_turn"]),
        "samvad_learner_id": (["Learner"], ["learner_id"]),
    }
    for name, (labels, props) in expected.items():
        assert constraints[name]["type"] == "UNIQUENESS"
        assert (constraints[name]["labelsOrTypes"], constraints[name]["properties"]) == (labels, props)
        assert indexes[name]["state"] == "ONLINE"  # each constraint owns its index
    for name in ("samvad_session_outcome", "samvad_session_created", "samvad_turn_assessment",
                 "samvad_session_learner"):
        assert indexes[name]["state"] == "ONLINE"


# ---------------------------------------------------------------------------- idempotent, order-independent


async def recorded_stream() -> list[Change]:
    """The change stream of a real negotiation (a walk-away and back, a deal, answers after the end)."""
    recorder = DeferredMirror()
    async with registry_on(recorder) as registry:
        actor, _ = await play(registry, Walker("Apple"), item="Apple", closing_lines=2)
    return [c for c in recorder.changes if c.session_id == actor.session_id]


def entries_for(stream: list[Change], session_id: str) -> list[Entry]:
    fold = SessionFold()
    return [plan(fold, c._replace(session_id=session_id), time.perf_counter()) for c in stream]


def normalised(graph: dict[str, Any], session_id: str) -> Any:
    """The graph with the session id taken out, so two copies of one session compare equal."""
    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):
            return value.replace(session_id, "SID")
        return value
    return walk(graph)


async def test_replayed_and_reordered_batches_leave_exactly_the_same_graph(neo4j_uri: str) -> None:
    stream = await recorded_stream()
    assert [c.version for c in stream] == list(range(1, len(stream) + 1))
    assert {c.kind for c in stream} >= {"session", "scene", "learner_turn", "vendor_turn", "closing_reply"}
    tag = f"idem-{time.time_ns()}"
    ids = {"once": f"{tag}-once", "reversed": f"{tag}-reversed", "shuffled": f"{tag}-shuffled"}
    async with Neo4jMirror(neo4j_uri) as mirror:
        # In order, one batch.
        await mirror.write(entries_for(stream, ids["once"]))
        # One change per transaction, newest first, then the whole stream replayed twice.
        backwards = entries_for(stream, ids["reversed"])
        for entry in reversed(backwards):
            await mirror.write([entry])
        await mirror.write(backwards)
        await mirror.write(backwards)
        # Shuffled batches of three, then each batch again.
        shuffled = entries_for(stream, ids["shuffled"])
        random.Random(7).shuffle(shuffled)
        batches = [shuffled[i:i + 3] for i in range(0, len(shuffled), 3)]
        for batch in batches + batches[::-1]:
            await mirror.write(batch)

        graphs = {k: normalised(await mirror.graph(sid), sid) for k, sid in ids.items()}  # type: ignore[arg-type]
        counts = {k: (await mirror.read(COUNT_SESSION_GRAPH, session_id=sid))[0] for k, sid in ids.items()}
    assert graphs["once"] == graphs["reversed"] == graphs["shuffled"]
    assert counts["once"] == counts["reversed"] == counts["shuffled"]
    turns = sum(2 for c in stream if c.kind == "closing_reply") + sum(
        1 for c in stream if c.kind in ("learner_turn", "vendor_turn"))
    c = counts["once"]
    assert (c["sessions"], c["turns"], c["has_turn"], c["followed_by"]) == (1, turns, turns, turns - 1)
    assert c["transitions"] == c["stage_changed"] == sum(
        1 for ch in stream if isinstance(ch, VendorTurnTaken) and ch.stage is not ch.previous_stage)
    assert c["items"] == c["involves_item"] == 1
    assert graphs["once"]["session"]["version"] == len(stream)


async def test_followed_by_is_one_chain_in_turn_order_with_contiguous_turn_numbers(neo4j_uri: str) -> None:
    async with running_mirror(neo4j_uri) as mirror, registry_on(mirror) as registry:
        actor, _ = await play(registry, Polite("Orange"), item="Orange", closing_lines=2)
        await flushed(mirror, actor)
        graph = await mirror.graph(actor.session_id)
    assert graph is not None and graph["chains"] == 1 and graph["pending_changes"] == 0
    turns = graph["turns"]
    final = actor.negotiation.turn
    assert [t["ordinal"] for t in turns] == list(range(1, 2 * final + 5))
    assert graph["relationships"]["FOLLOWED_BY"] == [[i, i + 1] for i in range(1, 2 * final + 4)]
    played = [t for t in turns if not t["closing"]]
    assert [(t["turn_number"], t["role"]) for t in played] == [
        (n, role) for n in range(1, final + 1) for role in ("user", "vendor")]
    closing = [t for t in turns if t["closing"]]
    assert [(t["turn_number"], t["role"], t.get("client_id")) for t in closing] == [
        (final, "user", "after-0"), (final, "vendor", None), (final, "user", "after-1"), (final, "vendor", None)]
    assert all(len(t["text_snippet"]) <= 150 and t["text"].startswith(t["text_snippet"]) for t in turns)
    assert graph["session"]["turn_count"] == final and graph["session"]["last_seq"] == actor.negotiation.seq
    assert graph["relationships"]["HAS_TURN"] == len(turns)
    assert graph["items"] == [{"name": "Orange", "mentions": final, "turns": 2 * final}]


# ---------------------------------------------------------------------------- graph context and recovery


@pytest.mark.parametrize("persona", [Polite, Walker, Lowballer, Rude], ids=lambda p: p.name)
async def test_the_graph_context_computed_in_cypher_equals_the_actors(neo4j_uri: str, persona: type[Persona]) -> None:
    compared = 0

    async def compare(actor: SessionActor) -> None:
        nonlocal compared
        await flushed(mirror, actor)
        assert await mirror.graph_context(actor.session_id) == actor.negotiation.graph_context()
        compared += 1

    async with running_mirror(neo4j_uri) as mirror, registry_on(mirror) as registry:
        actor, _ = await play(registry, persona("Watermelon"), item="Watermelon", after_turn=compare)
    assert compared == actor.negotiation.turn >= 3
    context = actor.negotiation.graph_context()
    assert context.items_discussed and context.happiness_trend


async def test_load_rebuilds_every_session_exactly_as_the_actor_had_it(neo4j_uri: str) -> None:
    async with running_mirror(neo4j_uri) as mirror, registry_on(mirror) as registry:
        played = [await play(registry, p(item), item=item, closing_lines=1)
                  for p, item in ((Walker, "Tomato"), (Rude, "Pumpkin"), (Polite, "Apple"))]
        for actor, _ in played:
            await flushed(mirror, actor)
    # A fresh mirror, as after a restart.
    async with running_mirror(neo4j_uri) as fresh:
        for actor, _ in played:
            loaded = await fresh.load(actor.session_id, Limits())
            assert loaded is not None
            negotiation, version = loaded
            same_negotiation(negotiation, actor.negotiation)
            assert version == actor.negotiation.version == fresh.durable_version(actor.session_id)
        assert await fresh.load("no-such-session", Limits()) is None


async def test_a_learner_turn_without_its_answer_comes_back_pending_and_is_answered(neo4j_uri: str) -> None:
    async with running_mirror(neo4j_uri) as mirror, registry_on(mirror, ScriptedBrain(delay=30)) as registry:
        actor = registry.create()
        conn = FakeConnection()
        actor.connect(conn)
        actor.submit(conn, TranscriptFrame(type="transcript", id="t1", text="Namaste! Tamatar kitne ka?"))
        await wait_for(lambda: conn.of_type("ack"), 10, "the learner turn to be stored")
        assert actor.negotiation.pending is not None and not conn.of_type("reply")
        memory = actor.negotiation
    async with running_mirror(neo4j_uri) as fresh, registry_on(fresh) as registry:
        loaded = await fresh.load(actor.session_id, Limits())
        assert loaded is not None and loaded[0].pending is not None
        same_negotiation(loaded[0], memory)
        recovered = await registry.get(actor.session_id)  # its actor answers the pending turn at once
        assert recovered is not None
        conn = FakeConnection()
        recovered.connect(conn)
        await wait_for(lambda: recovered.negotiation.pending is None, 5, "the pending turn to be answered")
        await flushed(fresh, recovered)
        graph = await fresh.graph(actor.session_id)
    assert graph is not None
    assert [(t["turn_number"], t["role"]) for t in graph["turns"]] == [(1, "user"), (1, "vendor")]
    assert graph["turns"][1]["seq"] == 1


# ---------------------------------------------------------------------------- durability figures


async def test_durable_callbacks_report_the_highest_stored_version(neo4j_uri: str) -> None:
    seen: dict[str, int] = {}
    async with running_mirror(neo4j_uri, flush_ms=5) as mirror:
        mirror.subscribe_durable(lambda sid, v: seen.__setitem__(sid, max(v, seen.get(sid, 0))))
        stream = await recorded_stream()
        sid = f"durable-{time.time_ns()}"
        for change in stream:
            mirror.submit(change._replace(session_id=sid))
        assert mirror.durable_version(sid) == 0  # submit never waits
        await wait_for(lambda: seen.get(sid) == len(stream), 10, "every change to be durable")
        stats = mirror.statistics()
    assert mirror.durable_version(sid) == len(stream)
    assert stats["kind"] == "neo4j" and stats["connected"] is True and stats["queue_depth"] == 0
    assert stats["rows"] >= len(stream) and stats["buffer_full"] is False
    # Batched: the burst (submitted before the writer ran) went in one UNWIND transaction, not one
    # per change.
    assert len(stream) > 10 and stats["batches"] == 1, (stats["batches"], len(stream))
    assert stats["lag_p99_ms"] is not None and stats["failures"] == 0


# ---------------------------------------------------------------------------- the HTTP endpoints


def app_settings(neo4j_uri: str, **extra: object) -> Any:
    return load_settings(NEO4J_URI=neo4j_uri, MIRROR="neo4j", BRAIN="rules", SAMVAD_SECRET=SECRET, **extra)


@asynccontextmanager
async def serving(settings: Any) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://samvad.test") as client:
        yield app, client


async def test_a_session_is_rebuilt_over_http_after_a_restart_and_its_graph_is_served(neo4j_uri: str) -> None:
    settings = app_settings(neo4j_uri)
    async with serving(settings) as (app, client):
        created = (await client.post("/api/sessions", json={"learner_id": "asha"})).json()
        sid, player, spectator = created["session_id"], created["player_token"], created["spectator_token"]
        registry = app.state.services.registry
        actor = registry.live(sid)
        conn = FakeConnection()
        actor.connect(conn)
        persona, view = Walker("Tomato"), LearnerView()
        for n in range(1, 4):
            actor.submit(conn, TranscriptFrame(type="transcript", id=f"t{n}", text=persona.next_line(view)))
            await wait_for(lambda n=n: len(conn.of_type("reply")) == n, 5, "a reply")  # type: ignore[misc]
            view = LearnerView.from_reply(conn.of_type("reply")[-1])
        before = (await client.get(f"/api/sessions/{sid}", headers={"authorization": f"Bearer {player}"})).json()
    # The first server is gone (its mirror flushed on the way out); a second one rebuilds from Neo4j.
    async with serving(app_settings(neo4j_uri)) as (app, client):
        assert app.state.services.registry.live(sid) is None
        after = await client.get(f"/api/sessions/{sid}", headers={"authorization": f"Bearer {spectator}"})
        assert after.status_code == 200 and after.json() == before
        assert before["ledger"]["turns"] == 3  # the per-session ledger totals came back from Neo4j too
        assert app.state.services.registry.statistics()["recovered"] == 1
        graph = await client.get(f"/api/sessions/{sid}/graph", headers={"authorization": f"Bearer {player}"})
        assert graph.status_code == 200
        body = graph.json()
        assert set(body) >= {"session", "turns", "items", "transitions", "relationships", "context", "chains"}
        assert body["chains"] == 1 and len(body["turns"]) == 6 and body["session"]["learner_id"] == "asha"
        assert body["context"]["turns_in_current_stage"] >= 1
        assert [x["to_stage"] for x in body["transitions"]] == [c["to_stage"] for c in before["stage_changes"]]
        assert (await client.get(f"/api/sessions/{sid}/graph")).status_code == 401
        other = (await client.post("/api/sessions", json={})).json()
        wrong = await client.get(f"/api/sessions/{sid}/graph",
                                 headers={"authorization": f"Bearer {other['player_token']}"})
        assert wrong.status_code == 403
        # A session that is live but not stored yet is served once its changes are written.
        fresh = await client.get(f"/api/sessions/{other['session_id']}/graph",
                                 headers={"authorization": f"Bearer {other['player_token']}"})
        assert fresh.status_code == 200 and fresh.json()["turns"] == []
        # The rebuilt session: a resume level with it gets a snapshot, and a transcript the first
        # server already applied is acknowledged as a duplicate, not applied again.
        actor = app.state.services.registry.live(sid)
        assert actor is not None
        again = FakeConnection()
        actor.connect(again)
        actor.submit(again, ResumeFrame(type="resume", id="r1", last_seq=before["seq"]))
        actor.submit(again, TranscriptFrame(type="transcript", id="t1", text="Namaste!"))
        await wait_for(lambda: len(again.of_type("ack")) == 2, 5, "two acks")
        snap = again.of_type("snapshot")
        assert len(snap) == 1 and snap[0]["seq"] == before["seq"] and "rebuilt" in str(snap[0]["reason"])
        assert snap[0]["state"]["turn"] == before["turn"]  # type: ignore[index]
        assert [a.get("duplicate") for a in again.of_type("ack")] == [False, True]
        assert again.of_type("reply") == [] and actor.negotiation.seq == before["seq"]
        graph = await client.get(f"/api/sessions/{sid}/graph", headers={"authorization": f"Bearer {player}"})
        assert [t["client_id"] for t in graph.json()["turns"] if t["role"] == "user"] == ["t1", "t2", "t3"]


def nearest_rank(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * q) - 1)]


async def test_stats_match_figures_computed_by_hand_from_the_sessions(neo4j_uri: str) -> None:
    settings = app_settings(neo4j_uri, ADMIN_KEY="teacher-key-" + "m" * 24)
    since = time.time()
    scenario = "jaipur-bazaar"
    scripted = [(Polite, "Tomato"), (Polite, "Apple"), (Walker, "Tomato"), (Walker, "Orange"),
                (Lowballer, "Pumpkin"), (Rude, "Tomato"), (Lowballer, "Tomato")]
    async with serving(settings) as (app, client):
        registry = app.state.services.registry
        played = [await play(registry, persona(item), item=item) for persona, item in scripted]
        for actor, _ in played:
            assert await app.state.services.mirror.flushed(actor.session_id, 10.0)
        assert (await client.get("/api/stats")).status_code == 401
        assert (await client.get("/api/stats", headers={"authorization": "Bearer wrong"})).status_code == 401
        answer = await client.get(f"/api/stats?since={since}&scenario={scenario}",
                                  headers={"authorization": "Bearer teacher-key-" + "m" * 24})
        assert answer.status_code == 200
        stats = answer.json()

    # By hand, from the negotiations in memory and the replies the learners saw.
    summaries = [actor.negotiation.summary() for actor, _ in played]
    assert all(s is not None for s in summaries)
    outcomes: dict[str, int] = {}
    for s in summaries:
        outcomes[s.outcome.value] = outcomes.get(s.outcome.value, 0) + 1  # type: ignore[union-attr]
    assert stats["outcomes"] == outcomes and stats["sessions"] == len(scripted)
    assert outcomes.get("deal", 0) >= 3 and sum(outcomes.values()) - outcomes.get("deal", 0) >= 2

    deal_turns = [s.turns for s in summaries if s and s.outcome.value == "deal"]
    t = stats["turns_to_deal"]
    assert (t["deals"], t["min"], t["max"]) == (len(deal_turns), min(deal_turns), max(deal_turns))
    assert t["avg"] == pytest.approx(sum(deal_turns) / len(deal_turns))
    assert (t["p50"], t["p90"]) == (nearest_rank(deal_turns, 0.5), nearest_rank(deal_turns, 0.9))

    by_item: dict[str, list[float]] = {}
    for s in summaries:
        if s and s.outcome.value == "deal":
            assert s.item and s.first_quote and s.final_price
            by_item.setdefault(s.item, []).append(100.0 * (1 - s.final_price / s.first_quote))
    discounts = {d["item"]: d for d in stats["discount"]["by_item"]}
    assert set(discounts) == set(by_item)
    for item, values in by_item.items():
        assert discounts[item]["deals"] == len(values)
        assert discounts[item]["avg_discount_pct"] == pytest.approx(sum(values) / len(values))
    every = [v for values in by_item.values() for v in values]
    assert stats["discount"]["avg_discount_pct"] == pytest.approx(sum(every) / len(every))

    insults: dict[tuple[Any, ...], int] = {}
    for actor, conn in played:
        users = {h.turn: h for h in actor.negotiation.history if h.role == "user"}
        for reply in conn.of_type("reply"):
            if reply["offer_assessment"] == "insult":
                user = users[reply["turn"]]  # type: ignore[index]
                ratio = round(user.offer / user.quote, 2) if user.offer is not None and user.quote else None
                key = (user.item, user.offer, user.quote, ratio)
                insults[key] = insults.get(key, 0) + 1
    assert insults, "the lowballers and the rude learner draw insults"
    got = {(r["item"], r["offer"], r["quote"], r["ratio"]): r["insults"] for r in stats["insults"]["by_offer"]}
    assert got == insults
    per_item: dict[str, int] = {}
    for (item, *_), count in insults.items():
        per_item[item] = per_item.get(item, 0) + count
    assert {r["item"]: r["insults"] for r in stats["insults"]["by_item"]} == per_item
