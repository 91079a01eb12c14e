"""Per-stage timings of a spoken turn (issue #34, docs/voice.md "Per-stage timings").

Against a live server with the fake OpenAI speech services: an open microphone's turn carries the
wait that ended it on its `speech` and its reply's `timings`, the player's first `reply.audio`
carries the speech service's first byte and the first audio, the spectators get the same figures
as `reply.spoken`, and `/metrics` counts each stage once. A push-to-talk turn has no server wait,
and a typed turn has no voice stages at all.
"""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from schemas.enums import LanguageCode
from schemas.frames import Reply, ReplyAudio, ReplySpoken, SpokenTimings, TranscriptFrame
from session.actor import SessionActor
from session.messages import Recognised
from session.mirror import MemoryMirror
from session.negotiation import Negotiation
from session.voice_stages import KEPT as VOICE_STAGES_KEPT
from tests.fakes import FakeConnection, ScriptedBrain, hosted
from tests.openai_server import FakeOpenAI
from tests.servers import Client, client, create, running_server
from tests.voice_support import speech_settings, tone
from voice.open_mic import BYTES_PER_MS
from voice.speaker import Speaker

pytestmark = pytest.mark.anyio


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


async def first_audio(c: Client, turn: int) -> dict[str, Any]:
    """The first `reply.audio` of the reply to `turn` that has sound (a thinking sound is none of it)."""
    while True:
        frame = await c.until("reply.audio", wait=20, turn=turn)
        if frame["data"] and not frame["filler"]:
            return frame


async def stream(c: Client, stream_id: str, pcm: bytes) -> None:
    for at in range(0, len(pcm), 6400):
        await c.send({"type": "audio", "id": stream_id, "event": "chunk",
                      "data": base64.b64encode(pcm[at:at + 6400]).decode()})


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng to speak the learner's lines")
async def test_an_open_microphone_turn_carries_its_stages_to_the_reply_the_audio_the_spectators_and_metrics(
        openai_fake: FakeOpenAI) -> None:
    from tests.turn_set import piece

    line = piece("How much are the tomatoes?", "en-us", 150)
    silence = b"\0" * (2000 * BYTES_PER_MS)
    async with running_server(**speech_settings(openai_fake)) as served, httpx.AsyncClient() as http:
        created = await create(served)
        sid = created["session_id"]
        async with client(served.ws_url(sid, created["player_token"]) + "&voice=1") as c, \
                client(served.ws_url(sid, created["spectator_token"])) as watcher:
            await c.until("welcome")
            await watcher.until("welcome")
            await c.send({"type": "audio", "id": "mic", "event": "open", "format": "pcm16", "language": "en-IN"})
            await stream(c, "mic", silence[:400 * BYTES_PER_MS] + line + silence)
            heard = await c.until("speech", id="mic.1", wait=20)
            reply = await c.until("reply", in_reply_to="mic.1", wait=20)
            audio = await first_audio(c, reply["turn"])
            spoken = await watcher.until("reply.spoken", wait=20, turn=reply["turn"])
            scraped = samples((await http.get(f"{served.base_url}/metrics")).text)
            await c.send({"type": "audio", "id": "mic", "event": "close"})
        # The wait that ended the turn: at least the level's (intermediate: 700 ms of silence), and
        # under the thinking wait, as the server decided it, on the `speech` and the reply alike.
        wait = heard["end_of_turn_ms"]
        assert 700 <= wait < 2900
        timings = reply["timings"]
        assert timings["end_of_turn_ms"] == wait and timings["stt_ms"] == heard["stt_ms"] >= 0
        assert timings["stt"] == heard["stt"] == "openai"
        # The first audio: after the transcript was ready, measured from the same end of the turn.
        figures = audio["timings"]
        assert figures["in_reply_to"] == "mic.1" and figures["tts_first_byte_ms"] >= 0
        assert figures["first_audio_ms"] >= heard["stt_ms"]
        later = [f for f in c.seen if f["type"] == "reply.audio" and f is not audio and f.get("timings")]
        assert later == []  # one piece of the reply carries them
        # The spectator gets the player's figures; the player has them on its audio, not twice.
        assert spoken["timings"] == figures and spoken["tts"] == audio["tts"]
        assert not any(f["type"] == "reply.spoken" for f in c.seen)
        tts = audio["tts"]
        assert scraped[("samvad_voice_end_of_turn_seconds_count", ())] == 1
        assert scraped[("samvad_voice_end_of_turn_seconds_sum", ())] == pytest.approx(wait / 1000)
        assert scraped[("samvad_voice_stt_seconds_count", (("stt", "openai"),))] == 1
        assert scraped[("samvad_voice_tts_first_byte_seconds_count", (("tts", tts),))] == 1
        assert scraped[("samvad_voice_first_audio_seconds_count", (("tts", tts),))] == 1
        assert scraped[("samvad_voice_first_audio_seconds_sum", (("tts", tts),))] == pytest.approx(
            figures["first_audio_ms"] / 1000)


async def test_a_push_to_talk_turn_has_no_server_wait_and_a_typed_turn_no_voice_stages(
        openai_fake: FakeOpenAI) -> None:
    async with running_server(**speech_settings(openai_fake)) as served, httpx.AsyncClient() as http:
        created = await create(served)
        async with client(served.ws_url(created["session_id"], created["player_token"]) + "&voice=1") as c:
            await c.until("welcome")
            await c.send({"type": "audio", "id": "u1", "event": "start", "format": "pcm16", "data": base64.b64encode(
                tone(0.5)).decode()})
            await c.send({"type": "audio", "id": "u1", "event": "end"})
            heard = await c.until("speech", id="u1", wait=20)
            reply = await c.until("reply", in_reply_to="u1", wait=20)
            audio = await first_audio(c, reply["turn"])
            assert heard["end_of_turn_ms"] is None and heard["stt_ms"] >= 0
            assert reply["timings"]["end_of_turn_ms"] is None and reply["timings"]["stt_ms"] == heard["stt_ms"]
            assert audio["timings"]["in_reply_to"] == "u1"
            assert audio["timings"]["first_audio_ms"] >= heard["stt_ms"]
            await c.until("reply.audio", wait=20, turn=reply["turn"], final=True)
            typed = (await c.turn("t2", "Okay, and the onions?"))[0]
            assert typed["timings"]["stt_ms"] is None and typed["timings"]["end_of_turn_ms"] is None
            more = await first_audio(c, typed["turn"])
            assert more.get("timings") is None  # no spoken turn to answer: no figures
            scraped = samples((await http.get(f"{served.base_url}/metrics")).text)
        assert scraped[("samvad_voice_end_of_turn_seconds_count", ())] == 0
        assert scraped[("samvad_voice_stt_seconds_count", (("stt", "openai"),))] == 1
        assert sum(v for (name, _), v in scraped.items() if name == "samvad_voice_first_audio_seconds_count") == 1


class SlowVoice:
    """A TTS whose first audio comes 50 ms after it is asked, in two pieces."""

    name = "slow"
    sample_rate = 8000

    async def synthesize(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> AsyncIterator[bytes]:
        await anyio.sleep(0.05)
        yield b"\x01\x00" * 10
        yield b"\x02\x00" * 10


def reply(turn: int, text: str) -> Reply:
    return Reply(session_id="s", seq=turn, turn=turn, text=text, happiness_score=50, negotiation_state="GREETING",
                 vendor_mood="neutral", counter_price=None, suggested_user_response="", is_terminal=False)


async def test_only_the_first_sound_of_the_reply_begun_after_a_spoken_turn_carries_the_figures() -> None:
    sent: list[ReplyAudio] = []
    speaker = Speaker(SlowVoice(), sent.append, "s", lambda: "en-IN")
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        speaker.observe(reply(1, "Namaste ji. Welcome."))  # no spoken turn before it: no figures
        await anyio.sleep(0.3)
        ended = time.perf_counter()
        speaker.turn_ended("u1", ended)
        speaker.observe(reply(2, "Tomatoes are sixty. Very fresh."))
        await anyio.sleep(0.3)
        speaker.turn_ended("u2", time.perf_counter())
        speaker.turn_ended(None)  # the session did not take it: the next reply answers nothing spoken
        speaker.observe(reply(3, "Anything else?"))
        await anyio.sleep(0.2)
        speaker.close()
    assert {e.turn for e in sent} == {1, 2, 3}
    timed = [e for e in sent if e.timings is not None]
    assert [(e.turn, e.sentence, e.chunk) for e in timed] == [(2, 0, 0)] and timed[0].data
    figures = timed[0].timings
    assert figures is not None and figures.in_reply_to == "u1"
    assert 50 <= figures.tts_first_byte_ms <= figures.first_audio_ms


async def test_the_actor_keeps_recent_turns_stages_for_their_replies_and_tells_only_the_spectators() -> None:
    actor = SessionActor(Negotiation(session_id="s1", scenario_name="jaipur-bazaar", created_at=0.0), ScriptedBrain(),
                         MemoryMirror())
    async with hosted(actor):
        player, watcher = FakeConnection("player"), FakeConnection("spectator")
        actor.connect(player)
        actor.connect(watcher)
        for n in range(VOICE_STAGES_KEPT + 2):  # more utterances heard than transcripts sent
            actor.recognised(Recognised(f"u{n}", "how much are the tomatoes", 0.9, LanguageCode.EN_IN, 1_000, (),
                                        "test", end_of_turn_ms=500.0 + n, stt_ms=10.0 + n))
        last, first = f"u{VOICE_STAGES_KEPT + 1}", "u0"
        for frame_id in (last, first):
            actor.submit(player, TranscriptFrame(type="transcript", id=frame_id, text="how much are the tomatoes"))
        with anyio.fail_after(3):
            while len(player.of_type("reply")) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.005)
        actor.spoken(ReplySpoken(session_id="s1", turn=1, tts="test", timings=SpokenTimings(
            in_reply_to=last, tts_first_byte_ms=40.0, first_audio_ms=120.0)))
        with anyio.fail_after(3):
            while not watcher.of_type("reply.spoken"):  # noqa: ASYNC110
                await anyio.sleep(0.005)
    replies = {r["in_reply_to"]: r["timings"] for r in player.of_type("reply")}
    assert isinstance(replies[last], dict) and isinstance(replies[first], dict)
    assert (replies[last]["end_of_turn_ms"], replies[last]["stt_ms"], replies[last]["stt"]) == (
        500.0 + VOICE_STAGES_KEPT + 1, 10.0 + VOICE_STAGES_KEPT + 1, "test")
    # The oldest was let go to keep the bound: its turn is answered, without voice stages.
    assert replies[first]["end_of_turn_ms"] is None and replies[first]["stt_ms"] is None
    assert actor.voice_stages is not None and len(actor.voice_stages) == VOICE_STAGES_KEPT - 1
    speech = [f for f in watcher.of_type("speech") if f["id"] == last]
    assert speech and speech[0]["end_of_turn_ms"] == 500.0 + VOICE_STAGES_KEPT + 1
    assert watcher.of_type("reply.spoken")[0]["timings"]["first_audio_ms"] == 120.0
    assert player.of_type("reply.spoken") == []
