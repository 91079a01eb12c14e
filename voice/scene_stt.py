"""Offline recognition biased to the scene (issue #41): pocketsphinx with a language model built
from the pack's own words, weighted to the moment, and a calibrated confidence.

- Models. Per pack and language a trigram model of what a learner may say there
  (voice/scene_corpus.py, written as ARPA by voice/arpa.py); per moment (the item in hand, the
  quote's neighbourhood: `SceneContext`) a model with those weighed up. Each is one pocketsphinx
  search; the decoder switches searches per utterance. Built when first needed (the packs' own
  at start-up, `prepare`), written to `cache_dir` under a digest of what they depend on (reused
  after a restart) and kept in memory, the least recently used moments dropped past `MOMENTS`.
- Dictionary. Only the scenes' words: their CMU pronunciations from the model's dictionary, and
  espeak-ng's (voice/g2p.py) for words it lacks. A small dictionary keeps a new search cheap
  (5 ms to load, against 0.5 s over the whole CMU dictionary).
- Pauses (issue #34). A decode at a pause inside a turn (`SceneContext.paused`: the open
  microphone's partials) uses the pack's pause model: the scene's sentences and the pack's fillers
  and backchannels where a learner says them, so a thinking learner's text ends on "umm". Final
  transcripts keep the scene model, which fillers would cost words (docs/voice.md).
- Confidence. The scene pass's word posteriors, its language-model score per word and its least
  frames per phone, combined and calibrated (voice/confidence.py). A second, free pass over the
  pack's words in any order (its agreement with the scene pass) is gone: with those features in,
  it made the calibration worse out of sample (docs/voice.md).
- Noise. Steady noise is filtered out of a noisy utterance before it is decoded (voice/denoise.py).

One decoder, used by one thread at a time (`_lock`); `transcribe` runs it in a worker thread.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import anyio

from schemas.scenario import DEFAULT_SCENARIO, newest_known
from voice.arpa import build_arpa
from voice.confidence import CALIBRATION, Calibration, Evidence
from voice.denoise import UNMEASURED_DB, filtered
from voice.errors import SpeechServiceError
from voice.g2p import dictionary_text, espeak_pronunciations, read_dictionary
from voice.numerals import spoken_number
from voice.scene_corpus import context_key, scene_sentences, vocabulary
from voice.stt import FRAME_MS, SceneContext, Transcription, WordTime

MODEL_VERSION = "6"  # bump when the corpus or the model's making changes: cached files are keyed by it
# The decoder's settings: the second, flat pass over the first pass's word lattice, for the scene
# passes only (`_load`): with the offers' frames in the model it took the English word error rate
# on every 4th English clip of the labelled set from 18.2 % to 16.7 %, for 25 % more CPU.
DECODER_OPTIONS: dict[str, Any] = {"fwdflat": True}
# Digital silence (espeak-ng's pauses, a client's zero padding) has no spectrum: its features are
# -inf and the front end's mean normalisation goes astray, so the words at the edges are lost.
# A floor of noise about 54 dB under full scale, and 300 ms of it at either end, as a microphone
# would give, took the English error rate on the labelled set from 44 % to 16 %.
DITHER_RMS = 64.0
EDGE_S = 0.3
MOMENTS = 32  # moment models kept per decoder (a few per live item and quote)
_NUMBER_WORDS = " ".join(spoken_number(n) for n in (*range(0, 20), *range(20, 100, 10), 100, 1000))


# Pronunciations found so far, shared by every decoder of the process (a server per test, the
# benchmark's): the CMU dictionary is scanned and espeak-ng run once per word, not per decoder.
_PRONOUNCED: dict[str, tuple[str, ...]] = {}


@lru_cache(maxsize=16)
def _pack_digest(name: str) -> str:
    return hashlib.sha256(newest_known(name).model_dump_json().encode("utf-8")).hexdigest()[:16]


@lru_cache(maxsize=32)
def _pack_sentences(name: str, local: bool, digest: str, hesitations: bool = False) -> list[tuple[list[str], float]]:
    """A pack's sentences (the same for every decoder: computed once per process and pack)."""
    return scene_sentences(newest_known(name), SceneContext(name, "local" if local else None),
                           hesitations=hesitations)


def _model_path() -> str:
    import pocketsphinx

    return os.path.join(pocketsphinx.get_model_path(), "en-us")


class SceneStt:
    """pocketsphinx with scene models; `name` is what `speech` events and `/health` show."""

    name = "pocketsphinx"  # the engine; STT_SCENE says which model (the wire and /health name the engine)

    def __init__(self, espeak: str | None, cache_dir: str | None = None, *,
                 calibration: Calibration = CALIBRATION, denoise: bool = True) -> None:
        from pocketsphinx import Decoder

        self._espeak = espeak
        self._scratch = None if cache_dir else tempfile.TemporaryDirectory(prefix="samvad-stt-")
        self.cache = Path(cache_dir or self._scratch.name)  # type: ignore[union-attr]
        self.cache.mkdir(parents=True, exist_ok=True)
        self.calibration = calibration
        self.denoise = denoise
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        self._known: set[str] = set()
        self._moments: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self._packs: dict[tuple[str, bool], tuple[str, str]] = {}  # (pack, local) -> (scene, pause)
        self._lexicon: dict[str, tuple[str, ...]] = {}  # every word the decoder has, with its phones
        dict_file = self.cache / f"seed-{MODEL_VERSION}.dict"
        if not dict_file.exists():
            _write(dict_file, dictionary_text(self._entries(_NUMBER_WORDS.split())))
        seed = read_dictionary(dict_file.read_text("utf-8"))
        self._lexicon.update(seed)
        self._known |= set(seed)
        self._decoder: Any = Decoder(hmm=os.path.join(_model_path(), "en-us"), dict=str(dict_file),
                                     lm=None, samprate=16000, loglevel="FATAL", **DECODER_OPTIONS)

    # ------------------------------------------------------------------ the dictionary

    def _entries(self, words: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """Pronunciations for `words`: the CMU dictionary's first, else espeak-ng's. Where both
        have the word and differ, espeak-ng's is a second pronunciation (`word(2)`), as it is how
        a word is read aloud from its spelling by an engine that knows none of the pack's words."""
        wanted = set(words) - self._known
        found = {k: _PRONOUNCED[k] for w in wanted for k in (w, f"{w}(2)") if k in _PRONOUNCED}
        wanted -= set(found)
        if not wanted:
            return found
        with open(os.path.join(_model_path(), "cmudict-en-us.dict"), encoding="utf-8") as cmu:
            for line in cmu:
                word, _, phones = line.partition(" ")
                if word in wanted and word not in found:
                    found[word] = tuple(phones.split())
        if self._espeak:
            spoken = espeak_pronunciations(self._espeak, sorted(wanted))
            for word, read in spoken.items():
                if word not in found:
                    found[word] = read
                elif read != found[word]:
                    found[f"{word}(2)"] = read
        _PRONOUNCED.update(found)
        return found

    def _learn(self, words: set[str]) -> set[str]:
        """Adds the words the decoder lacks; returns those with no pronunciation at all."""
        self._add(self._entries(words))
        return words - self._known

    def _add(self, entries: dict[str, tuple[str, ...]]) -> None:
        new = sorted((w, p) for w, p in entries.items() if w not in self._known)
        for i, (word, phones) in enumerate(new):
            self._decoder.add_word(word, " ".join(phones), i == len(new) - 1)
        self._lexicon.update(new)
        self._known |= {w for w, _ in new}

    # ------------------------------------------------------------------ the models

    def _load(self, name: str, path: Path) -> None:
        """Adds the search `name` of the model at `path`."""
        self._decoder.add_lm_file(name, str(path))

    def _model(self, name: str, sentences: list[tuple[list[str], float]], digest: str) -> None:
        unknown = self._learn(vocabulary(sentences))
        if unknown:
            sentences = [(ws, w) for ws, w in sentences if not unknown.intersection(ws)]
        path = self.cache / f"{digest}.arpa"
        if not path.exists():
            _write(path, build_arpa(sentences))
        self._load(name, path)

    def _pack(self, scenario: str, local: bool) -> tuple[str, str]:
        """The pack's scene model and its pause model (the scene with the pack's fillers and
        backchannels where a learner says them: for decodes at a pause, issue #34)."""
        known = self._packs.get((scenario, local))
        if known is not None:
            return known
        digest = hashlib.sha256(f"{MODEL_VERSION}|{_pack_digest(scenario)}|{local}".encode()).hexdigest()[:20]
        scene, pause = f"scene-{digest}", f"pause-{digest}"
        words = self.cache / f"{scene}.dict"
        if words.exists() and all((self.cache / f"{name}.arpa").exists() for name in (scene, pause)):
            # Built before (this process or an earlier one): its words and models are read back.
            self._add(read_dictionary(words.read_text("utf-8")))
            for name in (scene, pause):
                self._load(name, self.cache / f"{name}.arpa")
        else:
            sentences = _pack_sentences(scenario, local, _pack_digest(scenario))
            self._model(scene, sentences, scene)
            paused = _pack_sentences(scenario, local, _pack_digest(scenario), True)
            self._model(pause, paused, pause)
            said = sorted(vocabulary(paused) & self._known)
            _write(words, dictionary_text({k: self._lexicon[k] for w in said for k in (w, f"{w}(2)")
                                           if k in self._lexicon}))
        self._packs[(scenario, local)] = (scene, pause)
        return scene, pause

    def _moment(self, context: SceneContext) -> str:
        scenario, local, item, quote = key = context_key(context)
        scene, pause = self._pack(scenario, local)
        if context.paused:  # the learner may be thinking: the pack's model with its fillers
            return pause
        if not item and quote is None:
            return scene
        name = self._moments.get(key)
        if name is None:
            digest = hashlib.sha256(f"{MODEL_VERSION}|{_pack_digest(scenario)}|{key}".encode()).hexdigest()[:20]
            name = f"moment-{digest}"
            self._model(name, scene_sentences(newest_known(scenario), context), name)
            self._moments[key] = name
            while len(self._moments) > MOMENTS:
                _, old = self._moments.popitem(last=False)
                self._decoder.remove_search(old)
        self._moments.move_to_end(key)
        return name

    def prepare(self, scenarios: Iterable[str]) -> None:
        """Builds each pack's models now (start-up, or a pack just published)."""
        with self._lock:
            for name in scenarios:
                for local in (False, True):
                    self._pack(name, local)

    # ------------------------------------------------------------------ decoding

    def _pass(self, search: str, pcm: bytes) -> list[tuple[str, float, int, int, float]]:
        """One decode of (conditioned) audio with `search`: the words as the dictionary has them
        (`word(2)` for a second pronunciation), their posteriors, first and last frames and
        language-model scores (in the decoder's log units)."""
        decoder = self._decoder
        decoder.activate_search(search)
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        if decoder.hyp() is None:
            return []
        # Fillers (<s>, <sil>, [NOISE], [SPEECH], +breath+) are not words.
        return [(seg.word, float(seg.prob), seg.start_frame, seg.end_frame, _log_units(seg.lscore))
                for seg in decoder.seg() if seg.word[:1] not in "<[+"]

    def decode(self, pcm: bytes, context: SceneContext | None) -> tuple[Transcription, Evidence]:
        """The transcript and the evidence its confidence comes from (the benchmark's entry)."""
        context = context or SceneContext(DEFAULT_SCENARIO)
        pcm, above_noise = condition(pcm, clean=self.denoise)
        with self._lock:
            scene = self._moment(context)
            words = self._pass(scene, pcm)
            phones = [max(1, len(self._lexicon.get(w, ()))) for w, *_ in words]
        said = [w.split("(")[0] for w, *_ in words]
        evidence = _evidence(words, phones, above_noise)
        edge = int(EDGE_S * 1000)  # the times are the learner's audio's, not the conditioned audio's
        timed = tuple(WordTime(w, max(0, a * FRAME_MS - edge), max(0, (b + 1) * FRAME_MS - edge))
                      for w, (_, _, a, b, _) in zip(said, words, strict=True))
        return Transcription(" ".join(said), self.calibration.confidence(evidence), self.name, timed), evidence

    async def transcribe(self, pcm: bytes, language: str | None,
                         scene: SceneContext | None = None) -> Transcription:
        if scene is not None and language and scene.language is None:
            scene = SceneContext(scene.scenario, language, scene.item, scene.quote, scene.paused)
        try:
            heard, _ = await anyio.to_thread.run_sync(self.decode, pcm, scene, limiter=self._limiter)
        except (RuntimeError, OSError) as exc:
            raise SpeechServiceError(f"pocketsphinx failed: {exc}") from exc
        return heard

    def close(self) -> None:
        """Removes the models' folder when it was a temporary one."""
        if self._scratch is not None:
            self._scratch.cleanup()


def _log_units(p: float) -> float:
    """A probability the binding gives back as a float, in the decoder's log units (base 1.0001)."""
    return math.log(max(p, 1e-300)) / math.log(1.0001)


def _evidence(words: list[tuple[str, float, int, int, float]], phones: list[int],
              above_noise_db: float = UNMEASURED_DB) -> Evidence:
    """The scene pass's evidence: its posteriors, its language-model score per word, its least
    frames per phone and how far the speech stood over its noise (`Evidence`)."""
    if not words:
        return Evidence(0.0, 0.0, 1.0, 0, above_noise_db=above_noise_db)
    probs = [min(1.0, max(0.0, p)) for _, p, *_ in words]
    return Evidence(sum(probs) / len(probs), min(probs), 1.0, len(words),
                    sum(lm for *_, lm in words) / len(words),
                    min((b - a + 1) / n for (_, _, a, b, _), n in zip(words, phones, strict=True)),
                    above_noise_db)


def _write(path: Path, text: str) -> None:
    """Whole or not at all: another process may read the cache at the same time."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, "utf-8")
    tmp.replace(path)


def condition(pcm: bytes, *, clean: bool = True) -> tuple[bytes, float]:
    """`pcm` with its steady noise turned down (voice/denoise.py, unless not `clean`), `EDGE_S` of
    quiet at either end and a floor of noise (`DITHER_RMS`) throughout, and how far its speech
    stood over its noise (dB). The floor is seeded, so the same audio always decodes the same way."""
    import numpy as np

    speech = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").astype(np.float64)
    measured = filtered(speech)
    edge = np.zeros(int(EDGE_S * 16_000))
    signal = np.concatenate([edge, measured.samples if clean else speech, edge])
    noise = np.random.default_rng(len(pcm)).normal(0.0, DITHER_RMS, signal.shape)
    return bytes(np.clip(signal + noise, -32768, 32767).astype("<i2").tobytes()), measured.above_noise_db
