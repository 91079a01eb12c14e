"""The OpenAI-compatible speech backend (issues #17, #33; docs/voice.md): what a failed or busy
transcription or speech service does to a turn, and how speech is read as it streams.

Everything runs against the fake server (tests/openai_server.py) over real HTTP: the server's
sockets for the turns, `OpenAISpeech` on its own for the reads and the errors.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.openai_audio import speech_pcm
from tests.openai_server import Behaviour, FakeOpenAI
from tests.servers import create, running_server
from tests.voice_support import say, speech_settings, tone, voiced
from voice.errors import SpeechServiceError
from voice.openai_speech import PACE_MARGIN_S, PACE_REST_S, OpenAISpeech, OpenAIStt, OpenAITts, _Pace

pytestmark = pytest.mark.anyio
LONG_LINE = ("Arre bhaiya, these are the best tomatoes in Jaipur. Fresh from the farm this morning! "
             "For you, sixty rupees a kilo.")


@pytest.mark.parametrize(("behaviour", "asked"), [
    (Behaviour(kind="status", status=400, message="bad audio"), 1),
    (Behaviour(kind="status", status=503, headers={"retry-after": "0.05"}), 2),
], ids=["refused", "busy"])
async def test_a_refused_transcription_asks_again_with_a_flag_and_a_busy_one_is_retried(
        openai_fake: FakeOpenAI, behaviour: Behaviour, asked: int) -> None:
    openai_fake.stt_queue.append(behaviour)
    async with running_server(**speech_settings(openai_fake, TTS="none")) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await say(c, "u1", tone(0.5))
            heard = await c.until("speech", id="u1")
            reply = await c.until("reply", in_reply_to="u1")
    if asked == 1:  # refused: nothing was heard, and the vendor asks again
        assert heard["fallback"] is True and heard["text"] == "" and heard["confidence"] == 0.0
        assert reply["mark"] == "clarify"
    else:
        assert heard["fallback"] is False and heard["text"] == openai_fake.stt_text
    assert sum(r["path"] == "transcriptions" for r in openai_fake.audio_requests) == asked


async def test_failed_speech_degrades_to_text_with_a_flag(openai_fake: FakeOpenAI) -> None:
    openai_fake.tts_queue.append(Behaviour(kind="status", status=400, message="no voice"))
    async with running_server(**speech_settings(openai_fake, THINKING_SOUND_AFTER_MS=0)) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await c.send({"type": "transcript", "id": "t1", "text": "Namaste bhaiya"})
            reply = await c.until("reply", in_reply_to="t1")
            audio = await c.until("reply.audio", turn=reply["turn"])
            assert audio["degraded"] is True and audio["final"] is True and audio["data"] == ""
            assert reply["text"]


@given(st.floats(1.0, 20.0), st.floats(0.02, 0.5), st.floats(0.5, 12.0))
def test_speech_read_at_the_paced_rests_never_leaves_the_loudspeaker_waiting(
        speed: float, piece_s: float, length_s: float) -> None:
    """A service at `speed` times real time sends `piece_s` pieces; the reader takes what has
    arrived and then rests as `_Pace` says. The loudspeaker, playing from the first piece on,
    always has audio when a read comes, and no rest is longer than PACE_REST_S."""
    rate = 24_000
    arrivals = [(i * piece_s / speed, min(piece_s, length_s - i * piece_s)) for i in range(int(length_s / piece_s) + 1)
                if length_s - i * piece_s > 0]
    pace, now, taken, passed, first = _Pace(rate), arrivals[0][0], 0, 0.0, arrivals[0][0]
    while taken < len(arrivals):
        assert passed >= now - first - 1e-9  # what was passed on has not all been played yet
        ready = [seconds for at, seconds in arrivals[taken:] if at <= now + 1e-12]
        if not ready:
            now = arrivals[taken][0]
            continue
        taken += len(ready)
        passed += sum(ready)
        rest = pace.rest(round(sum(ready) * rate) * 2, now)
        assert rest <= PACE_REST_S
        if rest > 0:
            assert passed - (now - first) - rest >= PACE_MARGIN_S - 1e-3
        now += max(rest, 0.0)


@given(st.floats(1.0, 20.0), st.floats(0.02, 0.5), st.floats(0.5, 12.0), st.floats(0.0, 0.5), st.floats(0.01, 8.0))
def test_a_later_piece_rests_on_the_audio_in_hand_and_never_lets_it_run_under_the_margin(
        speed: float, piece_s: float, length_s: float, first_byte_s: float, in_hand_s: float) -> None:
    """A reply's later piece, asked with `in_hand_s` of the earlier pieces still to play: the
    listener's audio (what was in hand, less the time since the ask, plus what was passed on) is
    never rested below PACE_MARGIN_S, no rest is longer than PACE_REST_S, and while it is a margin
    and a rest ahead after a read, the next read waits the whole rest (from the first read on)."""
    rate = 24_000
    asked = 50.0
    arrivals = [(asked + first_byte_s + i * piece_s / speed, min(piece_s, length_s - i * piece_s))
                for i in range(int(length_s / piece_s) + 1) if length_s - i * piece_s > 0]
    pace, now, taken, passed = _Pace(rate, first=asked, seconds=in_hand_s), asked + first_byte_s, 0, 0.0
    reads = 0
    while taken < len(arrivals):
        ready = [seconds for at, seconds in arrivals[taken:] if at <= now + 1e-12]
        if not ready:
            now = arrivals[taken][0]
            continue
        taken += len(ready)
        passed += sum(ready)
        reads += 1
        rest = pace.rest(round(sum(ready) * rate) * 2, now)
        in_hand = in_hand_s + passed - (now - asked)
        assert rest <= PACE_REST_S
        if rest > 0:
            assert in_hand - rest >= PACE_MARGIN_S - 1e-3
        if in_hand >= PACE_MARGIN_S + PACE_REST_S + 1e-3:
            assert rest == pytest.approx(PACE_REST_S)
        now += max(rest, 0.0)


async def test_fast_speech_is_read_in_fewer_pieces_and_the_first_as_it_comes(openai_fake: FakeOpenAI) -> None:
    openai_fake.tts_realtime = 4.0  # 0.1 s of audio every 25 ms, as benchmarks.voice_turn paces it
    speech = OpenAISpeech(api_key="sk-test", base_url=openai_fake.base_url, stt_model="whisper-1",
                          tts_model="tts-1", tts_voice="alloy", timeout_s=10)
    try:
        pieces = [pcm async for pcm in OpenAITts(speech).synthesize(LONG_LINE, "en-IN")]
    finally:
        await speech.aclose()
    whole = speech_pcm(LONG_LINE)
    sent = -(-len(whole) // 4800)  # the fake's pieces
    assert b"".join(pieces) == whole
    assert len(pieces[0]) == 4800  # the first piece alone: the first audio is not held back
    assert len(pieces) < sent / 2, (len(pieces), sent)


async def test_speech_failures_are_ours_a_busy_service_is_asked_again_a_refusal_names_its_message(
        openai_fake: FakeOpenAI) -> None:
    openai_fake.tts_queue.extend([Behaviour(kind="status", status=503, headers={"retry-after": "0.01"}),
                                  Behaviour(kind="status", status=400, message="no such voice")])
    speech = OpenAISpeech(api_key="sk-test", base_url=openai_fake.base_url, stt_model="whisper-1",
                          tts_model="tts-1", tts_voice="alloy", timeout_s=5, backoff=(0.01, 0.01))
    gone = OpenAISpeech(api_key="sk-test", base_url="http://127.0.0.1:9/v1", stt_model="whisper-1",
                        tts_model="tts-1", tts_voice="alloy", timeout_s=5, backoff=(0.01,))
    try:
        with pytest.raises(SpeechServiceError, match="HTTP 400: no such voice"):
            [pcm async for pcm in OpenAITts(speech).synthesize("Haan ji.", "en-IN")]
        assert [r["path"] for r in openai_fake.audio_requests] == ["speech", "speech"]
        assert b"".join([pcm async for pcm in OpenAITts(speech).synthesize("Haan ji.", "en-IN")]) == speech_pcm(
            "Haan ji.")  # the connection kept after the refusals still serves
        with pytest.raises(SpeechServiceError, match=r"transcription failed: .* \(after 1 retries\)"):
            await OpenAIStt(gone).transcribe(tone(0.1), "en-IN")  # nobody listens there
    finally:
        await speech.aclose()
        await gone.aclose()


