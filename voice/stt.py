"""Speech to text: the `SpeechToText` interface and the embedded engine (pocketsphinx).

A backend gets PCM16 mono 16 kHz and returns a `Transcription`: the text, a confidence in 0-1
(None when the engine gives none, which the session takes as clear), the backend's name and, where
the engine times them, the words with their times (pocketsphinx and the OpenAI-compatible one do).
The OpenAI-compatible backend is in `voice.openai_speech`.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from voice.confidence import GENERAL_CALIBRATION, Calibration, Evidence
from voice.errors import SpeechServiceError

_FILLERS = ("<s>", "</s>", "<sil>", "[NOISE]", "<unk>")
FRAME_MS = 10  # pocketsphinx's frames: 100 a second


@dataclass(frozen=True, slots=True)
class WordTime:
    """One recognised word and where it lies in the utterance (ms from the audio's start)."""

    word: str
    start_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class Transcription:
    text: str
    confidence: float | None
    backend: str
    words: tuple[WordTime, ...] = ()  # with their times, where the engine gives them (fluency: voice/fluency.py)


@dataclass(frozen=True, slots=True)
class SceneContext:
    """What a recogniser may know of the moment, read off the session by its caller: the pack, the
    learner's language, the item in hand and the vendor's standing quote for it, and whether the
    audio stops at a pause inside the turn (`paused`). A backend that cannot use it ignores it
    (voice/scene_stt.py biases its model to it, and hears fillers at a pause)."""

    scenario: str
    language: str | None = None
    item: str | None = None
    quote: int | None = None
    paused: bool = False  # a decode at a pause inside a turn (a partial): the learner may be thinking


class SpeechToText(Protocol):
    name: str

    async def transcribe(self, pcm: bytes, language: str | None,
                         scene: SceneContext | None = None) -> Transcription: ...


def pocketsphinx_available() -> bool:
    """True when the pocketsphinx wheel, with the en-US model inside it, is installed."""
    try:
        import pocketsphinx
    except ImportError:
        return False
    import os

    return os.path.isdir(os.path.join(pocketsphinx.get_model_path(), "en-us"))


class PocketsphinxStt:
    """CMU pocketsphinx with the US-English model shipped inside its wheel: no key, no download.

    It only knows English, so Hindi words come out as their nearest English sounds, and its word
    posteriors run low; its confidence is their mean and least, calibrated on the labelled speech
    set like the scene model's (`GENERAL_CALIBRATION`, voice/confidence.py), so the clarify
    threshold means the same with it. One decoder, used by one thread at a time.
    """

    name = "pocketsphinx"

    def __init__(self, calibration: Calibration = GENERAL_CALIBRATION) -> None:
        from pocketsphinx import Decoder

        self._decoder: Any = Decoder(samprate=16000, loglevel="FATAL")
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        self.calibration = calibration

    def decode(self, pcm: bytes) -> Transcription:
        """One utterance, in the calling thread (`transcribe` runs it in a worker)."""
        return self.decode_evidence(pcm)[0]

    def decode_evidence(self, pcm: bytes) -> tuple[Transcription, Evidence]:
        """The transcript and the evidence its confidence comes from (the benchmark's entry). There
        is one pass, so the agreement is 1."""
        with self._lock:
            decoder = self._decoder
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
            hyp = decoder.hyp()
            segs = [(s.word, s.prob, s.start_frame, s.end_frame) for s in decoder.seg()] if hyp is not None else []
        kept = [(w.split("(")[0], p, a, b) for w, p, a, b in segs if w not in _FILLERS and not w.startswith("+")]
        probs = [min(1.0, max(0.0, p)) if math.isfinite(p) else 0.0 for _, p, *_ in kept]
        evidence = Evidence(sum(probs) / len(probs) if probs else 0.0, min(probs, default=0.0), 1.0, len(kept))
        text = " ".join(w for w, *_ in kept)
        timed = tuple(WordTime(w, a * FRAME_MS, (b + 1) * FRAME_MS) for w, _, a, b in kept)
        return Transcription(text, self.calibration.confidence(evidence), self.name, timed), evidence

    async def transcribe(self, pcm: bytes, language: str | None,
                         scene: SceneContext | None = None) -> Transcription:
        try:
            return await anyio.to_thread.run_sync(self.decode, pcm, limiter=self._limiter)
        except RuntimeError as exc:
            raise SpeechServiceError(f"pocketsphinx failed: {exc}") from exc
