"""Fluency from word timings (issue #36): hand-worked timelines, the sums' properties, and speech
generated with known pauses, decoded by the embedded recogniser."""

from __future__ import annotations

import base64
import itertools
import shutil
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.fluency import Fluency
from voice.fluency import PAUSE_MS, measure, pack_fillers
from voice.stt import WordTime
from voice.turn_words import words


def timeline(*spans: tuple[str, int, int]) -> list[WordTime]:
    return [WordTime(w, a, b) for w, a, b in spans]


def test_a_turn_with_one_pause_and_a_filler_worked_by_hand() -> None:
    # "I will umm give you ninety" with a 600 ms pause after "umm", and a 100 ms gap (not a pause)
    said = timeline(("i", 0, 200), ("will", 200, 500), ("umm", 600, 900), ("give", 1500, 1800),
                    ("you", 1800, 2000), ("ninety", 2000, 2400))
    got = measure(said, pack_fillers("jaipur-bazaar", 1))
    assert got is not None
    # words: 5 (umm is a filler); speaking 0-2400 ms; one pause of 600 ms; two runs
    assert (got.words, got.fillers, got.speaking_ms, got.pause_ms, got.runs) == (5, 1, 2400, 600, 2)
    assert got.words_per_minute == 125.0  # 5 words in 2.4 s
    assert got.pause_ratio == 0.25  # 600 of 2400 ms
    assert got.mean_length_of_run == 2.5


def test_a_pack_filler_of_its_own_language_and_a_gap_just_under_a_pause() -> None:
    fillers = pack_fillers("jaipur-bazaar", 1)
    assert ("matlab",) in fillers
    said = timeline(("matlab", 0, 400), ("kitne", 400 + PAUSE_MS - 1, 900), ("ka", 900, 1000))
    got = measure(said, fillers)
    assert got is not None
    assert (got.words, got.fillers, got.pause_ms, got.runs) == (2, 1, 0, 1)


def test_a_filler_of_two_words_counts_once() -> None:
    got = measure(timeline(("you", 0, 100), ("know", 100, 300), ("ninety", 300, 700)), {("you", "know")})
    assert got is not None and (got.words, got.fillers) == (1, 1)


def test_nothing_said_has_no_figures() -> None:
    assert measure([]) is None
    assert measure(timeline(("...", 0, 300))) is None


sums = st.builds(Fluency, turns=st.integers(1, 5), words=st.integers(0, 200), fillers=st.integers(0, 20),
                 speaking_ms=st.integers(0, 120_000), pause_ms=st.integers(0, 60_000), runs=st.integers(1, 60))


@given(sums, sums, sums)
def test_a_sessions_sum_does_not_depend_on_the_order_of_its_turns(a: Fluency, b: Fluency, c: Fluency) -> None:
    assert a.plus(b).plus(c) == c.plus(a).plus(b)
    total = a.plus(b)
    assert total.turns == a.turns + b.turns and 0.0 <= total.pause_ratio <= 1.0


@given(st.lists(st.tuples(st.sampled_from(["haan", "umm", "ninety", "rupees", "matlab", "bhaiya"]),
                          st.integers(0, 900), st.integers(1, 800)), min_size=1, max_size=20))
def test_figures_of_any_timeline_are_consistent(steps: list[tuple[str, int, int]]) -> None:
    at, said = 0, []
    for word, gap, length in steps:
        said.append(WordTime(word, at + gap, at + gap + length))
        at += gap + length
    got = measure(said, pack_fillers("jaipur-bazaar", 1))
    assert got is not None
    assert got.words + got.fillers == len(said)  # every word here is one word or one filler
    assert got.runs == 1 + sum(1 for w, n in itertools.pairwise(said) if n.start_ms - w.end_ms >= PAUSE_MS)
    assert 0 <= got.pause_ms <= got.speaking_ms
    assert got.speaking_ms == said[-1].end_ms - said[0].start_ms


# Generated speech with known pauses, through the embedded recogniser's word times.

@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from voice.scene_stt import SceneStt

    espeak = shutil.which("espeak-ng")
    if espeak is None:
        pytest.fail("espeak-ng is not installed: scripts/test.sh installs it")
    stt = SceneStt(espeak, str(tmp_path_factory.mktemp("stt")))
    yield stt
    stt.close()


@pytest.mark.parametrize("pause_ms", [600, 1200])
def test_a_known_pause_in_generated_speech_is_measured(scene: object, pause_ms: int) -> None:
    from tests.turn_set import piece
    from voice.scene_stt import SceneStt
    from voice.stt import SceneContext

    assert isinstance(scene, SceneStt)
    first, second = piece("how much is this scarf", "en-us", 150, None), piece("i will give you two hundred",
                                                                                "en-us", 150, None)
    rate = 32  # bytes per ms of PCM16 mono 16 kHz
    lead = 400
    pcm = b"\0" * lead * rate + first + b"\0" * pause_ms * rate + second + b"\0" * 400 * rate
    heard, _ = scene.decode(pcm, SceneContext("jaipur-bazaar"))
    assert words(heard.text)[:2] == ("how", "much")
    got = measure(heard.words, pack_fillers("jaipur-bazaar", 1))
    assert got is not None
    spoken_ms = (len(first) + len(second)) // rate
    # The recogniser places word edges to within a few frames: the pause is the gap it hears between
    # the two phrases, which espeak-ng's trimmed audio makes exactly `pause_ms`.
    assert got.runs >= 2
    assert abs(got.pause_ms - pause_ms) <= 250, (got, heard.words)
    assert abs(got.speaking_ms - (spoken_ms + pause_ms)) <= 300
    assert got.words >= 8 and got.fillers == 0
    # 150 words a minute of espeak-ng, slowed by the pause: the rate falls as the pause grows
    expected = got.words * 60_000 / (spoken_ms + pause_ms)
    assert abs(got.words_per_minute - expected) / expected < 0.2


# End to end: spoken turns over the socket, the report and the learner's progress.

@pytest.mark.anyio
async def test_spoken_turns_fluency_reaches_the_speech_event_the_report_and_the_progress(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    await spoken_session(str(tmp_path_factory.mktemp("stt")), "vani")


@pytest.mark.anyio
@pytest.mark.neo4j
async def test_the_graph_keeps_a_spoken_sessions_fluency_for_the_progress(
        tmp_path_factory: pytest.TempPathFactory, neo4j_uri: str) -> None:
    import uuid

    await spoken_session(str(tmp_path_factory.mktemp("stt")), f"vani-{uuid.uuid4().hex[:8]}",
                         USE_MOCKS=False, MIRROR="neo4j", NEO4J_URI=neo4j_uri, BRAIN="rules")


async def spoken_session(cache: str, learner: str, **server: object) -> None:
    """Two spoken lines with a pause in each, then typed ones to a deal; the figures checked at
    every place they reach (the progress in Cypher, with `MIRROR=neo4j`)."""
    from tests.servers import create, player, running_server
    from tests.test_learners_api import ADMIN, api, profile_after
    from tests.turn_set import piece

    rate = 32
    async with running_server(STT="pocketsphinx", TTS="none", SILENCE_TIMEOUT_MS=0, ADMIN_KEY=ADMIN,
                              STT_CACHE_DIR=cache, **server) as served:
        created = await create(served, learner_id=learner, level="beginner")
        heard: list[dict[str, object]] = []
        async with await player(served, created) as c:
            await c.until("welcome")
            await c.send({"type": "scene", "id": "hold", "object_grabbed": "Tomato"})
            await c.until("ack", id="hold")
            for n, (first, second) in enumerate([("namaste bhaiya", "how much are the tomatoes"),
                                                 ("that is too expensive", "i will give you forty rupees")]):
                pcm = (b"\0" * 300 * rate + piece(first, "en-us", 140, None) + b"\0" * 900 * rate
                       + piece(second, "en-us", 140, None) + b"\0" * 300 * rate)
                await c.send({"type": "audio", "id": f"a{n}", "event": "start", "format": "pcm16"})
                for i in range(0, len(pcm), 32_000):  # a second a frame: well under 20 frames a second
                    await c.send({"type": "audio", "id": f"a{n}", "event": "chunk",
                                  "data": base64.b64encode(pcm[i:i + 32_000]).decode()})
                await c.send({"type": "audio", "id": f"a{n}", "event": "end"})
                heard.append(await c.until("speech", id=f"a{n}", wait=30))
                await c.until("ack", id=f"a{n}", wait=30)
            frames = []
            for n, text in enumerate(("I can pay 60 rupees bhaiya", "70 rupees bhaiya, please", "deal, 70")):
                frames += await c.turn(f"t{n}", text)
                if any(f["type"] == "session.ended" for f in frames):
                    break
        spoken = [Fluency.model_validate(h["fluency"]) for h in heard]
        for line in spoken:  # each line's 900 ms pause is heard as one
            assert line.runs >= 2 and 650 <= line.pause_ms <= 1_200, line
        total = spoken[0].plus(spoken[1])
        report = next(f for f in frames if f["type"] == "session.report")["report"]
        assert report["fluency"] == total.model_dump()  # typed turns add nothing
        profile = await profile_after(served, learner, 1)
        assert profile["store"] == ("neo4j" if server.get("MIRROR") == "neo4j" else "memory")
        page = await api(served, "GET", profile["progress"][0]["report_url"], None)
        assert f'data-wpm="{total.words_per_minute}"' in page.text and "words a minute" in page.text
        [point] = profile["progress"]
        assert (point["words_per_minute"], point["pause_ratio"], point["mean_length_of_run"], point["fillers"]) == (
            total.words_per_minute, total.pause_ratio, total.mean_length_of_run, total.fillers)
