"""The vendor's thinking sounds ("Hmm...", "Accha..."), synthesized ahead (issue #34).

When the brain's first words are late, a connection's voice plays one (server/voice.py), so the
learner hears that Ramesh is thinking. Played late it would be no use, so it is synthesized before
it is needed: a `FillerBank` is the server's, and a connection asks it to `prepare` its pack's
sounds (`Scenario.thinking_sounds`) in the vendor's language when it opens; each sound is made
once per server, language and voice, with its visemes, and kept. Until its sounds are ready a
session plays none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import anyio

from voice.errors import SpeechServiceError
from voice.lipsync import LipSync, NoVisemes
from voice.speaker import FillerClip
from voice.tts import TextToSpeech

__all__ = ["FillerBank", "sound_at", "synthesize_clip"]

log = logging.getLogger("samvad.voice")
MAX_SOUNDS = 64  # kept per server: packs have a handful per language


def sound_at(ended: float, end_of_turn_ms: float | None, after_s: float) -> float:
    """When a late reply's thinking sound is due: `after_s` after the learner's last word, and not
    before the turn was taken at `ended` (seconds on one clock). An open microphone's turn ended
    `end_of_turn_ms` of silence after that word, so its sound goes as the turn is taken once the wait
    was as long; a push-to-talk turn (None) ended at its `end`, the last word as far as we know."""
    return max(ended, ended - (end_of_turn_ms or 0.0) / 1000 + after_s)


async def synthesize_clip(tts: TextToSpeech, lipsync: LipSync, text: str, language: str | None) -> FillerClip:
    """One sound, whole, with the visemes of all of it."""
    voicing = lipsync.voicing(text, language)
    pcm = bytearray()
    async with anyio.create_task_group() as tg:
        tg.start_soon(voicing.prepare)
        async for piece in voicing.audio():
            pcm += piece
    pcm = pcm[: len(pcm) - len(pcm) % 2]
    pairs = await voicing.cut(len(pcm) // 2, last=True) if pcm else ()
    return FillerClip(text, bytes(pcm), tts.sample_rate, tts.name, pairs, voicing.source if pairs else "")


class FillerBank:
    """The server's thinking sounds, by (language, text)."""

    def __init__(self, tts: TextToSpeech, lipsync: Callable[[], LipSync] | None = None) -> None:
        self.tts = tts
        self._lipsync = lipsync
        self._clips: dict[tuple[str | None, str], FillerClip] = {}
        self._making: set[tuple[str | None, str]] = set()

    def ready(self, language: str | None, sounds: Sequence[str]) -> list[FillerClip]:
        """The clips of `sounds` already made, in their order."""
        return [clip for text in sounds if (clip := self._clips.get((language, text))) is not None]

    async def prepare(self, language: str | None, sounds: Sequence[str]) -> None:
        """Make the sounds not made yet (nor being made). A failure is logged: no filler then."""
        lipsync = self._lipsync() if self._lipsync is not None else NoVisemes(self.tts)
        for text in sounds:
            key = (language, text)
            if key in self._clips or key in self._making or len(self._clips) >= MAX_SOUNDS:
                continue
            self._making.add(key)
            try:
                clip = await synthesize_clip(self.tts, lipsync, text, language)
            except SpeechServiceError as exc:
                log.warning("thinking sound %r not synthesized: %s", text, exc)
                continue
            finally:
                self._making.discard(key)
            if clip.pcm:
                self._clips[key] = clip
