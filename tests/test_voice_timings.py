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
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.openai_server import FakeOpenAI
from tests.servers import Client, client, create, running_server
from tests.voice_support import speech_settings, tone
from voice.open_mic import BYTES_PER_MS

pytestmark = pytest.mark.anyio


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


async def first_audio(c: Client, turn: int) -> dict[str, Any]:
    """The first `reply.audio` of the reply to `turn` that has sound."""
    while True:
        frame = await c.until("reply.audio", wait=20, turn=turn)
        if frame["data"]:
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
