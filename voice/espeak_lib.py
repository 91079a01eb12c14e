"""espeak-ng through its C library (Debian's libespeak-ng1), so that one synthesis pass gives both
the audio and the sample at which each phoneme starts.

The command-line espeak-ng can print phonemes or write audio, but not say where in the audio each
phoneme falls; the library's synth callback does: with `espeakINITIALIZE_PHONEME_EVENTS` every
`espeakEVENT_PHONEME` carries the phoneme's IPA name (`espeakINITIALIZE_PHONEME_IPA`) and `sample`,
its first sample counted from the start of the text. The library is one global synthesizer per
process, so calls are serialized by a lock (and run in a worker thread by the async callers).

The text is passed as UTF-8 with neither `espeakSSML` nor `espeakPHONEMES`: a line the learner
influenced is spoken as words, never read as markup or as phoneme codes.

The silent pass (`timings`, for another voice's viseme estimate) speaks with a variant of the
same voice, `TIMINGS_VARIANT`, whose only setting is `clarity 0`: espeak-ng then sums its
harmonics for the first formant alone and makes the higher ones with its cheap single-harmonic
peaks, about half the CPU of a pass. Where each phoneme starts and how long the line is do not
change: they are set by the phonemes' lengths and the pitch's cycles, which the variant leaves as
they were (tests/test_visemes_cost.py holds the two passes equal in the sessions' languages). The
variant is a file, and espeak-ng looks for variants only in its data directory, so the process
reads its data from a directory of its user's (`_data_with_variant`) of links to the system's, with
the variant added; if that cannot be made, the silent pass uses the voice itself (as espeak-ng does
on its own when a variant's file has gone).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import logging
import os
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from voice.errors import SpeechServiceError
from voice.visemes import Phone, Viseme, viseme_of

log = logging.getLogger("samvad.voice")
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
TIMINGS_VARIANT = "samvad-timings"
_VARIANT_FILE = f"language variant\nname {TIMINGS_VARIANT}\nclarity 0\n"
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

    def __init__(self, path: str = LIBRARY, *, timings_variant: bool = True) -> None:
        """`timings_variant` False: the silent pass speaks with the voice itself (to compare)."""
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise SpeechServiceError(f"cannot load {path}: {exc}") from exc
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        lib.espeak_ng_InitializePath.argtypes = [ctypes.c_char_p]
        lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        lib.espeak_Info.restype = ctypes.c_char_p
        lib.espeak_ng_InitializePath(None)  # the system's data directory, to link to
        system = ctypes.c_char_p()
        lib.espeak_Info(ctypes.byref(system))
        home = _data_with_variant(Path(system.value.decode())) if timings_variant and system.value else None
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, _BUFFER_MS,
                                     None if home is None else str(home).encode(),
                                     _INIT_PHONEME_EVENTS | _INIT_PHONEME_IPA | _INIT_DONT_EXIT)
        if rate <= 0:
            raise SpeechServiceError(f"espeak_Initialize failed ({rate})")
        self.rate: int = rate
        self.data_dir = home  # the data directory with the variant (None: the system's)
        self.timings_variant = home is not None  # the silent pass speaks with TIMINGS_VARIANT
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
        """The same pass with its audio counted and dropped, and made with `TIMINGS_VARIANT` (the
        module's docstring): the phonemes' samples and the length, as `synthesize` gives them."""
        if self.timings_variant and "+" not in voice:  # (a voice that names a variant keeps it)
            voice = f"{voice}+{TIMINGS_VARIANT}"
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


def _data_with_variant(system: Path) -> Path | None:
    """A directory holding an `espeak-ng-data` of links to `system`'s files, with `TIMINGS_VARIANT`
    among the voice variants; None (and the system's directory is used) when it cannot be made.

    It is made once per user and system data in the temporary directory, under a name that digests
    what it mirrors, and used by every later process: a server ends on SIGTERM by raising it again
    (uvicorn), so its exit handlers never run to remove a directory of its own. One found there is
    used only if it is this user's and closed to others (espeak-ng reads its files as data)."""
    variants_dir = system / "voices" / "!v"
    try:
        listing = sorted(entry.name for entry in system.iterdir())
        variants = sorted(entry.name for entry in variants_dir.iterdir()) if variants_dir.is_dir() else []
    except OSError as exc:
        log.warning("espeak-ng's silent pass runs at its full cost: its data directory cannot be read (%s)", exc)
        return None
    key = hashlib.sha256("\0".join([str(system), *listing, "!v", *variants, _VARIANT_FILE]).encode()).hexdigest()
    root = Path(tempfile.gettempdir()) / f"samvad-espeak-{os.getuid()}-{key[:16]}"
    if _usable(root):
        return root
    building: Path | None = None
    try:
        building = Path(tempfile.mkdtemp(prefix=f"{root.name}.", dir=root.parent))
        data = building / "espeak-ng-data"
        data.mkdir()
        for name in listing:
            if name != "voices":
                (data / name).symlink_to(system / name)
        (data / "voices" / "!v").mkdir(parents=True)
        for entry in (system / "voices").iterdir() if (system / "voices").is_dir() else ():
            if entry.name != "!v":
                (data / "voices" / entry.name).symlink_to(entry)
        for name in variants:
            (data / "voices" / "!v" / name).symlink_to(variants_dir / name)
        (data / "voices" / "!v" / TIMINGS_VARIANT).write_text(_VARIANT_FILE)
        building.rename(root)  # atomic; refused if another process made it first
        return root
    except OSError as exc:
        if building is not None and building.exists():
            if _usable(root):  # another process made it meanwhile
                shutil.rmtree(building, ignore_errors=True)
                return root
            if (building / "espeak-ng-data" / "voices" / "!v" / TIMINGS_VARIANT).is_file():
                return building  # made, but the shared name is taken by something else: this process's own
            shutil.rmtree(building, ignore_errors=True)
        log.warning("espeak-ng's silent pass runs at its full cost: no data directory for its variant (%s)", exc)
        return None


def _usable(root: Path) -> bool:
    """`root` is a data directory made by `_data_with_variant` for this user, closed to others
    (its variant's file written again if it went)."""
    try:
        status = root.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o077:
        return False
    variant = root / "espeak-ng-data" / "voices" / "!v" / TIMINGS_VARIANT
    try:
        if not variant.is_file():
            variant.write_text(_VARIANT_FILE)
    except OSError:
        return False
    return True


_shared: Espeak | None = None
_shared_lock = threading.Lock()


def shared_espeak() -> Espeak:
    """The process's synthesizer, made on first use (the library allows one)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Espeak(library_path() or LIBRARY)
        return _shared
