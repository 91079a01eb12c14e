"""Visemes with the vendor's voice (issue #38, docs/voice.md "Visemes").

espeak-ng's own phoneme events are the ground truth. The "API" audio without timings is espeak-ng
too, in other voices and at other paces (a stand-in for an OpenAI-compatible voice that the tests
can time exactly), streamed in pieces as an HTTP response arrives; the estimate only sees that
audio and espeak-ng's silent pass at its own pace.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import statistics
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.frames import Reply, ReplyAudio
from tests.ci import need, need_tools
from tests.fakes import ScriptedBrain, decision
from tests.openai_server import FakeOpenAI
from tests.servers import client, create, running_server
from tests.voice_support import speech_settings
from voice.align import Aligner, aligned_phones
from voice.espeak_lib import Synthesis, shared_espeak
from voice.estimate import RateMemory, VisemeEstimate, phrases_of
from voice.lipsync import EspeakVisemes, EstimatedVisemes, LipSync
from voice.speaker import CHUNK_BYTES, Speaker
from voice.tts import EspeakTts
from voice.visemes import VISEME_NAMES, Phone, Viseme, cut_phones

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
LINES = ("Ah, welcome! This silk scarf is five hundred rupees, very fine.",
         "Tomatoes are sixty rupees a kilo today, madam.",
         "No no, that price is too low for me. I can give you seventy, final offer!",
         "Look at the colour, pure cotton from Jaipur.",
         "For you, my friend, I will make it fifty five, but only today.")
API_VOICES = (("en-us", 185), ("en-gb-x-rp", 140), ("en-us+f3", 170))  # (voice, words per minute)
RUNS_ON = ("en-us+m3", 175)  # a voice that does not pause at commas: the text it is given has none
PIECE_BYTES = 4096  # how the stand-in API streams: a few KB at a time, as an HTTP body arrives
EDGE_MS = 20  # a timeline ends this close to its audio's end
ESTIMATE_BOUND_MS = 80  # docs/voice.md, "How close": the median word-onset error the estimate must stay under
ALIGN_BOUND_MS = 40  # and the alignment's, where it applies
RUN_ON_BOUND_MS = 200  # the estimate's, for a voice that does not pause where espeak-ng does

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def espeak() -> EspeakTts:
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    return EspeakTts(shared_espeak())


def timeline(chunks: Sequence[ReplyAudio]) -> list[tuple[float, int]]:
    """A sentence's pairs in ms from its first sample, rebuilt from its chunks as a client does."""
    out: list[tuple[float, int]] = []
    base = 0.0
    for chunk in chunks:
        for start, viseme in chunk.visemes:
            out.append((base + start, viseme))
        base += len(chunk.data) / 2 * 1000 / chunk.sample_rate
    return out


def changes(pairs: Sequence[tuple[float, int]]) -> list[int]:
    """The visemes in order, a chunk's restating of the one showing at its start left out."""
    return [v for i, (_, v) in enumerate(pairs) if i == 0 or pairs[i - 1][1] != v]


def check_timeline(pairs: list[tuple[float, int]], duration_ms: float) -> None:
    assert pairs and pairs[0][0] == 0
    assert all(0 <= v <= 14 for _, v in pairs)
    assert all(b[0] >= a[0] for a, b in itertools.pairwise(pairs)), pairs
    assert pairs[-1][1] == Viseme.SIL and abs(pairs[-1][0] - duration_ms) <= EDGE_MS


# ---------------------------------------------------------------------------- the table, pure


def test_every_phoneme_espeak_speaks_in_the_sessions_languages_has_a_viseme(espeak: EspeakTts) -> None:
    lines = {"en-us": "Judge the thing: zoo, measure, why, ought, boy, cow, sing, yes, hat, very, love.",
             "hi": "नमस्ते भैया, टमाटर कितने के हैं? साठ रुपये किलो, ठीक है। झंडा, ढोल, फल, ज़रूर, ऋषि, घर, छाता",
             "ta": "வணக்கம், இந்த தக்காளி எவ்வளவு? அறுபது ரூபாய், ழகரம்",
             "kn": "ನಮಸ್ಕಾರ, ಟೊಮೇಟೊ ಎಷ್ಟು? ಅರವತ್ತು ರೂಪಾಯಿ", "pa": "ਸਤ ਸ੍ਰੀ ਅਕਾਲ, ਟਮਾਟਰ ਕਿੰਨੇ ਦੇ ਹਨ?",
             "fr": "Bonjour, combien coûtent les tomates?", "ar": "مرحبا، بكم الطماطم؟",
             "ja": "こんにちは、トマトはいくらですか"}
    for voice, text in lines.items():
        spoken = espeak.espeak.synthesize(text, voice, 160)
        assert spoken.unknown == (), (voice, spoken.unknown)
        assert len({p.viseme for p in spoken.phones}) >= 6, voice  # a mouth that moves


def test_the_table_knows_the_shapes_by_where_sounds_are_made() -> None:
    from voice.visemes import viseme_of

    said = {"p": "PP", "bʱ": "PP", "f": "FF", "θ": "TH", "t̪": "DD", "ɖ": "DD", "kʰ": "kk", "tʃ": "CH",
            "dʒ": "CH", "s": "SS", "n": "nn", "ɹ": "RR", "ɑː": "aa", "aɪ": "aa", "ə": "E", "iː": "ih",
            "oʊ": "oh", "uː": "ou", "w": "ou", "": "sil", "ˈa": "aa"}
    assert {ipa: VISEME_NAMES[viseme_of(ipa) or 0] for ipa in said} == said
    assert len(VISEME_NAMES) == len(Viseme) == 15


phones_st = st.lists(st.tuples(st.integers(1, 4000), st.integers(0, 14)), max_size=40).map(
    lambda steps: [Phone(sum(s for s, _ in steps[:i + 1]), v) for i, (_, v) in enumerate(steps)])


@given(phones_st, st.lists(st.integers(1, 9000), min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_cutting_a_timeline_into_chunks_keeps_it_whole(phones: list[Phone], sizes: list[int]) -> None:
    rate, total = 22_050, sum(sizes)
    chunks, start = [], 0
    for i, size in enumerate(sizes):
        pairs = cut_phones(phones, start, start + size, rate, last=i == len(sizes) - 1)
        assert pairs[0][0] == 0 and all(b[0] > a[0] for a, b in itertools.pairwise(pairs))
        assert all(b[1] != a[1] for a, b in itertools.pairwise(pairs[:-1]))
        chunks.append(ReplyAudio(session_id="s", turn=1, sentence=0, chunk=i, sample_rate=rate,
                                 data=b"\0\0" * size, visemes=pairs))
        start += size
    whole = timeline(chunks)
    check_timeline(whole, total * 1000 / rate)

    def showing(pairs: list[tuple[float, int]], at_ms: float) -> int:
        return [v for t, v in pairs if t <= at_ms][-1]

    truth = [(0.0, 0), *((p.sample * 1000 / rate, p.viseme) for p in phones)]
    for phone in phones:  # between changes, the chunked timeline shows what the whole one does
        at = phone.sample * 1000 / rate + 2
        if at < total * 1000 / rate - 2 and all(abs(at - t) > 2 for t, _ in truth):
            assert showing(whole, at) == showing(truth, at)


# ---------------------------------------------------------------------------- the Speaker, in process


class ApiVoice:
    """A TTS without timings (the `TextToSpeech` interface): espeak-ng in another voice and pace,
    streamed in `PIECE_BYTES` pieces. `spoken` keeps each sentence's pass, the ground truth."""

    name = "api"

    def __init__(self, espeak: EspeakTts, voice: str, wpm: int) -> None:
        self.espeak, self.voice, self.wpm = espeak, voice, wpm
        self.sample_rate = espeak.sample_rate
        self.spoken: list[Synthesis] = []

    async def synthesize(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> AsyncIterator[bytes]:
        said = self.espeak.espeak.synthesize(text, self.voice, self.wpm)
        self.spoken.append(said)
        for i in range(0, len(said.pcm), PIECE_BYTES):
            await anyio.lowlevel.checkpoint()
            yield said.pcm[i:i + PIECE_BYTES]


async def speak_lines(tts: Any, lipsync: LipSync, lines: Sequence[str], *,
                      by_sentence: bool = True) -> list[list[ReplyAudio]]:
    """The Speaker saying each line as a reply; each sentence's chunks, in order."""
    sent: list[ReplyAudio] = []
    done = anyio.Event()

    def send(event: ReplyAudio) -> None:
        sent.append(event)
        if event.final and event.turn == len(lines):
            done.set()

    speaker = Speaker(tts, send, "s", lambda: "en-IN", lipsync=lipsync, by_sentence=by_sentence)
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        for turn, line in enumerate(lines, 1):
            speaker.observe(Reply(session_id="s", seq=turn, turn=turn, text=line, happiness_score=50,
                                  negotiation_state="GREETING", vendor_mood="neutral", counter_price=None,
                                  suggested_user_response="", is_terminal=False))
        with anyio.fail_after(20):
            await done.wait()
        speaker.close()
    sentences: dict[tuple[int, int], list[ReplyAudio]] = {}
    for event in sent:
        sentences.setdefault((event.turn, event.sentence), []).append(event)
    return list(sentences.values())


async def test_espeak_chunks_carry_the_timeline_of_the_pass_that_made_them(espeak: EspeakTts) -> None:
    sentences = await speak_lines(espeak, EspeakVisemes(espeak), LINES[:3])
    for chunks in sentences:
        assert [c.chunk for c in chunks] == list(range(len(chunks))) and chunks[-1].last
        assert all(c.visemes and c.visemes_source == "espeak" for c in chunks)
        pcm = b"".join(c.data for c in chunks)
        check_timeline(timeline(chunks), len(pcm) / 2 * 1000 / espeak.sample_rate)
        again = espeak.espeak.synthesize(chunks[0].text, "en-us", espeak.wpm)
        assert abs(len(again.pcm) - len(pcm)) <= 0.01 * len(pcm)  # the same speech (not bit-exact twice)
        truth = cut_phones(again.phones, 0, len(again.pcm) // 2, again.rate, last=True)
        assert changes(timeline(chunks)) == changes(truth)


async def test_an_api_voice_gets_an_estimated_timeline_on_every_chunk(espeak: EspeakTts) -> None:
    api = ApiVoice(espeak, "en-gb-x-rp", 140)
    sentences = await speak_lines(api, EstimatedVisemes(api, espeak), LINES[:3])
    assert len(sentences) == len(api.spoken) >= 3
    for chunks in sentences:
        assert all(c.visemes and c.visemes_source == "estimate" for c in chunks)
        pcm = b"".join(c.data for c in chunks)
        check_timeline(timeline(chunks), len(pcm) / 2 * 1000 / api.sample_rate)
        assert len({v for _, v in timeline(chunks)}) >= 5


def estimate_errors(espeak: EspeakTts, voice: str, wpm: int, *,
                    pauses: bool = True) -> tuple[list[float], list[float]]:
    """Word-onset errors (ms) of the estimate against the API voice's own events, fed and cut as
    the Speaker does (first piece at once, then `CHUNK_BYTES`); the first line (a cold rate) apart.
    `pauses=False`: the API voice runs the line's phrases together."""
    memory, cold, warm = RateMemory(), [], []
    for n, line in enumerate(LINES):
        said = line if pauses else re.sub(r"[,.!?](?=.)", "", line)
        api = espeak.espeak.synthesize(said, voice, wpm)
        silent = espeak.espeak.timings(line, "en-us", espeak.wpm)  # the server's silent pass
        estimate = VisemeEstimate(phrases_of(silent.phones, silent.rate, silent.samples), api.rate, memory)
        held, first = b"", True
        for i in range(0, len(api.pcm), PIECE_BYTES):
            estimate.feed(api.pcm[i:i + PIECE_BYTES])
            data = held + api.pcm[i:i + PIECE_BYTES]
            while len(data) > CHUNK_BYTES:
                estimate.cut(CHUNK_BYTES // 2, last=False)
                data = data[CHUNK_BYTES:]
            held = data
            if first and held:
                estimate.cut(len(held) // 2, last=False)
                held, first = b"", False
        estimate.finish()
        estimate.cut(len(held) // 2, last=True)
        truth = [p.sample * 1000 / api.rate for p in api.phones if p.word]
        got = {word: at for at, word in estimate.emitted if word >= 0}
        errors = [abs(got[i] - t) for i, t in enumerate(truth) if i in got]
        assert len(errors) >= len(truth) * (0.8 if pauses else 0.5), (line, voice)  # most words were shown
        (cold if n == 0 else warm).extend(errors)
    return cold, warm


def test_the_estimates_word_onsets_stay_within_the_bound(espeak: EspeakTts) -> None:
    report: dict[str, Any] = {}
    everything: list[float] = []
    for voice, wpm, pauses in (*((v, w, True) for v, w in API_VOICES), (*RUNS_ON, False)):
        cold, warm = estimate_errors(espeak, voice, wpm, pauses=pauses)
        everything += cold + warm
        report[f"{voice}@{wpm}{'' if pauses else ', no pauses'}"] = {
            "median_ms": round(statistics.median(cold + warm), 1),
            "first_line_median_ms": round(statistics.median(cold), 1),
            "p90_ms": round(statistics.quantiles(cold + warm, n=10)[-1], 1), "words": len(cold + warm)}
    report["all"] = {"median_ms": round(statistics.median(everything), 1), "words": len(everything),
                     "bound_ms": ESTIMATE_BOUND_MS, "run_on_bound_ms": RUN_ON_BOUND_MS}
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "visemes_accuracy.json").write_text(json.dumps(report, indent=2))
    print("viseme estimate, word-onset error:", json.dumps(report))
    assert report["all"]["median_ms"] < ESTIMATE_BOUND_MS, report
    paused = [r for k, r in report.items() if k != "all" and "no pauses" not in k]
    assert all(r["median_ms"] < ESTIMATE_BOUND_MS for r in paused), report
    # A voice that runs espeak-ng's phrases together leaves the pace a guess for seconds at a time:
    # a looser bound, and the mouth must still move through the words (docs/voice.md, How close).
    assert report[f"{RUNS_ON[0]}@{RUNS_ON[1]}, no pauses"]["median_ms"] < RUN_ON_BOUND_MS, report


# ---------------------------------------------------------------------------- forced alignment (English, whole)


@pytest.fixture(scope="module")
def aligner() -> Aligner:
    from voice.stt import pocketsphinx_available

    need(pocketsphinx_available(), "pocketsphinx is missing", "pip install -e .[test]")
    return Aligner()


def test_the_alignments_word_onsets_stay_within_its_bound_and_missing_words_fall_back(
        espeak: EspeakTts, aligner: Aligner) -> None:
    errors: list[float] = []
    fell_back: list[str] = []
    for voice, wpm in API_VOICES:
        for line in LINES:
            api = espeak.espeak.synthesize(line, voice, wpm)
            silent = espeak.espeak.timings(line, "en-us", espeak.wpm)
            spans = aligner.words(line, api.pcm, api.rate)
            phones = aligned_phones(silent.phones, silent.rate, silent.samples, spans, api.rate) if spans else None
            if phones is None:
                fell_back.append(f"{voice}: {line}")
                continue
            truth = [p.sample for p in api.phones if p.word]
            got = [p.sample for p in phones if p.word]
            assert len(got) == len(truth)
            errors += [abs(a - b) * 1000 / api.rate for a, b in zip(got, truth, strict=True)]
    report = {"median_ms": round(statistics.median(errors), 1), "words": len(errors),
              "sentences_fallen_back": len(fell_back), "bound_ms": ALIGN_BOUND_MS}
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "visemes_alignment.json").write_text(json.dumps(report, indent=2))
    print("viseme alignment, word-onset error:", json.dumps(report))
    assert report["median_ms"] < ALIGN_BOUND_MS, report
    assert any("Jaipur" in f for f in fell_back)  # not in the aligner's dictionary: the estimate serves
    assert len(fell_back) < len(API_VOICES) * len(LINES) / 2


async def test_a_whole_english_reply_is_aligned_and_one_with_an_unknown_word_is_estimated(
        espeak: EspeakTts, aligner: Aligner) -> None:
    api = ApiVoice(espeak, "en-us+f3", 170)
    lines = ["Tomatoes are sixty rupees a kilo today, madam.", "Look at the colour, pure cotton from Jaipur."]
    sentences = await speak_lines(api, EstimatedVisemes(api, espeak, aligner), lines, by_sentence=False)
    assert [{c.visemes_source for c in chunks} for chunks in sentences] == [{"align"}, {"estimate"}]
    for chunks in sentences:
        pcm = b"".join(c.data for c in chunks)
        check_timeline(timeline(chunks), len(pcm) / 2 * 1000 / api.sample_rate)


# ---------------------------------------------------------------------------- over the socket


def _spoken(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] == "reply.audio" and not f["degraded"]]


def check_wire(frames: list[dict[str, Any]], source: str) -> int:
    """Every chunk of sound arrived with its own visemes: none without, none before them."""
    audio = _spoken(frames)
    for frame in audio:
        if frame["data"]:
            assert frame["visemes"] and frame["visemes"][0][0] == 0, frame["visemes"]
            assert frame["visemes_source"] == source
            assert all(0 <= v <= 14 for _, v in frame["visemes"])
            length = len(base64.b64decode(frame["data"])) / 2 * 1000 / frame["sample_rate"]
            assert all(0 <= t <= length + 1 for t, _ in frame["visemes"])
        if frame["last"] and frame["data"]:
            assert frame["visemes"][-1][1] == 0
    return len(audio)


async def read_reply_audio(c: Any, turn: int) -> None:
    while not (await c.until("reply.audio", turn=turn, wait=15))["final"]:
        pass


@pytest.mark.usefixtures("espeak")
async def test_no_audio_reaches_a_player_before_its_timeline_across_a_barge_in_and_a_resume() -> None:
    line = "Arre bhaiya, these are the best tomatoes in Jaipur. Fresh from the farm this morning! Sixty a kilo."
    brain = ScriptedBrain(lambda r: decision(line, 50, r.stage))
    async with running_server(brain=brain, TTS="espeak", SILENCE_TIMEOUT_MS=0) as served:
        created = await create(served)
        url = served.ws_url(created["session_id"], created["player_token"]) + "&voice=1"
        listening = served.ws_url(created["session_id"], created["spectator_token"]) + "&voice=1"
        async with client(url) as c, client(listening) as spectator:
            await c.until("welcome")
            await spectator.until("welcome")
            await c.send({"type": "transcript", "id": "t1", "text": "Namaste bhaiya"})
            reply = await c.until("reply", in_reply_to="t1")
            await c.until("reply.audio", turn=reply["turn"])
            await c.send({"type": "playback", "id": "p1", "turn": reply["turn"], "heard_chars": 5,
                          "interrupted": True})  # the barge-in
            heard = await c.until("heard", in_reply_to="p1")
            await c.send({"type": "transcript", "id": "t2", "text": "Kitne ka hai?"})
            second = await c.until("reply", in_reply_to="t2")
            await read_reply_audio(c, second["turn"])
            await read_reply_audio(spectator, second["turn"])
            first_socket = list(c.seen)
        assert check_wire(spectator.seen, "espeak") >= 3  # a listening spectator hears him too, mouth and all
        async with client(url) as c:  # a new socket: resume, then a turn
            await c.until("welcome")
            await c.send({"type": "resume", "id": "r1", "last_seq": heard["seq"]})
            await c.until("ack", id="r1")
            await c.send({"type": "transcript", "id": "t3", "text": "Thoda kam karo"})
            third = await c.until("reply", in_reply_to="t3")
            await read_reply_audio(c, third["turn"])
            second_socket = list(c.seen)
    assert check_wire(first_socket, "espeak") >= 4 and check_wire(second_socket, "espeak") >= 3
    after_barge = first_socket[first_socket.index(heard) + 1:]
    assert [f for f in _spoken(after_barge) if f["turn"] == reply["turn"]] == []


async def test_an_api_voice_has_estimated_visemes_and_a_client_may_opt_out(openai_fake: FakeOpenAI) -> None:
    async with running_server(**speech_settings(openai_fake)) as served:
        created = await create(served)
        base = served.ws_url(created["session_id"], created["player_token"]) + "&voice=1"
        async with client(base) as c:
            await c.until("welcome")
            await c.send({"type": "transcript", "id": "t1", "text": "Namaste bhaiya"})
            reply = await c.until("reply", in_reply_to="t1")
            await read_reply_audio(c, reply["turn"])
            assert check_wire(c.seen, "estimate") >= 1
        async with client(base + "&visemes=0") as c:
            await c.until("welcome")
            await c.send({"type": "transcript", "id": "t2", "text": "Kitne ka?"})
            reply = await c.until("reply", in_reply_to="t2")
            await read_reply_audio(c, reply["turn"])
            audio = _spoken(c.seen)
            assert audio and all(f["visemes"] == [] and f["visemes_source"] == "" for f in audio)
        async with client(base + "&visemes=maybe") as c:
            await c.until("welcome")
            error = await c.until("error")
            assert error["code"] == "invalid" and error["message"].startswith("visemes")
            await c.send({"type": "transcript", "id": "t3", "text": "Theek hai"})
            reply = await c.until("reply", in_reply_to="t3")
            await read_reply_audio(c, reply["turn"])
            assert check_wire(c.seen, "estimate") >= 1  # the bad value changed nothing: still on
