"""espeak-ng through its C library (Debian's libespeak-ng1), so that one synthesis pass gives both
the audio and the sample at which each phoneme starts.

The command-line espeak-ng can print phonemes or write audio, but not say where in the audio each
phoneme falls; the library's synth callback does: with `espeakINITIALIZE_PHONEME_EVENTS` every
`espeakEVENT_PHONEME` carries the phoneme's IPA name (`espeakINITIALIZE_PHONEME_IPA`) and `sample`,
its first sample counted from the start of the text. The library is one global synthesizer per
process, so calls are serialized by a lock (and run in a worker thread by the async callers).

The text is passed as UTF-8 with neither `espeakSSML` nor `espeakPHONEMES`: a line the learner
influenced is spoken as words, never read as markup or as phoneme codes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass

from voice.errors import SpeechServiceError
from voice.visemes import Phone, Viseme, viseme_of

LIBRARY = "libespeak-ng.so.1"
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INIT_PHONEME_EVENTS, _INIT_PHONEME_IPA, _INIT_DONT_EXIT = 0x0001, 0x0002, 0x8000
_CHARS_UTF8, _ENDPAUSE = 0x1, 0x1000  # the command line's end pause, so the audio is the same
_POS_CHARACTER = 1
# The audio handed to the callback a second at a time, not espeak-ng's default 60 ms: a pass makes
# 6 callbacks into Python instead of 80, 4 % of a silent pass's CPU; the events' sample positions
# are the same.
_BUFFER_MS = 1000
_RATE = 1  # espeakRATE
_EVENT_END_OF_LIST, _EVENT_WORD, _EVENT_PHONEME = 0, 1, 7


class _Event(ctypes.Structure):
    """`espeak_EVENT` of speak_lib.h (the `id` union read as its 8-byte `string`)."""

    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint), ("text_position", ctypes.c_int),
                ("length", ctypes.c_int), ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", ctypes.c_char * 8)]


_Callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


@dataclass(frozen=True, slots=True)
class Synthesis:
    """One pass: PCM16 mono at `rate`, and its phonemes in order (pauses as `sil`)."""

    pcm: bytes
    rate: int
    phones: tuple[Phone, ...]
    unknown: tuple[str, ...] = ()  # phoneme names the viseme table did not know (shown as sil)


@dataclass(frozen=True, slots=True)
class Timings:
    """A silent pass: the phonemes in order and the length in samples at `rate`, no audio (what
    another voice's viseme estimate needs: voice/estimate.py)."""

    rate: int
    samples: int
    phones: tuple[Phone, ...]


def library_path() -> str | None:
    """The library's file name when it can be loaded, else None."""
    try:
        ctypes.CDLL(LIBRARY)
    except OSError:
        found = ctypes.util.find_library("espeak-ng")
        return found
    return LIBRARY


class Espeak:
    """The process's one espeak-ng synthesizer."""

    def __init__(self, path: str = LIBRARY) -> None:
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise SpeechServiceError(f"cannot load {path}: {exc}") from exc
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, _BUFFER_MS, None,
                                     _INIT_PHONEME_EVENTS | _INIT_PHONEME_IPA | _INIT_DONT_EXIT)
        if rate <= 0:
            raise SpeechServiceError(f"espeak_Initialize failed ({rate})")
        self.rate: int = rate
        self._lib = lib
        self._lock = threading.Lock()
        self._pcm = bytearray()
        self._keep = True  # False for a silent pass: its samples are counted, not copied
        self._samples = 0
        self._events: list[tuple[int, int, str]] = []
        self._callback = _Callback(self._on_synth)  # kept: the library holds only a raw pointer
        lib.espeak_SetSynthCallback(self._callback)

    def _on_synth(self, wav: ctypes._Pointer[ctypes.c_short], count: int,
                  events: ctypes._Pointer[_Event]) -> int:
        if count > 0 and wav:
            self._samples += count
            if self._keep:
                self._pcm += ctypes.string_at(wav, 2 * count)
        i = 0
        while events[i].type != _EVENT_END_OF_LIST:
            event = events[i]
            if event.type in (_EVENT_WORD, _EVENT_PHONEME):
                name = bytes(event.id).split(b"\0", 1)[0].decode("utf-8", "replace")
                self._events.append((event.type, event.sample, name))
            i += 1
        return 0

    def synthesize(self, text: str, voice: str, words_per_minute: int) -> Synthesis:
        """Speak `text` with `voice` (an espeak-ng voice name) in one pass. Blocking: tens of ms."""
        pcm, _, events = self._run(text, voice, words_per_minute, keep=True)
        return _synthesis(pcm, self.rate, events)

    def timings(self, text: str, voice: str, words_per_minute: int) -> Timings:
        """The same pass with its audio counted and dropped: the phonemes' samples and the length."""
        _, samples, events = self._run(text, voice, words_per_minute, keep=False)
        return Timings(self.rate, samples, _synthesis(b"", self.rate, events).phones)

    def _run(self, text: str, voice: str, words_per_minute: int, *,
             keep: bool) -> tuple[bytes, int, list[tuple[int, int, str]]]:
        data = text.encode("utf-8")
        with self._lock:
            self._pcm, self._events, self._keep, self._samples = bytearray(), [], keep, 0
            if self._lib.espeak_SetVoiceByName(voice.encode("ascii")) != 0:
                raise SpeechServiceError(f"espeak-ng has no voice {voice!r}")
            self._lib.espeak_SetParameter(_RATE, words_per_minute, 0)
            status = self._lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8 | _ENDPAUSE,
                                            None, None)
            pcm, samples, events = bytes(self._pcm), self._samples, self._events
            self._pcm, self._events, self._keep = bytearray(), [], True
        if status != 0:
            raise SpeechServiceError(f"espeak_Synth failed ({status})")
        return pcm, samples, events


def _synthesis(pcm: bytes, rate: int, events: list[tuple[int, int, str]]) -> Synthesis:
    phones: list[Phone] = []
    unknown: list[str] = []
    word_at: int | None = None
    for kind, sample, name in events:
        if kind == _EVENT_WORD:
            word_at = sample
            continue
        viseme = viseme_of(name)
        if viseme is None:
            unknown.append(name)
            viseme = Viseme.SIL
        starts_word = word_at is not None and sample >= word_at and viseme != Viseme.SIL
        if starts_word:
            word_at = None
        phones.append(Phone(sample, int(viseme), starts_word))
    return Synthesis(pcm, rate, tuple(phones), tuple(unknown))


_shared: Espeak | None = None
_shared_lock = threading.Lock()


def shared_espeak() -> Espeak:
    """The process's synthesizer, made on first use (the library allows one)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Espeak(library_path() or LIBRARY)
        return _shared
