"""The socket side of an open microphone (issue #34; docs/voice.md, Open microphone).

A connection's voice (server/voice.py) makes a `Microphone` when the client sends `audio` with
`event: open`. The voice-activity model takes some 150 ms to load, so it loads in a worker thread
(`start`), and the audio that arrives meanwhile waits, bounded, in `_early`. Then every `chunk`
goes through `OpenMic` (voice/open_mic.py), and its events become transcription jobs:

- at a pause inside a turn (`Heard`), a partial job: the turn so far is decoded, sent as a
  sequenced `speech.partial`, and its text tells the end-of-turn policy whether the learner stopped
  on a filler or mid-sentence;
- at the end of the turn (`Finished`), the final job, whose transcript becomes the turn. When no
  speech came after the last partial, its text is the final one and no second decode is needed:
  the transcript is ready when the turn ends;
- while the vendor is heard speaking (`speaking`, asked with each chunk), the barge-in decision
  (voice/barge_in.py) says what the learner's speech over him was (`BargedIn`), handed to
  `barged`: past `BARGE_TIMING`'s 1.5 s of speech an interruption; a shorter run, once it ends, a
  backchannel, whose audio the caller has decoded (a probe job) and `promote`s to a turn, and an
  interruption, when its words are not the pack's backchannels ("Bhaiya, suno.").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

import anyio

from schemas.enums import LanguageCode
from schemas.scenario import load_scenario
from session.speech import Hearing
from voice.barge_in import BargeIn, BargeTiming
from voice.errors import AudioRejected
from voice.open_mic import BYTES_PER_MS, BargedIn, Finished, Heard, OpenMic
from voice.stt import Transcription
from voice.turn_end import EndOfTurn
from voice.turn_words import TurnWords
from voice.vad import Detector, default_detector

__all__ = ["BARGE_TIMING", "MicJob", "Microphone"]

# With the recogniser's word on every run that ends (a probe), length alone need only catch a
# learner who talks on without a pause: the set's slowest backchannel ("accha accha", 110 words a
# minute) lasts 1.15 s, so 1.5 s stops no backchannel (900 ms stopped 8 % of them).
BARGE_TIMING = BargeTiming(backchannel_ms=1500.0, hard_ms=1500.0)


@dataclass(frozen=True, slots=True)
class MicJob:
    """What the transcriber is asked of an open microphone: turn `id`'s audio, partial or final; a
    final one's `end_of_turn_ms` is the silence after its speech that ended the turn."""

    id: str
    pcm: bytes
    partial: bool
    speech_end_ms: float
    _: KW_ONLY  # the measurements by name: two optional floats side by side are easy to swap
    end_of_turn_ms: float | None = None
    probe_ms: float | None = None  # a backchannel run over the vendor from here: were they words?


class Microphone:
    """One open microphone of a connection: stream `stream_id`, in the learner's `language`."""

    def __init__(self, stream_id: str, language: LanguageCode | None, *, max_turn_ms: float,
                 queue: Callable[[MicJob, LanguageCode | None], None],
                 speaking: Callable[[], bool] = lambda: False,
                 barged: Callable[[BargedIn], None] = lambda event: None) -> None:
        self.stream_id = stream_id
        self._speaking = speaking
        self._barged = barged
        self.language = language
        self.max_turn_ms = max_turn_ms
        self._queue = queue
        self.mic: OpenMic | None = None  # once its model has loaded
        self._early = bytearray()  # audio that came before it had
        self.closed = False
        self.heard: tuple[str, float, Transcription] | None = None  # the last partial: id, speech end, text
        self.words: TurnWords | None = None  # the pack's fillers and backchannels, once started

    async def start(self, hearing: Hearing, make: Callable[[], Detector] = default_detector) -> None:
        """Load the model (in a worker thread) and take the audio that waited for it."""
        detector = await anyio.to_thread.run_sync(make)
        # A pack's first microphone works out the starts of its sentences (about 0.1 s): off the loop.
        words = await anyio.to_thread.run_sync(TurnWords.of, load_scenario(hearing.scenario, hearing.scenario_version))
        self.mic = OpenMic(self.stream_id, detector, EndOfTurn(words, hearing.level), max_turn_ms=self.max_turn_ms,
                           barge_in=BargeIn(words, BARGE_TIMING, streaming=False))
        self.words = words
        early, self._early = bytes(self._early), bytearray()
        if early and not self.closed:
            self.feed(early)

    def feed(self, pcm: bytes) -> None:
        """The next chunk of the stream (`AudioRejected` for one that is not PCM16, or too long a turn)."""
        if self.closed:
            return
        mic = self.mic
        if mic is None:
            if len(pcm) % 2:
                raise AudioRejected("audio_unsupported", "PCM16 audio comes in whole 2-byte samples")
            if len(self._early) + len(pcm) > self.max_turn_ms * BYTES_PER_MS:
                raise AudioRejected("audio_too_long", "the microphone is still starting; its audio was dropped")
            self._early += pcm
            return
        for event in mic.feed(pcm, vendor_speaking=self._speaking()):
            if isinstance(event, BargedIn):
                self._barged(event)
                if not event.interrupt and event.pcm:
                    self._queue(MicJob(event.utterance_id, event.pcm, True, event.at_ms, probe_ms=event.start_ms),
                                self.language)
            elif isinstance(event, Heard):
                self._queue(MicJob(event.utterance_id, event.pcm, True, event.speech_end_ms), self.language)
            elif isinstance(event, Finished):
                self._queue(MicJob(event.utterance_id, event.pcm, False, event.speech_end_ms,
                                   end_of_turn_ms=event.at_ms - event.speech_end_ms), self.language)

    @property
    def position_ms(self) -> float:
        """How much of the stream has been decided (0 until the model has loaded)."""
        return self.mic.vad.position_ms if self.mic is not None else 0.0

    def partial_heard(self, job: MicJob, heard: Transcription) -> None:
        """A partial job's text: kept for the final job, and read by the end-of-turn policy."""
        self.heard = (job.id, job.speech_end_ms, heard)
        mic = self.mic
        if mic is not None and mic.utterance_id == job.id:
            mic.partial(heard.text)

    def ready(self, job: MicJob) -> Transcription | None:
        """The final job's text when the last partial heard all of its speech already."""
        heard = self.heard
        if heard is None or heard[0] != job.id or heard[1] < job.speech_end_ms:
            return None
        return heard[2]

    def promote(self, job: MicJob, heard: Transcription) -> None:
        """Probe `job` heard words, not backchannels: its run is a turn (queued with its text)."""
        mic = self.mic
        if mic is None or job.probe_ms is None or self.closed:
            return
        finished = mic.promote(job.probe_ms)
        if finished is not None:
            self.heard = (finished.utterance_id, finished.speech_end_ms, heard)
            self._queue(MicJob(finished.utterance_id, finished.pcm, False, finished.speech_end_ms), self.language)

    def close(self) -> None:
        """The client closed it: a turn in progress is heard to its end; nothing more is taken."""
        if self.mic is not None and not self.closed:
            finished = self.mic.close()
            if finished is not None:
                self._queue(MicJob(finished.utterance_id, finished.pcm, False, finished.speech_end_ms,
                                   end_of_turn_ms=finished.at_ms - finished.speech_end_ms), self.language)
        self.closed = True
        self._early = bytearray()
