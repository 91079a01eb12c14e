"""Logs are JSON lines; turn records carry the session, the turn and its timings (INFO when the turn
called a model, DEBUG when it did not)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from schemas.brain import BrainRequest, BrainResult, DeltaSink, Ledger
from schemas.enums import Stage
from schemas.frames import TranscriptFrame
from server.logs import configure_logging
from session.actor import SessionActor
from session.mirror import MemoryMirror
from session.negotiation import Negotiation
from tests.fakes import FakeConnection, ScriptedBrain, decision, hosted
from tests.servers import client, close_code, create, server_process

pytestmark = pytest.mark.anyio


class _ModelBrain(ScriptedBrain):
    """A scripted brain whose answers say they took one model call, as an LLM brain's ledger does."""

    async def propose(self, request: BrainRequest, on_delta: DeltaSink | None = None) -> BrainResult:
        result = await super().propose(request, on_delta)
        return result.model_copy(update={"ledger": Ledger(llm_calls=1, prompt_tokens=900, completion_tokens=40)})


async def _records_of_one_turn(level: str, brain: ScriptedBrain) -> list[dict[str, Any]]:
    out = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging(level, out)
    try:
        actor = SessionActor(Negotiation(session_id="log-1", scenario_name="jaipur-bazaar", created_at=0.0),
                             brain, MemoryMirror())
        player = FakeConnection()
        async with hosted(actor):
            actor.connect(player)
            actor.submit(player, TranscriptFrame(type="transcript", id="t1", text="hi"))
            with anyio.fail_after(3):
                while not player.of_type("reply"):  # noqa: ASYNC110
                    await anyio.sleep(0.005)
            actor.stop()
    finally:
        root.handlers[:], saved_level = saved
        root.setLevel(saved_level)
    return [json.loads(line) for line in out.getvalue().splitlines()]


async def test_a_turn_that_called_a_model_is_an_info_record_with_its_ledger() -> None:
    records = await _records_of_one_turn("INFO", _ModelBrain(lambda r: decision("Namaste ji", 50, Stage.GREETING)))
    turn = next(r for r in records if r["msg"] == "turn")
    assert turn["level"] == "INFO" and turn["session_id"] == "log-1" and turn["turn"] == 1
    assert (turn["timings"]["llm_calls"], turn["timings"]["prompt_tokens"]) == (1, 900)


async def test_a_turn_without_a_model_call_is_a_debug_record() -> None:
    """The rule brain's turn: its count and timings are in /metrics; at INFO it is not logged."""
    at_info = await _records_of_one_turn("INFO", ScriptedBrain(lambda r: decision("Namaste ji", 50, Stage.GREETING)))
    assert not [r for r in at_info if r["msg"] == "turn"]
    assert {"connection opened"} <= {r["msg"] for r in at_info}
    at_debug = await _records_of_one_turn("DEBUG", ScriptedBrain(lambda r: decision("Namaste ji", 50, Stage.GREETING)))
    turn = next(r for r in at_debug if r["msg"] == "turn")
    assert turn["level"] == "DEBUG" and turn["timings"]["llm_calls"] == 0


async def test_turn_and_override_records() -> None:
    # +49 and an illegal stage
    records = await _records_of_one_turn("DEBUG", ScriptedBrain(lambda r: decision("Deal!", 99, Stage.DEAL)))
    turn = next(r for r in records if r["msg"] == "turn")
    assert turn["level"] == "DEBUG" and turn["session_id"] == "log-1" and turn["turn"] == 1
    assert {"brain_ms", "validation_ms", "total_ms", "queue_ms"} <= set(turn["timings"])
    overrides = {r["rule"]: r for r in records if r["msg"].startswith("rules override")}
    assert overrides["max_mood_delta"]["level"] == "WARNING"
    assert (overrides["max_mood_delta"]["proposed"], overrides["max_mood_delta"]["applied"]) == (49, 15)
    assert overrides["illegal_transition"]["proposed"] == "GREETING->DEAL"
    assert all(r.get("session_id") == "log-1" for r in records if r["logger"] == "samvad.session")


def test_uvicorn_connection_records_are_dropped_and_tokens_redacted() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("INFO", out)
    try:
        uvicorn_error = logging.getLogger("uvicorn.error")
        # What uvicorn's WebSocket protocols log for every connection, token in the URL.
        uvicorn_error.info('%s - "WebSocket %s" [accepted]', "127.0.0.1:5", "/ws/sessions/s1?token=SECRET1")
        uvicorn_error.info('%s - "WebSocket %s" %d', "127.0.0.1:5", "/ws/sessions/s1?token=SECRET2", 403)
        uvicorn_error.info("connection open")
        uvicorn_error.info("connection closed")
        uvicorn_error.info("Started server process [%d]", 42)
        logging.getLogger("samvad.test").warning("fetched /ws/sessions/s1?x=1&token=SECRET3&y=2")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    text = out.getvalue()
    assert "SECRET" not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["msg"] for r in records] == ["Started server process [42]",
                                           "fetched /ws/sessions/s1?x=1&token=[redacted]&y=2"]


async def test_a_running_server_never_logs_a_session_token(tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    with server_process({"LOG_LEVEL": "INFO"}, log_path=log_path) as served:
        created = await create(served)
        sid, token = created["session_id"], created["player_token"]
        async with client(served.ws_url(sid, token)) as player:
            await player.until("welcome")
            await player.turn("t1", "Namaste bhaiya")
        async with client(served.ws_url(sid, created["spectator_token"][:-3] + "AAA")) as intruder:
            assert await close_code(intruder) == 4401
    text = log_path.read_text()
    assert token not in text and created["spectator_token"][:-3] not in text
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    messages = [r["msg"] for r in records if r.get("session_id") == sid]
    assert {"session created", "connection opened", "connection closed", "connection refused"} <= set(messages)
    assert "turn" not in messages  # the rule brain's turn is a DEBUG record
    assert not any(r["logger"] == "uvicorn.error" and "WebSocket" in r["msg"] for r in records)


@pytest.mark.parametrize("name", ["httpx", "httpx2", "openai", "neo4j"])
def test_client_libraries_log_only_warnings_at_info(name: str) -> None:
    """One record per model request ("HTTP Request: POST ...") would be a log line per turn."""
    stream = io.StringIO()
    try:
        configure_logging("INFO", stream)
        logging.getLogger(name).info("HTTP Request: POST http://model/v1/chat/completions")
        logging.getLogger(name).warning("a warning still goes through")
    finally:
        configure_logging("INFO")
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [r["msg"] for r in records] == ["a warning still goes through"]


class _CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


async def test_records_of_one_loop_pass_are_written_together_and_in_order() -> None:
    from server.logs import JsonFormatter, PassBatchingHandler

    stream = _CountingStream()
    handler = PassBatchingHandler(stream)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("samvad.test.batching")
    log.addHandler(handler)
    log.propagate, log.level = False, logging.INFO
    try:
        for n in range(3):
            log.info("record %d", n)
        assert stream.writes == 0  # kept until the end of this pass
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        assert stream.writes == 1
        log.info("record 3")
        # Off the loop's thread a record is written at once, after what was kept.
        await anyio.to_thread.run_sync(log.info, "from a thread")
        assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()] == [
            "record 0", "record 1", "record 2", "record 3", "from a thread"]
        # A loop that stops before the end of its pass (its flush never runs) holds nothing back
        # from the next loop's records.
        def on_a_loop_that_ends() -> None:
            import asyncio

            other = asyncio.new_event_loop()
            asyncio._set_running_loop(other)
            try:
                log.info("on a loop that ended")
            finally:
                asyncio._set_running_loop(None)
                other.close()

        import threading

        elsewhere = threading.Thread(target=on_a_loop_that_ends)
        elsewhere.start()
        elsewhere.join()
        log.info("back on this loop")
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()][-2:] == [
            "on a loop that ended", "back on this loop"]
        log.info("at shutdown")
        handler.close()  # `logging.shutdown` flushes and closes every handler at exit
        assert json.loads(stream.getvalue().splitlines()[-1])["msg"] == "at shutdown"
    finally:
        log.removeHandler(handler)
        log.propagate = True
