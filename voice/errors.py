"""The voice package's exceptions, split by who is at fault.

    VoiceError                  base of everything this package raises
    +-- AudioRejected           the client sent audio we refuse: `code` is the wire error code
    |                           (docs/protocol.md §6: `audio_unsupported`, `audio_too_large`,
    |                           `audio_too_long`, `audio_not_started`); nothing changes.
    +-- SpeechServiceError      an STT or TTS backend failed for good (a 4xx, or retries used up,
                                or espeak-ng missing or failing). The caller degrades to text.

A speech service's failures (transport errors, error statuses) become `SpeechServiceError` in one
place, `voice.openai_speech` (`OpenAISpeech._post` and its `_call`).
"""

from __future__ import annotations


class VoiceError(Exception):
    """Base class of every error raised by the voice package."""


class AudioRejected(VoiceError):
    """Audio from a client that is refused; `code` is the error code sent back."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SpeechServiceError(VoiceError):
    """A speech backend could not answer; the turn goes on as text."""
