"""The `tips` event: one per answered learner turn, after its other events, grounded or generic."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from brain.knowledge.library import KnowledgeLibrary
from brain.knowledge.store import MemoryPlaybookStore
from brain.rules_vendor import RuleBasedVendor
from clients.bots.checker import SessionChecker
from schemas.enums import Stage
from schemas.frames import ResumeFrame, TranscriptFrame
from session.actor import SessionActor
from session.changes import VendorTurnTaken
from session.negotiation import Negotiation
from session.protocols import TipSource
from tests.fakes import DeferredMirror, FakeConnection, ScriptedBrain, decision, hosted

pytestmark = pytest.mark.anyio

LIBRARY = KnowledgeLibrary(MemoryPlaybookStore())


@asynccontextmanager
async def running(brain: object, tips: TipSource | None = LIBRARY,
                  mirror: DeferredMirror | None = None) -> AsyncIterator[SessionActor]:
    negotiation = Negotiation(session_id="s1", scenario_name="jaipur-bazaar", created_at=0.0)
    actor = SessionActor(negotiation, brain, mirror or DeferredMirror(), tips=tips)  # type: ignore[arg-type]
    if mirror is None:
        actor.mirror.room = 1_000_000  # type: ignore[attr-defined]
    async with hosted(actor):
        yield actor


async def until(condition: Callable[[], bool], limit: float = 3.0) -> None:
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.005)


def say(fid: str, text: str) -> TranscriptFrame:
    return TranscriptFrame(type="transcript", id=fid, text=text)


def checked(conn: FakeConnection) -> SessionChecker:
    checker = SessionChecker()
    for frame in conn.sent:
        checker.feed(frame)
    checker.finish()
    return checker


async def test_each_turn_ends_with_one_tips_event_grounded_in_the_packs_notes() -> None:
    async with running(RuleBasedVendor()) as actor:
        player, watcher = FakeConnection("player"), FakeConnection("spectator")
        actor.connect(player)
        actor.connect(watcher)
        actor.submit(player, say("t1", "Namaste bhaiya, kitne ka hai?"))
        await until(lambda: bool(player.of_type("tips")))
        actor.submit(player, say("t2", "What is the weather in Tokyo?"))
        await until(lambda: len(player.of_type("tips")) == 2)
    stream = player.stream()
    kinds = [f["type"] for f in stream]
    assert kinds.count("tips") == 2 and kinds[-1] == "tips"
    first_turn = stream[: kinds.index("tips") + 1]
    assert first_turn[0]["type"] == "reply" and first_turn[-1]["type"] == "tips"
    assert [f["seq"] for f in stream] == list(range(1, len(stream) + 1))
    grounded, generic = player.of_type("tips")
    assert grounded["turn"] == 1 and generic["turn"] == 2
    assert grounded["cards"][0]["grounded"] is True
    assert "kitne ka hai" in grounded["cards"][0]["body"]
    assert grounded["cards"][0]["source_chunk_ids"]
    assert [(c["grounded"], c["type"], c["source_chunk_ids"]) for c in generic["cards"]] == [(False, "generic", [])]
    assert watcher.stream() == stream  # spectators see the same cards
    assert checked(player).ok, checked(player).violations


async def test_the_vendor_turn_records_the_seq_the_tips_took() -> None:
    mirror = DeferredMirror()
    async with running(RuleBasedVendor(), mirror=mirror) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, say("t1", "kitne ka hai?"))
        await until(lambda: bool(player.of_type("tips")))
    tips_seq = player.of_type("tips")[0]["seq"]
    vendor_turns = [c for c in mirror.changes if isinstance(c, VendorTurnTaken)]
    assert vendor_turns[-1].seq == tips_seq  # a rebuilt session continues after it
    assert actor.negotiation.seq == tips_seq


async def test_tips_come_after_the_end_of_the_session_and_the_checker_agrees() -> None:
    script = {1: ("Tomatoes, 60 a kilo.", 55, Stage.INQUIRY), 2: ("Fifty, my friend.", 60, Stage.HAGGLING),
              3: ("Theek hai, pakka! 45 it is.", 65, Stage.DEAL)}
    brain = ScriptedBrain(lambda r: decision(*script[r.turn], counter_price=45))
    async with running(brain) as actor:
        player = FakeConnection()
        actor.connect(player)
        for n, line in enumerate(("Tamatar kitne ka?", "Bahut mehenga, 40?", "Chalo, 45, theek hai pakka"), 1):
            actor.submit(player, say(f"t{n}", line))
            await until(lambda n=n: len(player.of_type("tips")) == n)  # type: ignore[misc]
    kinds = [f["type"] for f in player.stream()]
    assert kinds[-3:] == ["session.ended", "tips", "session.report"]
    assert checked(player).ok, checked(player).violations


async def test_resume_replays_the_tips_with_the_rest() -> None:
    async with running(RuleBasedVendor()) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, say("t1", "kitne ka hai?"))
        await until(lambda: bool(player.of_type("tips")))
        late = FakeConnection()
        actor.connect(late)
        actor.submit(late, ResumeFrame(type="resume", id="r1", last_seq=0))
        await until(lambda: bool(late.of_type("tips")))
    assert late.of_type("tips") == player.of_type("tips")


async def test_cards_are_the_same_for_the_same_words_in_two_sessions() -> None:
    seen = []
    for _ in range(2):
        async with running(RuleBasedVendor()) as actor:
            player = FakeConnection()
            actor.connect(player)
            actor.submit(player, say("t1", "bahut mehenga hai, thoda kam karo"))
            await until(lambda conn=player: bool(conn.of_type("tips")))  # type: ignore[misc]
        seen.append(player.of_type("tips")[0]["cards"])
    assert seen[0] == seen[1]
    assert any("mehenga" in card["body"] for card in seen[0])


async def test_no_tip_source_means_no_tips_event() -> None:
    async with running(RuleBasedVendor(), tips=None) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, say("t1", "kitne ka hai?"))
        await until(lambda: bool(player.of_type("reply")))
        await anyio.sleep(0.05)
    assert not player.of_type("tips")


def test_the_checker_catches_misplaced_or_ungrounded_tips() -> None:
    checker = SessionChecker()
    state = {"stage": "GREETING", "happiness_score": 50, "vendor_mood": "neutral", "turn": 0, "seq": 0}
    checker.feed({"type": "welcome", "session_id": "s", "seq": 0, "state": state})
    checker.feed({"type": "tips", "session_id": "s", "seq": 1, "turn": 0, "cards": []})
    assert any("not the answered turn" in v for v in checker.violations)
    assert any("cards, not 1..6" in v for v in checker.violations)
    bad = SessionChecker()
    bad.feed({"type": "welcome", "session_id": "s", "seq": 0, "state": state})
    bad.feed({"type": "reply", "session_id": "s", "seq": 1, "turn": 1, "happiness_score": 50,
              "vendor_mood": "neutral", "negotiation_state": "GREETING", "is_terminal": False})
    bad.feed({"type": "tips", "session_id": "s", "seq": 2, "turn": 1, "cards": [
        {"card_id": "a", "title": "t", "body": "b", "type": "coaching", "grounded": True, "source_chunk_ids": []},
        {"card_id": "g", "title": "t", "body": "b", "type": "generic", "grounded": False, "source_chunk_ids": []},
    ]})
    assert any("without its sources" in v for v in bad.violations)
    assert any("not the one generic card" in v for v in bad.violations)
