"""Text to speech: the `TextToSpeech` interface and the embedded engine (Debian's espeak-ng).

A backend speaks one sentence at a time and yields PCM16 mono pieces at `sample_rate`, so a
streaming backend's first bytes go out before the sentence is done.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import anyio

from voice.espeak_lib import Espeak, Synthesis, library_path

# espeak-ng's voices for the session's languages (it has Hindi, Tamil, Kannada and Punjabi too).
ESPEAK_VOICES = {
    "hi-IN": "hi", "kn-IN": "kn", "ta-IN": "ta", "en-IN": "en-us", "hi-EN": "hi", "en": "en-us",
    "ja-JP": "ja", "ar-MA": "ar", "fr-MA": "fr", "pa-IN": "pa",
}
ESPEAK_RATE = 22_050  # espeak-ng's own output rate
ESPEAK_WPM = 160


class TextToSpeech(Protocol):
    name: str
    sample_rate: int

    def synthesize(self, text: str, language: str | None) -> AsyncIterator[bytes]: ...


def espeak_available() -> str | None:
    """libespeak-ng's file name when it loads (Debian's libespeak-ng1, which espeak-ng depends on)."""
    return library_path()


def espeak_voice(language: str | None) -> str:
    return ESPEAK_VOICES.get(language or "", "en-us")


class EspeakTts:
    """espeak-ng through its library (voice/espeak_lib.py): one pass gives the audio and each
    phoneme's first sample, which `speak` returns and `synthesize` drops."""

    name = "espeak-ng"

    def __init__(self, espeak: Espeak, *, words_per_minute: int = ESPEAK_WPM) -> None:
        self.espeak = espeak
        self.sample_rate = espeak.rate
        self.wpm = words_per_minute

    async def speak(self, text: str, language: str | None) -> Synthesis:
        # Tens of ms of CPU in a worker thread; a barge-in lets go of it and the lock keeps the library whole.
        return await anyio.to_thread.run_sync(self.espeak.synthesize, text, espeak_voice(language), self.wpm,
                                              abandon_on_cancel=True)

    async def synthesize(self, text: str, language: str | None) -> AsyncIterator[bytes]:
        yield (await self.speak(text, language)).pcm
