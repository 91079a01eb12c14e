"""An optional stronger engine: Vosk (Kaldi) with a model the operator installed (`STT=vosk`,
`VOSK_MODEL_DIR`), for the languages pocketsphinx's US-English model cannot hear.

Not a dependency, not even an extra: no package on PyPI ships an English or multilingual Vosk
model (the `vosk` wheel is the recogniser alone, Apache-2.0; its models come from its project's
site), and `vosk.Model` given a directory reads it and downloads nothing. docs/voice.md says what
else was checked. The scene is not used: a large Vosk model ignores runtime grammars.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import anyio

from voice.errors import SpeechServiceError
from voice.stt import SceneContext, Transcription


class VoskStt:
    name = "vosk"

    def __init__(self, model_dir: str) -> None:
        if not model_dir or not os.path.isdir(model_dir):
            raise RuntimeError(f"STT=vosk needs VOSK_MODEL_DIR, a Vosk model's folder (got {model_dir!r})")
        try:
            import vosk  # type: ignore[import-not-found, unused-ignore]
        except ImportError as exc:
            raise RuntimeError("STT=vosk but the vosk package is not installed (pip install vosk)") from exc
        vosk.SetLogLevel(-1)
        self._vosk: Any = vosk
        self._model: Any = vosk.Model(model_dir)  # a path: read from disk, never downloaded
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)

    def decode(self, pcm: bytes) -> Transcription:
        with self._lock:
            recognizer = self._vosk.KaldiRecognizer(self._model, 16_000)
            recognizer.SetWords(True)
            recognizer.AcceptWaveform(pcm)
            result = json.loads(recognizer.FinalResult())
        words = result.get("result") or []
        text = str(result.get("text", "")).strip()
        confidence = sum(float(w.get("conf", 0.0)) for w in words) / len(words) if words else 0.0
        return Transcription(text, round(confidence, 3) if text else 0.0, self.name)

    async def transcribe(self, pcm: bytes, language: str | None,
                         scene: SceneContext | None = None) -> Transcription:
        try:
            return await anyio.to_thread.run_sync(self.decode, pcm, limiter=self._limiter)
        except (RuntimeError, OSError, ValueError) as exc:
            raise SpeechServiceError(f"vosk failed: {exc}") from exc
