"""Text to speech: the `TextToSpeech` interface and the embedded engine (Debian's espeak-ng).

A backend speaks one sentence at a time and yields PCM16 mono pieces at `sample_rate`, so a
streaming backend's first bytes go out before the sentence is done.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Protocol

import anyio

from voice.espeak_lib import Espeak, Synthesis, Timings, library_path

# espeak-ng's voices for the session's languages (it has Hindi, Tamil, Kannada and Punjabi too).
ESPEAK_VOICES = {
    "hi-IN": "hi", "kn-IN": "kn", "ta-IN": "ta", "en-IN": "en-us", "hi-EN": "hi", "en": "en-us",
    "ja-JP": "ja", "ar-MA": "ar", "fr-MA": "fr", "pa-IN": "pa",
}
ESPEAK_RATE = 22_050  # espeak-ng's own output rate
ESPEAK_WPM = 160
# Silent passes kept, the most recently used: a vendor's lines repeat (greetings, "Achha, theek
# hai.", a scripted line), and a pass is 2-6 ms of CPU against about 4 KB kept per line.
TIMINGS_KEPT = 128


class TextToSpeech(Protocol):
    name: str
    sample_rate: int

    def synthesize(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> AsyncIterator[bytes]:
        """`text` spoken, in pieces. `in_hand_s`: seconds of the reply's audio the listener still had to
        play when it was asked (its earlier pieces'); a streaming backend may read its service less
        eagerly while that lasts (voice/openai_speech.py). The audio is the same either way."""
        ...


def espeak_available() -> str | None:
    """libespeak-ng's file name when it loads (Debian's libespeak-ng1, which espeak-ng depends on)."""
    return library_path()


def espeak_voice(language: str | None) -> str:
    return ESPEAK_VOICES.get(language or "", "en-us")


class EspeakTts:
    """espeak-ng through its library (voice/espeak_lib.py): one pass gives the audio and each
    phoneme's first sample, which `speak` returns and `synthesize` drops."""

    name = "espeak-ng"

    def __init__(self, espeak: Espeak, *, words_per_minute: int = ESPEAK_WPM, timings_kept: int = TIMINGS_KEPT) -> None:
        self.espeak = espeak
        self.sample_rate = espeak.rate
        self.wpm = words_per_minute
        self._timings: OrderedDict[tuple[str, str], Timings] = OrderedDict()  # only the event loop touches it
        self.timings_kept = timings_kept
        self.timings_made = 0  # statistics: silent passes run (the rest came from those kept)

    async def speak(self, text: str, language: str | None) -> Synthesis:
        # Tens of ms of CPU in a worker thread; a barge-in lets go of it and the lock keeps the library whole.
        return await anyio.to_thread.run_sync(self.espeak.synthesize, text, espeak_voice(language), self.wpm,
                                              abandon_on_cancel=True)

    async def synthesize(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> AsyncIterator[bytes]:
        yield (await self.speak(text, language)).pcm  # one piece: nothing to pace

    async def timings(self, text: str, language: str | None) -> Timings:
        """The silent pass another voice's visemes are estimated from: the phonemes' timings only,
        the same for the same line, so the last `timings_kept` lines' are kept."""
        key = (text, espeak_voice(language))
        kept = self._timings.get(key)
        if kept is not None:
            self._timings.move_to_end(key)
            return kept
        made = await anyio.to_thread.run_sync(self.espeak.timings, text, key[1], self.wpm, abandon_on_cancel=True)
        self.timings_made += 1
        self._timings[key] = made
        self._timings.move_to_end(key)
        while len(self._timings) > self.timings_kept:
            self._timings.popitem(last=False)
        return made
