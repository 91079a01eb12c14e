"""Offline recognition biased to the scene (issue #41, docs/voice.md): the ARPA writer, the G2P
mapping, the labelled speech set, the recogniser's figures on a sample of it, and a whole haggle
spoken by espeak-ng through `POST /api/test` and over the socket.

The full evaluation (every clip, today's general model beside it, the calibration curve) is
`python -m benchmarks.scene_stt`; here a fixed sample holds the acceptance figures.
"""

# ruff: noqa: RUF001  (IPA letters are the data here, not look-alikes)
from __future__ import annotations

import base64
import json
import math
from dataclasses import asdict

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.scenario import available_scenarios, load_scenario
from tests.ci import need_tools
from tests.servers import running_server
from tests.speech_set import LABELS, Line, Tally, Variant, judge, labels, load_labels, render, variants
from tests.voice_support import unity_wav
from voice.arpa import BOS, EOS, _score, build_arpa, read_arpa
from voice.confidence import THRESHOLD, WRONG_AMONG_ACCEPTED
from voice.g2p import CMU_PHONES, ipa_to_cmu
from voice.numerals import spoken_number
from voice.scene_corpus import scene_sentences, vocabulary
from voice.scene_corpus import words as words_of
from voice.stt import SceneContext

WORDS = st.sampled_from(["a", "b", "c", "d", "e"])
# Clean English clips: 48 through the scene model (a quarter of them: on every 10th, 19 clips, one
# line heard right and asked again moves the figure by 6 points), 10 through the general one.
SCENE_EVERY, GENERAL_EVERY = 4, 19


# ---------------------------------------------------------------------------- pure parts


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(WORDS, min_size=1, max_size=5), st.floats(0.1, 5.0)), min_size=1, max_size=8))
def test_every_history_of_the_arpa_model_sums_to_one(sentences: list[tuple[list[str], float]]) -> None:
    model = read_arpa(build_arpa(sentences))
    vocab = [g[0] for g in model if len(g) == 1 and g[0] != BOS]
    histories = {g for g in model if len(g) < 3 and g[-1] != EOS} | {(BOS, "a"), ("e", "e")}
    for history in histories:
        total = sum(10 ** _score(model, (*history, w)[-3:]) for w in vocab)
        assert math.isclose(total, 1.0, abs_tol=1e-4), (history, total)


def test_the_arpa_text_has_the_standard_sections() -> None:
    text = build_arpa([(["how", "much"], 1.0)])
    assert text.startswith("\\data\\\nngram 1=4\nngram 2=3\nngram 3=2\n") and text.endswith("\\end\\\n")
    assert "-99.0\t<s>" in text


def test_espeaks_ipa_maps_onto_cmu_phones() -> None:
    assert ipa_to_cmu("tˈæmæɾɚ") == ("T", "AE", "M", "AE", "T", "ER")
    assert ipa_to_cmu("bˈe\u200dɪjə") == ("B", "EY", "Y", "AH")  # a tie inside a diphthong
    assert ipa_to_cmu("tʃˈɑːwən") == ("CH", "AA", "W", "AH", "N")


@given(st.text(alphabet="ˈˌːæɑɒɔʌəɚɛeɪiʊuaoɐɾptkbdgfvθðszʃʒhmnŋlɹrwjtʃdʒ\u200d_", max_size=20))
def test_any_ipa_gives_only_cmu_phones(ipa: str) -> None:
    assert set(ipa_to_cmu(ipa)) <= CMU_PHONES


@given(st.integers(1, 999_999), st.booleans())  # zero is no price
def test_a_spoken_price_is_read_back_by_the_offer_reader(n: int, joined: bool) -> None:
    from session.offers import read_offer

    reading = read_offer(f"i will give you {spoken_number(n, joined=joined)} rupees", None)
    assert reading is not None and reading.price == n


def test_a_passs_evidence_is_its_posterior_language_model_score_and_least_rate() -> None:
    """Issue #34: the confidence reads the scene pass's mean posterior, its language-model score per
    word and the least frames per phone over its words (a squeezed word is an inserted one)."""
    from voice.scene_stt import _evidence, _log_units

    words = [("okay", 0.9, 10, 29, -100.0), ("done(2)", 0.5, 30, 35, -300.0)]  # 20 frames, then 6
    evidence = _evidence(words, [4, 3])
    assert (evidence.words, evidence.lm_score, evidence.frames_per_phone) == (2, -200.0, 2.0)
    assert math.isclose(evidence.mean_posterior, 0.7) and evidence.min_posterior == 0.5
    assert _evidence([], []).words == 0
    assert math.isclose(_log_units(1.0001 ** -160), -160.0, abs_tol=1e-6)


def test_the_moment_weighs_the_item_in_hand_and_the_quotes_neighbourhood() -> None:
    pack = load_scenario("jaipur-bazaar")
    plain = dict((" ".join(w), c) for w, c in scene_sentences(pack))
    moment = scene_sentences(pack, SceneContext("jaipur-bazaar", "en-IN", "Tomato", 120))
    weights: dict[str, float] = {}
    for w, c in moment:
        weights[" ".join(w)] = weights.get(" ".join(w), 0.0) + c
    assert weights["how much are the tomatoes"] > plain["how much are the tomatoes"]
    assert weights["i will give you forty rupees"] > plain.get("i will give you forty rupees", 0.0)
    # every pack's own words are in its model: item names, local names, cue words
    for name in available_scenarios():
        scenario = load_scenario(name)
        words = vocabulary(scene_sentences(scenario))
        assert {w for i in scenario.items for w in words_of(i.local)} <= words


def test_the_pause_model_has_the_packs_fillers_where_a_learner_says_them() -> None:
    """Issue #34: the model of a pause inside a turn stops on every filler of the pack, and on a word
    no sentence ends on; the scene model of final transcripts has none of it."""
    pack = load_scenario("jaipur-bazaar")
    plain = {tuple(w) for w, _ in scene_sentences(pack)}
    paused = scene_sentences(pack, hesitations=True)
    fillers = {tuple(words_of(f)) for found in pack.fillers.values() for f in found}
    ends = {tuple(w[-len(f):]) for w, _ in paused for f in fillers if len(w) > len(f)}
    assert fillers <= ends  # each filler ends some sentence's prefix
    assert ("i", "will", "give") in {tuple(w) for w, _ in paused} and ("i", "will", "give") not in plain
    assert not any(w[-1] in {"umm", "matlab"} for w in plain)
    backchannels = {tuple(words_of(b)) for found in pack.backchannels.values() for b in found}
    assert backchannels <= {tuple(w) for w, _ in paused}  # said alone


def test_the_committed_labels_are_what_the_generator_makes() -> None:
    committed = json.loads(LABELS.read_text("utf-8"))
    assert committed == [asdict(line) for line in labels()], "run python -m tests.speech_set"
    for line in load_labels():  # the offer reader reads each line's price from its own words
        assert judge(line, line.text).price_ok and judge(line, line.text).errors == 0, line


# ---------------------------------------------------------------------------- the recogniser on a sample


@pytest.fixture(scope="module")
def scene(scene_recogniser: object) -> object:
    return scene_recogniser  # the run's one recogniser (tests/conftest.py)


def test_a_pack_word_espeak_reads_otherwise_has_both_pronunciations(scene: object) -> None:
    """CMU's pronunciation first, espeak-ng's reading as `word(2)` where it differs; the pack's
    dictionary in the cache keeps both, so a restart reads back the same decoder."""
    from voice.g2p import read_dictionary

    scene.prepare(["marrakech-souk"])  # type: ignore[attr-defined]
    entries: dict[str, tuple[str, ...]] = {}
    for path in scene.cache.glob("scene-*.dict"):  # type: ignore[attr-defined]
        entries.update(read_dictionary(path.read_text("utf-8")))
    assert entries["dirhams"] == ("D", "ER", "AH", "M", "Z")  # CMU's
    assert entries["dirhams(2)"] == ("D", "ER", "R", "AE", "M", "Z")  # espeak-ng's, mapped
    assert "brother(2)" not in entries  # the same both ways: one pronunciation


def sample(language: str, every: int) -> list[tuple[Line, Variant]]:
    pairs = [(line, v) for line in load_labels() if (line.language == "en") == (language == "en")
             for v in variants(line)]
    return pairs[::every]


def tally(stt: object, pairs: list[tuple[Line, Variant]]) -> Tally:
    import time

    total = Tally()
    for line, variant in pairs:
        pcm = render(line, variant)
        start = time.process_time()
        heard, _ = stt.decode(pcm, SceneContext(line.pack, line.language, line.item, line.quote))  # type: ignore[attr-defined]
        total.add(line, judge(line, heard.text), heard.confidence or 0.0, THRESHOLD, len(pcm) / 32_000,
                  time.process_time() - start)
    return total


@pytest.fixture(scope="module")
def english(scene: object) -> dict[str, float | int | None]:
    return tally(scene, sample("en", 11)).figures()


def test_wrong_transcripts_rarely_pass_the_clarify_threshold(english: dict[str, float | int | None]) -> None:
    assert english["n"] and english["wrong_above_threshold"] is not None
    assert english["wrong_above_threshold"] <= 0.05, english


def test_recognition_costs_well_under_real_time(english: dict[str, float | int | None]) -> None:
    cpu = english["cpu_ms_per_s"]
    assert cpu is not None and cpu < 400, english  # measured: 110-140 ms per second of speech


def test_english_lines_are_mostly_heard(english: dict[str, float | int | None]) -> None:
    wer, prices = english["wer"], english["price_accuracy"]
    assert wer is not None and prices is not None
    assert wer < 0.3 and prices > 0.7, english  # today's general model: WER 0.6-0.7 on this set


def test_english_lines_meet_the_issues_word_error_rate(english: dict[str, float | int | None]) -> None:
    wer = english["wer"]
    assert wer is not None and wer <= 0.15, english  # issue #41's target


@pytest.mark.xfail(strict=True, reason="issue #41's price target, blocked: this acoustic model "
                                        "reads at most 87 % (docs/voice.md)")
def test_spoken_prices_meet_the_issues_target(english: dict[str, float | int | None]) -> None:
    prices = english["price_accuracy"]
    assert prices is not None and prices >= 0.95, english


# ---------------------------------------------------------------------------- confidence per backend (issue #34)


def clear_sample(every: int) -> list[tuple[Line, Variant]]:
    """Clear speech: the clean English clips of the labelled set, every `every`th."""
    return [(line, v) for line in load_labels() if line.language == "en" for v in variants(line)
            if v.noise_db is None][::every]


class _General:
    """pocketsphinx's general model (`STT_SCENE=false`) with the scene model's entry point."""

    def __init__(self) -> None:
        from voice.stt import PocketsphinxStt

        self.stt = PocketsphinxStt()

    def decode(self, pcm: bytes, _context: SceneContext) -> tuple[object, object]:
        return self.stt.decode_evidence(pcm)


def test_a_thinking_learners_partial_text_ends_on_the_filler(scene: object) -> None:
    """At a pause inside a turn (`paused`) the recogniser hears the filler the learner stopped on, so
    the end-of-turn policy waits (tests/test_turn_end.py holds the policy)."""
    from voice.turn_words import TurnWords

    heard, _ = scene.decode(spoken("I will give you umm", "en-us"),  # type: ignore[attr-defined]
                            SceneContext("jaipur-bazaar", "en-IN", paused=True))
    assert TurnWords.of(load_scenario("jaipur-bazaar")).ends_on_filler(tuple(heard.text.split())), heard


@pytest.fixture(scope="module")
def clear(scene: object) -> dict[str, float | int | None]:
    """The scene model's figures on the clear sample, decoded once for the tests that read them."""
    return tally(scene, clear_sample(SCENE_EVERY)).figures()


@pytest.mark.slow
def test_clear_speech_through_the_scene_model_is_seldom_asked_again(clear: dict[str, float | int | None]) -> None:
    """What passes the threshold is right (the meaning every backend's calibration shares), and a
    line heard right is seldom asked again: issue #34's target, at most 10 % of clear lines heard
    right get "please repeat" (on all 190 clean clips 6.1 %; docs/voice.md)."""
    figures = clear
    wrong, repeat = figures["wrong_among_accepted"], figures["false_repeat"]
    assert wrong is not None and wrong <= WRONG_AMONG_ACCEPTED, figures
    assert repeat is not None and repeat <= 0.10, figures


@pytest.mark.slow
def test_the_general_model_takes_almost_nothing_it_hears_as_a_turn() -> None:
    """The general model hears almost nothing of the scene right; calibrated like the scene model, what
    little passes the threshold is right, and the rest is asked again."""
    figures = tally(_General(), clear_sample(GENERAL_EVERY)).figures()
    assert figures["accepted"] == 0 or (figures["wrong_among_accepted"] or 0.0) <= WRONG_AMONG_ACCEPTED, figures


# ---------------------------------------------------------------------------- end to end

def spoken(text: str, voice: str = "en-us+f3") -> bytes:
    """A learner's line as espeak-ng says it, PCM16 mono 16 kHz."""
    import subprocess

    from voice.audio import decode_clip

    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", "165", "--stdout", "--stdin"], input=text.encode(),
                         capture_output=True, check=True, timeout=30).stdout
    return decode_clip(wav)


@pytest.mark.anyio
async def test_a_whole_haggle_spoken_through_the_unity_endpoint_reaches_a_deal(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Greeting, question, offers and acceptance, each spoken by espeak-ng and posted as the shipped
    build posts them, with the default clarify threshold: the scene model hears the prices, and a
    line heard too unsurely is said again, as a learner would."""
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    async with running_server(STT="pocketsphinx", TTS="none", SILENCE_TIMEOUT_MS=0,
                              STT_CACHE_DIR=str(tmp_path_factory.mktemp("stt"))) as served, \
            httpx.AsyncClient(base_url=served.base_url, timeout=60) as http:

        async def post(text: str) -> dict[str, object]:
            for voice in ("en-us+f3", "en-us", "en-us+m3"):  # said again, another way, when unclear
                body = {"audioData": base64.b64encode(unity_wav(spoken(text, voice))).decode(),
                        "inputLanguage": "en", "targetLanguage": "en", "object_grabbed": "Tomato",
                        "happiness_score": 50, "negotiation_state": "INITIAL"}
                answer = await http.post("/api/test", json=body)
                assert answer.status_code == 200, answer.text
                heard: dict[str, object] = {**answer.json(), "session": answer.headers["x-samvad-session"]}
                if float(heard["confidence"]) >= THRESHOLD:  # type: ignore[arg-type]
                    return heard
            return heard

        said = [await post("Namaste bhaiya, how much are the tomatoes?")]
        registry = served.services.registry  # type: ignore[union-attr]
        for offer in (40, 55):
            said.append(await post(f"That is too expensive. I will give you {spoken_number(offer)} rupees."))
        for _ in range(4):
            if said[-1]["negotiation_state"] == "DEAL":
                break
            actor = registry.live(str(said[-1]["session"]))
            quote = actor.negotiation.quote if actor is not None else None
            assert quote is not None, said[-1]
            said.append(await post(f"Okay, {spoken_number(quote)} rupees, deal."))
        assert said[-1]["negotiation_state"] == "DEAL", [(s["transcript"], s["reply"]) for s in said]
        assert "rupees" in str(said[1]["transcript"])


@pytest.mark.anyio
async def test_the_sockets_audio_frames_use_the_scene_model(tmp_path_factory: pytest.TempPathFactory) -> None:
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    from tests.servers import client, create

    async with running_server(STT="pocketsphinx", TTS="none", SILENCE_TIMEOUT_MS=0,
                              STT_CACHE_DIR=str(tmp_path_factory.mktemp("stt"))) as served:
        created = await create(served)
        async with client(served.ws_url(created["session_id"], created["player_token"])) as c:
            await c.until("welcome")
            await c.send({"type": "scene", "id": "s1", "object_grabbed": "Tomato"})
            pcm = spoken("That is too expensive. I will give you forty rupees.")
            await c.send({"type": "audio", "id": "a1", "event": "start", "format": "pcm16"})
            for i in range(0, len(pcm), 6400):
                await c.send({"type": "audio", "id": "a1", "event": "chunk",
                              "data": base64.b64encode(pcm[i:i + 6400]).decode()})
            await c.send({"type": "audio", "id": "a1", "event": "end"})
            heard = await c.until("speech", id="a1", wait=30)
            assert heard["stt"] == "pocketsphinx"
            assert heard["text"] == "that is too expensive i will give you forty rupees", heard
            assert 0 < heard["confidence"] <= 1  # whether it is a turn is the calibration's to say


def test_the_optional_engine_is_refused_loudly_without_its_model(tmp_path: object) -> None:
    """STT=vosk is a setting hook for an engine the operator installs: without its model folder (or
    the package) the server does not start, and it says what is missing."""
    from server.config import load_settings
    from server.voice import build_voice

    with pytest.raises(RuntimeError, match="VOSK_MODEL_DIR"):
        build_voice(load_settings(STT="vosk", TTS="none", VOSK_MODEL_DIR=""))
    with pytest.raises(RuntimeError, match="vosk"):
        build_voice(load_settings(STT="vosk", TTS="none", VOSK_MODEL_DIR=str(tmp_path)))
