"""Voice (issue #17, docs/voice.md): audio frames become turns, the vendor's replies are spoken
sentence by sentence, limits are refused with their codes, and backends that fail degrade to text.

The OpenAI-compatible backends run against the fake server (tests/openai_server.py) over real
HTTP (the brain through the real SDK, speech through voice/openai_speech.py's aiohttp session); the
embedded defaults run the real pocketsphinx and espeak-ng.
"""

from __future__ import annotations

import base64
import io
import shutil
import struct
from array import array
from typing import Any

import anyio
import httpx
import pytest

from schemas.frames import Reply, ReplyDelta, ReplyWithdrawn
from tests.ci import need_tools
from tests.fakes import ScriptedBrain, decision
from tests.openai_server import Behaviour, FakeOpenAI
from tests.servers import client, create, player, running_server, state
from tests.voice_support import RecordingTts, say, speech_settings, tone, unity_wav, voiced
from voice.audio import decode_clip, levels, parse_wav, to_mono_16k, wav_bytes
from voice.errors import AudioRejected
from voice.sentences import SentenceSplitter, split_sentences
from voice.speaker import CHUNK_BYTES, MAX_CHUNK_BYTES, TAIL_BYTES, Speaker

pytestmark = pytest.mark.anyio
LONG_LINE = ("Arre bhaiya, these are the best tomatoes in Jaipur. Fresh from the farm this morning! "
             "For you, sixty rupees a kilo.")


def opus_clip(container: str, pcm: bytes) -> bytes:
    """A clip as a browser's MediaRecorder makes it: Opus in Ogg or WebM, encoded by PyAV."""
    import av

    out = io.BytesIO()
    with av.open(out, mode="w", format=container) as box:
        stream = box.add_stream("libopus", rate=48_000)
        stream.layout = "mono"  # type: ignore[attr-defined]
        frame = av.AudioFrame.from_ndarray(
            __import__("numpy").frombuffer(pcm, dtype="<i2").reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = 16_000
        resampler = av.AudioResampler(format="s16", layout="mono", rate=48_000)
        for piece in resampler.resample(frame):
            for packet in stream.encode(piece):  # type: ignore[attr-defined]
                box.mux(packet)
        for packet in stream.encode(None):  # type: ignore[attr-defined]
            box.mux(packet)
    return out.getvalue()


# ---------------------------------------------------------------------------- audio, in process


def test_the_unity_builds_wav_header_is_read_as_written() -> None:
    pcm = tone(0.5)
    frames, rate, channels, bits = parse_wav(unity_wav(pcm))
    assert (rate, channels, bits) == (16_000, 1, 16)
    assert frames == pcm[4:]  # the first two samples carry the data size, as in the build


def test_wav_sizes_that_lie_are_not_trusted() -> None:
    pcm = tone(0.2)
    for riff, data in ((0, 0), (0xFFFFFFFF, 0xFFFFFFFF), (36, len(pcm) * 4)):
        clip = bytearray(wav_bytes(pcm, 16_000))
        clip[4:8] = struct.pack("<I", riff)
        clip[40:44] = struct.pack("<I", data)
        assert decode_clip(bytes(clip)) == pcm


def test_stereo_44k_is_mixed_down_and_resampled_to_16k() -> None:
    stereo = array("h", [1000, 3000] * 44_100).tobytes()
    mono = to_mono_16k(stereo, 44_100, 2)
    assert len(mono) == 2 * 16_000
    assert set(array("h", mono)) == {2000}


@pytest.mark.parametrize("container", ["ogg", "webm"])
def test_opus_clips_as_browsers_record_them_decode_to_16k_pcm(container: str) -> None:
    pcm = decode_clip(opus_clip(container, tone(1.0)))
    assert abs(len(pcm) / 32_000 - 1.0) < 0.1
    assert max(levels(pcm)) > 0.5


def test_garbage_is_audio_unsupported() -> None:
    with pytest.raises(AudioRejected) as caught:
        decode_clip(b"not audio at all" * 10)
    assert caught.value.code == "audio_unsupported"


def test_sentences_come_out_as_soon_as_they_end() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("Arre bhaiya, these are the best") == []
    assert splitter.feed(" tomatoes. Fresh to") == ["Arre bhaiya, these are the best tomatoes."]
    assert splitter.feed("day! Sixty रुपये। For you") == ["Fresh today!", "Sixty रुपये।"]
    assert splitter.flush() == "For you"
    assert split_sentences("No end") == ["No end"]


async def test_the_speaker_speaks_streamed_sentences_and_drops_a_withdrawn_stream() -> None:
    import anyio

    tts, sent = RecordingTts(), []
    speaker = Speaker(tts, sent.append, "s", lambda: "en-IN")
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        speaker.observe(ReplyDelta(session_id="s", turn=1, text="Bad start. And"))
        await anyio.sleep(0.05)
        speaker.observe(ReplyWithdrawn(session_id="s", turn=1, reason="retry"))
        speaker.observe(ReplyDelta(session_id="s", turn=1, text="Namaste ji. Tomatoes are "))
        speaker.observe(Reply(**_reply(1, "Namaste ji. Tomatoes are sixty.")))
        await anyio.sleep(0.05)
        speaker.close()
    assert tts.said == ["Bad start.", "Namaste ji.", "Tomatoes are sixty."]
    after = [e for e in sent if e.sentence >= 0][-3:]
    assert [(e.turn, e.sentence, e.final) for e in sent if e.last][-2:] == [(1, 0, False), (1, 1, True)]
    assert after[-1].final


class _PiecesTts:
    """Speech that arrives in the pieces given, as paced reads of a speech service bring it."""

    name = "pieces"
    sample_rate = 24_000

    def __init__(self, *sizes: int) -> None:
        self.sizes = sizes

    async def synthesize(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> Any:
        for i, size in enumerate(self.sizes):
            yield bytes([i % 251 + 1]) * size


@pytest.mark.parametrize("by_sentence", [True, False])
async def test_a_sentence_goes_in_a_chunk_per_read_the_first_at_once_and_a_short_tail_last(by_sentence: bool) -> None:
    """After the first chunk, a read's worth of speech is one chunk (not 16 KB pieces of it), up to
    MAX_CHUNK_BYTES; only a short tail waits for the next read, so the last chunk has audio."""
    sizes = (4800, 40_000, 200_000, 1000)
    tts, sent = _PiecesTts(*sizes), []
    speaker = Speaker(tts, sent.append, "s", lambda: "en-IN", by_sentence=by_sentence)
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        speaker.observe(Reply(**_reply(1, "Namaste ji.")))
        speaker.close()
    whole = b"".join(bytes([i % 251 + 1]) * size for i, size in enumerate(sizes))
    assert b"".join(e.data for e in sent) == whole
    assert [e.chunk for e in sent] == list(range(len(sent)))
    assert [e.last for e in sent] == [False] * (len(sent) - 1) + [True]
    if by_sentence:
        after = 40_000 - TAIL_BYTES, TAIL_BYTES + 200_000 - 3 * MAX_CHUNK_BYTES - TAIL_BYTES
        assert [len(e.data) for e in sent] == [4800, after[0], MAX_CHUNK_BYTES, MAX_CHUNK_BYTES, MAX_CHUNK_BYTES,
                                               after[1], TAIL_BYTES + 1000]
    else:  # the whole reply at once: a small first chunk to start playing, then the biggest
        assert [len(e.data) for e in sent[:4]] == [CHUNK_BYTES] + [MAX_CHUNK_BYTES] * 3
        assert [len(e.data) for e in sent[4:]] == [len(whole) - CHUNK_BYTES - 3 * MAX_CHUNK_BYTES - TAIL_BYTES,
                                                   TAIL_BYTES]


class _HandTts(_PiecesTts):
    """Records the audio in hand the speaker gave each sentence's synthesis."""

    def __init__(self, *sizes: int) -> None:
        super().__init__(*sizes)
        self.in_hand: list[tuple[str, float]] = []

    async def synthesize(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> Any:
        self.in_hand.append((text, in_hand_s))
        async for pcm in super().synthesize(text, language):
            yield pcm


async def test_a_later_sentence_is_asked_with_the_audio_the_listener_still_has_to_play() -> None:
    """The reply's first sentence starts with nothing in hand; the next is asked with what the
    client holds of the first (sent, by the speaker's clock, and not yet played), so the speech
    service's reads may rest (voice/openai_speech.py); a new reply starts from nothing again."""
    tts, sent, now = _HandTts(48_000, 48_000), [], [100.0]  # 2 s of audio a sentence (PCM16 at 24 kHz)
    speaker = Speaker(tts, sent.append, "s", lambda: "en-IN")
    speaker.clock = lambda: now[0]
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        speaker.observe(Reply(**_reply(1, "Namaste ji. Tomatoes are sixty. Take them.")))
        await anyio.sleep(0.05)
        now[0] = 100.5  # half a second of the first sentence played while the others were read
        speaker.observe(Reply(**_reply(2, "Achha. Theek hai.")))
        speaker.close()
    hands = dict(tts.in_hand)
    assert hands["Namaste ji."] == 0.0
    assert hands["Tomatoes are sixty."] == pytest.approx(2.0)  # 2 s sent at t=100, none played
    assert hands["Take them."] == pytest.approx(4.0)
    assert hands["Achha."] == 0.0  # another turn's reply: the client dropped the last one's
    assert hands["Theek hai."] == pytest.approx(2.0)


def _reply(turn: int, text: str) -> dict[str, Any]:
    return dict(session_id="s", seq=turn, turn=turn, text=text, happiness_score=50,
                negotiation_state="GREETING", vendor_mood="neutral", counter_price=None,
                suggested_user_response="", is_terminal=False)


# ---------------------------------------------------------------------------- over the socket




async def test_a_spoken_utterance_is_a_turn_with_its_transcript_and_the_reply_is_spoken(
        openai_fake: FakeOpenAI) -> None:
    # No thinking sounds (tests/test_vendor_voice.py): every speech request here is the reply's.
    async with running_server(**speech_settings(openai_fake, THINKING_SOUND_AFTER_MS=0)) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await say(c, "u1", tone(1.0))
            heard = await c.until("speech", id="u1")
            assert heard["text"] == openai_fake.stt_text and heard["confidence"] == 0.95
            assert heard["stt"] == "openai" and heard["duration_ms"] == 1000 and len(heard["levels"]) == 20
            # Word times asked for (verbose_json with word granularity); the fake spreads the words over
            # the second evenly, each followed by a fifth of its share in silence: no pause, one run.
            [asked] = [r for r in openai_fake.audio_requests if r["path"] == "transcriptions"]
            assert asked["timestamp_granularities"] == ["word", "segment"]
            said = len(openai_fake.stt_text.split())
            fluency = heard["fluency"]
            assert fluency["words"] + fluency["fillers"] == said and (fluency["runs"], fluency["pause_ms"]) == (1, 0)
            assert abs(fluency["speaking_ms"] - 1000 * (1 - 0.2 / said)) <= 2
            await c.until("ack", id="u1")
            reply = await c.until("reply", in_reply_to="u1")
            assert reply["learner_text"] == openai_fake.stt_text and reply["mark"] is None
            chunks = [await c.until("reply.audio", turn=reply["turn"])]
            while not chunks[-1]["final"]:
                chunks.append(await c.until("reply.audio"))
            assert chunks[0]["sentence"] == 0 and chunks[0]["chunk"] == 0 and chunks[0]["text"]
            assert chunks[0]["sample_rate"] == 24_000 and chunks[0]["tts"] == "openai"
            assert " ".join(ch["text"] for ch in chunks if ch["chunk"] == 0) == reply["text"]
            assert all(isinstance(ch["data"], str) for ch in chunks)  # base64 in JSON
        records = openai_fake.audio_requests
        assert records[0]["path"] == "transcriptions" and records[0]["response_format"] == "verbose_json"
        assert records[0]["model"] == "whisper-1" and records[0]["bytes"] == 44 + 32_000
        assert [r["input"] for r in records[1:]] == [ch["text"] for ch in chunks if ch["chunk"] == 0]
        assert {r["response_format"] for r in records[1:]} == {"pcm"}


async def test_a_resent_utterance_is_a_duplicate_and_not_transcribed_again(openai_fake: FakeOpenAI) -> None:
    async with running_server(**speech_settings(openai_fake, TTS="none")) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await say(c, "u1", tone(0.5))
            await c.until("reply", in_reply_to="u1")
            await say(c, "u1", tone(0.5))
            ack = await c.until("ack", id="u1", duplicate=True)
            assert ack["duplicate"] is True
            assert [f for f in await c.quiet(0.3) if f["type"] == "reply"] == []
        assert sum(r["path"] == "transcriptions" for r in openai_fake.audio_requests) == 1


async def test_speech_is_in_the_sequence_and_a_resume_replays_it(openai_fake: FakeOpenAI) -> None:
    """`speech` takes the next seq, before its turn's reply, and a client that resumes from before it
    gets it again, in its place (issue #32: speech goes through the actor)."""
    async with running_server(**speech_settings(openai_fake, TTS="none")) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await say(c, "u1", tone(0.5))
            heard = await c.until("speech", id="u1")
            reply = await c.until("reply", in_reply_to="u1")
            assert reply["seq"] == heard["seq"] + 1
        async with voiced(served, created) as again:
            await again.until("welcome")
            await again.send({"type": "resume", "last_seq": heard["seq"] - 1})
            replayed = await again.until("speech", id="u1")
            assert replayed["seq"] == heard["seq"] and replayed["text"] == heard["text"]
            assert (await again.until("reply"))["seq"] == reply["seq"]


async def test_streamed_audio_is_not_a_silence(openai_fake: FakeOpenAI) -> None:
    """Speech streamed for longer than the silence timeout gets no nudge: each `audio` frame starts the
    timer again (issue #34 saw two nudges and a timed-out end before the learner's `speech`)."""
    settings = speech_settings(openai_fake, TTS="none", SILENCE_TIMEOUT_MS=400, SILENCE_EXTENDED_TIMEOUT_MS=800)
    async with running_server(**settings) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            pcm = tone(2.4)
            await c.send({"type": "audio", "id": "u1", "event": "start", "format": "pcm16"})
            for i in range(0, len(pcm), 6400):  # 0.2 s of audio every 0.2 s: 2.4 s in all
                await c.send({"type": "audio", "id": "u1", "event": "chunk",
                              "data": base64.b64encode(pcm[i:i + 6400]).decode()})
                await anyio.sleep(0.2)
            await c.send({"type": "audio", "id": "u1", "event": "end"})
            reply = await c.until("reply", in_reply_to="u1")
            assert reply["mark"] is None and reply["turn"] == 1
            assert [f for f in c.seen if f["type"] == "reply" and f.get("mark") == "nudge"] == []
            nudge = await c.until("reply", mark="nudge", wait=5)  # then silence is silence again
            assert nudge["turn"] == 1


async def test_unclear_speech_gets_the_vendors_clarification(openai_fake: FakeOpenAI) -> None:
    openai_fake.stt_queue.append(Behaviour(content="tomato kitna", confidence=0.3))
    async with running_server(**speech_settings(openai_fake, TTS="none")) as served:
        created = await create(served)
        async with voiced(served, created, subprotocol="samvad.v1.msgpack") as c:
            await c.until("welcome")
            await say(c, "u1", tone(0.5))
            assert (await c.until("speech", id="u1"))["confidence"] == 0.3
            reply = await c.until("reply", in_reply_to="u1")
            assert reply["mark"] == "clarify"
            assert (await state(served, created["session_id"], created["player_token"]))["turn"] == 0


@pytest.mark.parametrize("container", ["webm", "ogg"])
async def test_a_recorded_opus_clip_in_msgpack_is_a_turn(openai_fake: FakeOpenAI, container: str) -> None:
    async with running_server(**speech_settings(openai_fake, TTS="none")) as served:
        created = await create(served)
        async with voiced(served, created, subprotocol="samvad.v1.msgpack") as c:
            await c.until("welcome")
            await c.send({"type": "audio", "id": "clip1", "event": "clip", "format": container,
                          "data": opus_clip(container, tone(1.5))})
            heard = await c.until("speech", id="clip1")
            assert abs(heard["duration_ms"] - 1500) < 100
            await c.until("reply", in_reply_to="clip1")


async def test_a_barge_in_stops_the_vendors_voice(openai_fake: FakeOpenAI) -> None:
    openai_fake.tts_realtime = 1.0  # speech streams at the pace it is spoken
    brain = ScriptedBrain(lambda r: decision(LONG_LINE, 50, r.stage))
    async with running_server(brain=brain, **speech_settings(openai_fake, THINKING_SOUND_AFTER_MS=0)) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await c.send({"type": "transcript", "id": "t1", "text": "Namaste bhaiya"})
            reply = await c.until("reply", in_reply_to="t1")
            await c.until("reply.audio", turn=reply["turn"])
            await c.send({"type": "playback", "id": "p1", "turn": reply["turn"], "heard_chars": 10,
                          "interrupted": True})
            await c.until("heard", in_reply_to="p1")
            assert [f for f in await c.quiet(0.8) if f["type"] == "reply.audio"] == []
        spoken = [r for r in openai_fake.audio_requests if r["path"] == "speech"]
        assert len(spoken) == 1  # the later sentences were never synthesized


async def test_limits_are_refused_with_their_codes_and_change_nothing(openai_fake: FakeOpenAI) -> None:
    settings = speech_settings(openai_fake, TTS="none", MAX_AUDIO_CLIP_BYTES=8192, MAX_UTTERANCE_SECONDS=1)
    async with running_server(**settings) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            welcome = await c.until("welcome")
            await c.send({"type": "audio", "id": "big", "event": "clip",
                          "data": base64.b64encode(wav_bytes(tone(0.5), 16_000)).decode()})
            assert (await c.until("error", id="big"))["code"] == "audio_too_large"
            await say(c, "long", tone(1.5))
            assert (await c.until("error", id="long"))["code"] == "audio_too_long"
            await c.send({"type": "audio", "id": "orphan", "event": "chunk", "data": ""})
            assert (await c.until("error", id="orphan"))["code"] == "audio_not_started"
            await c.send({"type": "audio", "id": "junk", "event": "clip",
                          "data": base64.b64encode(b"\x00junk" * 50).decode()})
            assert (await c.until("error", id="junk"))["code"] == "audio_unsupported"
            await c.send({"type": "audio", "id": "b64", "event": "clip", "data": "not*base64"})
            assert (await c.until("error", id="b64"))["code"] == "invalid"
            await c.send({"type": "audio", "id": "fmt", "event": "start", "format": "webm"})
            assert (await c.until("error", id="fmt"))["code"] == "audio_unsupported"
            async with client(served.ws_url(created["session_id"], created["spectator_token"])) as spectator:
                await spectator.until("welcome")
                await spectator.send({"type": "audio", "id": "s1", "event": "start", "format": "pcm16"})
                assert (await spectator.until("error", id="s1"))["code"] == "forbidden"
            assert [f for f in await c.quiet(0.2) if f["type"] in ("speech", "reply")] == []
        after = await state(served, created["session_id"], created["player_token"])
        assert after["seq"] == welcome["seq"] and after["turn"] == 0
    assert openai_fake.audio_requests == []


# ---------------------------------------------------------------------------- embedded defaults


async def health_of(served: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        voice: dict[str, Any] = (await http.get("/health")).json()["voice"]
        return voice


@pytest.fixture
def espeak() -> None:
    """espeak-ng on the PATH: skipped without it, failed without it in CI (tests/ci.py)."""
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")


def espeak_wav(text: str) -> bytes:
    import subprocess

    return subprocess.run(["espeak-ng", "-v", "en-us", "--stdout", "--stdin"], input=text.encode(),
                          capture_output=True, check=True).stdout


@pytest.mark.usefixtures("espeak")
async def test_embedded_defaults_hear_with_pocketsphinx_and_speak_with_espeak_ng() -> None:
    async with running_server(SILENCE_TIMEOUT_MS=0) as served:  # USE_MOCKS: no keys at all
        health = await health_of(served)
        assert health == {"stt": "pocketsphinx", "tts": "espeak-ng", "audio_in": True, "audio_out": True}
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            clip = espeak_wav("how much are the tomatoes")
            await c.send({"type": "audio", "id": "e1", "event": "clip", "format": "wav",
                          "data": base64.b64encode(clip).decode()})
            heard = await c.until("speech", id="e1", wait=15)
            assert heard["stt"] == "pocketsphinx" and heard["text"] and 0 <= heard["confidence"] <= 1
            reply = await c.until("reply", in_reply_to="e1", wait=15)
            first = await c.until("reply.audio", turn=reply["turn"], wait=15)
            assert first["tts"] == "espeak-ng" and first["sample_rate"] == 22_050
            assert len(base64.b64decode(first["data"])) > 4000


async def test_a_player_that_did_not_ask_for_voice_gets_no_audio(openai_fake: FakeOpenAI) -> None:
    async with running_server(**speech_settings(openai_fake)) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.until("welcome")
            frames = await c.turn("t1", "Namaste bhaiya")
            assert [f["type"] for f in frames if f["type"].startswith("reply")] == ["reply"]
            assert [f for f in await c.quiet(0.3) if f["type"] == "reply.audio"] == []
    assert openai_fake.audio_requests == []


async def test_a_text_only_server_says_so_and_refuses_audio() -> None:
    async with running_server(STT="none", TTS="none") as served:
        health = await health_of(served)
        assert health["audio_in"] is False and "transcript" in health["note"]
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await say(c, "u1", tone(0.2))
            assert (await c.until("error", id="u1"))["code"] == "speech_unavailable"


async def test_with_a_streaming_brain_his_voice_starts_before_the_reply_is_decided(
        openai_fake: FakeOpenAI) -> None:
    """The first sentence is spoken from the deltas, and the last as soon as the words are complete
    (`reply.delta` with `end`), while the model is still writing the rest of its decision."""
    from brain.llm import OpenAIBrain
    from tests.llm_support import FAST
    from tests.llm_support import decision as llm_decision
    from tests.openai_server import reply as scripted_reply

    line = "Namaste ji, welcome to my stall! My tomatoes are the reddest in Jaipur today."
    openai_fake.script(scripted_reply(llm_decision(line), ttft_ms=50, tokens_per_s=80))
    brain = OpenAIBrain(api_key="sk-test", base_url=openai_fake.base_url, backoff=FAST, timeout_ms=5000)
    async with running_server(brain=brain, **speech_settings(openai_fake, STT="none")) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await c.send({"type": "transcript", "id": "t1", "text": "Namaste bhaiya"})
            before: list[dict[str, Any]] = []
            while (frame := await c.recv()).get("type") != "reply":
                before.append(frame)
            spoken = [f["text"] for f in before if f["type"] == "reply.audio" and f["chunk"] == 0]
            assert spoken == ["Namaste ji, welcome to my stall!", "My tomatoes are the reddest in Jaipur today."]
            assert any(f["type"] == "reply.delta" and f.get("end") for f in before)
            assert frame["text"] == line


def test_the_offline_recogniser_model_ships_inside_its_wheel() -> None:
    """Nothing is downloaded at run time: pocketsphinx's decoder reads the en-US model from the
    installed package, and the settings pick it (and espeak-ng) only when they are there."""
    import os

    import pocketsphinx

    from server.config import SttChoice, TtsChoice, load_settings

    model = os.path.join(pocketsphinx.get_model_path(), "en-us")
    package = os.path.dirname(pocketsphinx.__file__)
    assert model.startswith(package) and {"en-us", "en-us.lm.bin", "cmudict-en-us.dict"} <= set(os.listdir(model))
    settings = load_settings(SAMVAD_SECRET="s" * 40, USE_MOCKS=True)
    assert settings.stt_kind is SttChoice.POCKETSPHINX
    assert settings.tts_kind is (TtsChoice.ESPEAK if shutil.which("espeak-ng") else TtsChoice.NONE)
    keyed = load_settings(SAMVAD_SECRET="s" * 40, SPEECH_API_KEY="sk-x")
    assert keyed.stt_kind is SttChoice.OPENAI and keyed.tts_kind is TtsChoice.OPENAI


def test_bad_voice_settings_stop_the_server_naming_them() -> None:
    from server.config import ConfigError, load_settings

    for name, value in (("STT", "whisper"), ("TTS", "festival"), ("MAX_UTTERANCE_SECONDS", "0"),
                        ("MAX_AUDIO_CLIP_BYTES", "10")):
        with pytest.raises(ConfigError, match=name):
            load_settings(SAMVAD_SECRET="s" * 40, **{name: value})
