"""Text to speech: the `TextToSpeech` interface and the embedded engine (Debian's espeak-ng).

A backend speaks one sentence at a time and yields PCM16 mono pieces at `sample_rate`, so a
streaming backend's first bytes go out before the sentence is done.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator
from typing import Protocol

import anyio

from voice.audio import parse_wav
from voice.errors import AudioRejected, SpeechServiceError

# espeak-ng's voices for the session's languages (it has Hindi, Tamil, Kannada and Punjabi too).
ESPEAK_VOICES = {
    "hi-IN": "hi", "kn-IN": "kn", "ta-IN": "ta", "en-IN": "en-us", "hi-EN": "hi", "en": "en-us",
    "ja-JP": "ja", "ar-MA": "ar", "fr-MA": "fr", "pa-IN": "pa",
}
ESPEAK_RATE = 22_050  # espeak-ng's own output rate
ESPEAK_TIMEOUT_S = 10.0


class TextToSpeech(Protocol):
    name: str
    sample_rate: int

    def synthesize(self, text: str, language: str | None) -> AsyncIterator[bytes]: ...


def espeak_available() -> str | None:
    return shutil.which("espeak-ng")


class EspeakTts:
    """espeak-ng as a subprocess. The text goes in on stdin, never as an argument, and SSML is off,
    so a learner-influenced line cannot become an option or markup."""

    name = "espeak-ng"
    sample_rate = ESPEAK_RATE

    def __init__(self, binary: str, *, words_per_minute: int = 160) -> None:
        self.binary = binary
        self.wpm = words_per_minute

    async def synthesize(self, text: str, language: str | None) -> AsyncIterator[bytes]:
        voice = ESPEAK_VOICES.get(language or "", "en-us")
        try:
            with anyio.fail_after(ESPEAK_TIMEOUT_S):
                done = await anyio.run_process(
                    [self.binary, "-v", voice, "-s", str(self.wpm), "--stdout", "--stdin"],
                    input=text.encode("utf-8"), check=False, stderr=subprocess.DEVNULL)
        except (OSError, TimeoutError) as exc:
            raise SpeechServiceError(f"espeak-ng failed: {exc}") from exc
        if done.returncode != 0:
            raise SpeechServiceError(f"espeak-ng exited with {done.returncode}")
        try:
            frames, rate, channels, _ = parse_wav(done.stdout)
        except AudioRejected as exc:
            raise SpeechServiceError(f"espeak-ng wrote no WAV: {exc.message}") from exc
        if rate != self.sample_rate or channels != 1:
            raise SpeechServiceError(f"espeak-ng wrote {rate} Hz x{channels}")
        yield frames
