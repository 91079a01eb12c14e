"""Logs are JSON lines; turn records carry the session, the turn and its timings."""

from __future__ import annotations

import io
import json
import logging

import anyio
import pytest

from schemas.enums import Stage
from schemas.frames import TranscriptFrame
from server.logs import configure_logging
from session.actor import SessionActor
from session.mirror import MemoryMirror
from session.negotiation import Negotiation
from tests.fakes import FakeConnection, ScriptedBrain, decision

pytestmark = pytest.mark.anyio


async def test_turn_and_override_records() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("INFO", out)
    try:
        brain = ScriptedBrain(lambda r: decision("Deal!", 99, Stage.DEAL))  # +49 and an illegal stage
        actor = SessionActor(Negotiation(session_id="log-1", scenario_name="jaipur-bazaar", created_at=0.0),
                             brain, MemoryMirror())
        player = FakeConnection()
        async with anyio.create_task_group() as tg:
            tg.start_soon(actor.run)
            actor.connect(player)
            actor.submit(player, TranscriptFrame(type="transcript", id="t1", text="hi"))
            with anyio.fail_after(3):
                while not player.of_type("reply"):  # noqa: ASYNC110
                    await anyio.sleep(0.005)
            actor.stop()
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    turn = next(r for r in records if r["msg"] == "turn")
    assert turn["level"] == "INFO" and turn["session_id"] == "log-1" and turn["turn"] == 1
    assert {"brain_ms", "validation_ms", "total_ms", "queue_ms"} <= set(turn["timings"])
    overrides = {r["rule"]: r for r in records if r["msg"].startswith("rules override")}
    assert overrides["max_mood_delta"]["level"] == "WARNING"
    assert (overrides["max_mood_delta"]["proposed"], overrides["max_mood_delta"]["applied"]) == (49, 15)
    assert overrides["illegal_transition"]["proposed"] == "GREETING->DEAL"
    assert all(r.get("session_id") == "log-1" for r in records if r["logger"] == "samvad.session")
