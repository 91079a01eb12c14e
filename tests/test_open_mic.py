"""The open microphone (issue #34): continuous audio cut into turns on the server.

`OpenMic` is tested with a detector that calls loud windows speech, so that the timelines are
exact; the socket test streams espeak-ng speech through Silero, the server's own detector.
"""

from __future__ import annotations

import base64
import shutil
from array import array
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from schemas.enums import Level
from schemas.scenario import load_scenario
from tests.openai_server import FakeOpenAI
from tests.servers import client, create, running_server
from tests.voice_support import speech_settings
from voice.errors import AudioRejected
from voice.open_mic import BYTES_PER_MS, Finished, Heard, OpenMic
from voice.turn_end import EndOfTurn
from voice.turn_words import TurnWords

pytestmark = pytest.mark.anyio

WINDOW = 512  # samples, as Silero's


class LoudIsSpeech:
    """A detector for exact timelines: a window with a sample over 1,000 is speech."""

    name = "loud"
    window = WINDOW

    def probability(self, pcm: bytes) -> float:
        samples = array("h", pcm)
        return 1.0 if max(map(abs, samples)) > 1000 else 0.0

    def reset(self) -> None:
        pass


def audio(*spans: tuple[bool, int]) -> bytes:
    """Speech (a loud square wave) or silence, each for so many milliseconds."""
    out = bytearray()
    for loud, ms in spans:
        samples = array("h", ((4000 if (n // 20) % 2 else -4000) if loud else 0 for n in range(ms * 16)))
        out += samples.tobytes()
    return bytes(out)


def mic(level: Level = Level.INTERMEDIATE, max_turn_ms: float = 30_000.0) -> OpenMic:
    words = TurnWords.of(load_scenario("jaipur-bazaar"))
    return OpenMic("mic", LoudIsSpeech(), EndOfTurn(words, level), max_turn_ms=max_turn_ms)


def feed(m: OpenMic, pcm: bytes, chunk: int = 6400) -> list[Heard | Finished]:
    events: list[Heard | Finished] = []
    for at in range(0, len(pcm), chunk):
        events += m.feed(pcm[at:at + chunk])
    return events


def test_a_pause_is_heard_and_a_longer_silence_ends_the_turn_with_its_audio() -> None:
    m = mic()
    events = feed(m, audio((False, 500), (True, 1000), (False, 400), (True, 600), (False, 1500)))
    heard = [e for e in events if isinstance(e, Heard)]
    finished = [e for e in events if isinstance(e, Finished)]
    # A pause inside the turn, and the one that starts the silence that ends it: each is heard.
    assert [e.utterance_id for e in heard] == ["mic.1", "mic.1"] and [e.utterance_id for e in finished] == ["mic.1"]
    turn = finished[0]
    # From a little before the first speech (the pre-roll) to the end: the speech is all there.
    assert 2000 <= len(turn.pcm) / BYTES_PER_MS <= 2000 + 250 + 1500
    # An intermediate learner's 700 ms, and 150 more for having come back after a pause (rule 5).
    assert 2400 <= turn.speech_end_ms <= 2600 and turn.waited_ms == 850.0 and not turn.thinking
    assert len(heard[0].pcm) < len(heard[1].pcm) <= len(turn.pcm)
    assert heard[1].speech_end_ms == turn.speech_end_ms  # the last pause heard all the turn's speech
    assert m.utterance_id == "mic.2" and not m.in_turn
    again = feed(m, audio((True, 800), (False, 1000)))
    assert [e.utterance_id for e in again if isinstance(e, Finished)] == ["mic.2"]


def test_a_thinking_pause_after_a_filler_does_not_end_the_turn() -> None:
    m = mic()
    events = feed(m, audio((True, 900), (False, 400)))
    assert [type(e) for e in events] == [Heard]  # (the chunks end inside the level's 700 ms wait)
    m.partial("I will give you umm")  # the pause's decode ends on a filler: the learner is thinking
    assert feed(m, audio((False, 2000))) == []
    assert [type(e) for e in feed(m, audio((True, 700), (False, 400)))] == [Heard]
    m.partial("I will give you umm forty rupees")  # the next pause's decode: a finished sentence
    done = feed(m, audio((False, 1200)))
    assert [e.utterance_id for e in done if isinstance(e, Finished)] == ["mic.1"]


def test_closing_ends_a_turn_in_progress_and_a_quiet_close_ends_nothing() -> None:
    m = mic()
    feed(m, audio((True, 900), (False, 100)))
    finished = m.close()
    assert finished is not None and finished.utterance_id == "mic.1" and len(finished.pcm) >= 900 * BYTES_PER_MS
    assert m.close() is None


def test_an_odd_chunk_is_refused_and_changes_nothing() -> None:
    m = mic()
    feed(m, audio((True, 300)))
    before = (m.vad.position_ms, m.in_turn)
    with pytest.raises(AudioRejected) as refused:
        m.feed(b"\x01\x02\x03")
    assert refused.value.code == "audio_unsupported" and (m.vad.position_ms, m.in_turn) == before


def test_a_turn_with_no_pause_past_the_limit_is_dropped_and_listening_goes_on() -> None:
    m = mic(max_turn_ms=2000)
    with pytest.raises(AudioRejected) as refused:
        feed(m, audio((True, 2600)))
    assert refused.value.code == "audio_too_long" and not m.in_turn
    done = feed(m, audio((False, 200), (True, 600), (False, 1000)))
    assert [e.utterance_id for e in done if isinstance(e, Finished)] == ["mic.1"]


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(1, 4000), min_size=1, max_size=12))
def test_the_turns_are_the_same_however_the_stream_is_cut(cuts: list[int]) -> None:
    pcm = audio((False, 300), (True, 700), (False, 450), (True, 500), (False, 900), (True, 400), (False, 1000))
    whole = [(type(e).__name__, e.utterance_id, round(e.at_ms), len(e.pcm)) for e in feed(mic(), pcm, len(pcm))]
    m, at, events = mic(), 0, []
    for cut in cuts:
        size = cut * 2
        events += m.feed(pcm[at:at + size])
        at += size
    events += m.feed(pcm[at:])
    assert [(type(e).__name__, e.utterance_id, round(e.at_ms), len(e.pcm)) for e in events] == whole


# ---------------------------------------------------------------------------- over the socket


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng to speak the learner's lines")
async def test_an_open_microphone_finds_the_turn_sends_partials_in_the_sequence_and_a_resume_replays_them(
        openai_fake: FakeOpenAI) -> None:
    from tests.turn_set import piece

    speech = piece("How much are the tomatoes?", "en-us", 150)
    more = piece("I will give you forty rupees.", "en-us", 150)
    silence = lambda ms: b"\0" * (ms * BYTES_PER_MS)  # noqa: E731
    stream = silence(400) + speech + silence(500) + more + silence(2000)
    async with running_server(**speech_settings(openai_fake, TTS="none")) as served:
        created = await create(served)
        url = served.ws_url(created["session_id"], created["player_token"])
        async with client(url) as c:
            await c.until("welcome")
            await c.send({"type": "audio", "id": "mic", "event": "open", "format": "pcm16"})
            for at in range(0, len(stream), 6400):
                await c.send({"type": "audio", "id": "mic", "event": "chunk",
                              "data": base64.b64encode(stream[at:at + 6400]).decode()})
            partial = await c.until("speech.partial", id="mic.1", wait=20)
            heard = await c.until("speech", id="mic.1", wait=20)
            await c.until("ack", id="mic.1")
            reply = await c.until("reply", in_reply_to="mic.1")
            assert partial["seq"] < heard["seq"] < reply["seq"] and heard["text"] == openai_fake.stt_text
            # The last pause's decode heard the whole turn: the turn's transcript needed no second call.
            calls = [r for r in openai_fake.audio_requests if r["path"] == "transcriptions"]
            partials = sum(1 for f in c.seen if f["type"] == "speech.partial")
            assert len(calls) == partials
            await c.send({"type": "audio", "id": "mic", "event": "close"})
        async with client(url) as again:
            await again.until("welcome")
            await again.send({"type": "resume", "last_seq": partial["seq"] - 1})
            replayed = await again.until("speech.partial", id="mic.1")
            assert replayed["seq"] == partial["seq"]


async def test_close_without_open_is_refused_naming_the_frame(openai_fake: FakeOpenAI) -> None:
    async with running_server(**speech_settings(openai_fake, TTS="none")) as served:
        created = await create(served)
        async with client(served.ws_url(created["session_id"], created["player_token"])) as c:
            await c.until("welcome")
            await c.send({"type": "audio", "id": "nomic", "event": "close"})
            error: dict[str, Any] = await c.until("error", id="nomic")
            assert error["code"] == "audio_not_started"
