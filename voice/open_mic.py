"""An open microphone: the learner's continuous audio, cut into turns on the server (issue #34).

A hands-free client streams PCM16 without saying where an utterance ends (`audio` frames `open`,
`chunk`s, `close`). `OpenMic` runs the voice-activity detector over the stream (voice/vad.py) and
the end-of-turn policy over its decisions (voice/turn_end.py), and keeps the audio of the turn in
progress, from a little before its first speech. It says, as the audio arrives:

- `Heard`: the learner paused (rule 2's glance, about 100 ms of silence; the utterance's end, 300
  ms, only when speech came after the glance), but the turn goes on. The caller decodes the turn
  so far, sends it as `speech.partial` (and the session may ask the brain ahead), and gives the
  text back (`partial`), which tells the policy whether the learner stopped on a filler,
  mid-sentence or at a sentence's end;
- `Finished`: the turn ended. Its utterance id is the stream's id and the turn's number
  (`mic.3`), which becomes the transcript's: acknowledged and idempotent like any other;
- `BargedIn`, while the vendor speaks (the caller says so with each chunk, `vendor_speaking`) and
  with a barge-in decision (voice/barge_in.py): a run of the learner's speech over him was a real
  interruption (`interrupt`: the caller stops him; the run goes on as a turn) or a backchannel
  ("haan", "accha": he goes on, and the run is forgotten, so it never becomes a turn).

Pure apart from the detector: no clock, no I/O; positions are milliseconds of the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from voice.barge_in import BargeIn, VerdictKind
from voice.errors import AudioRejected
from voice.turn_end import EndOfTurn, Paused, TurnEnded, UtteranceEnded
from voice.vad import Detector, VadStream

__all__ = ["BYTES_PER_MS", "PRE_ROLL_MS", "BargedIn", "Finished", "Heard", "MicEvent", "OpenMic"]

BYTES_PER_MS = 32  # PCM16 mono at 16 kHz
PRE_ROLL_MS = 250.0  # audio kept from before the first speech window: the detector starts a word late
# A backchannel run over the vendor followed this soon by a turn is that turn's start: without the
# recogniser's text "Wait," and its comma's pause read as a backchannel, and "that is too much" cut in.
LINK_MS = 1000.0


@dataclass(frozen=True, slots=True)
class Heard:
    """An utterance of turn `utterance_id` ended at `at_ms`; `pcm` is the turn's audio so far, whose
    speech ended at `speech_end_ms`."""

    utterance_id: str
    pcm: bytes
    at_ms: float
    speech_end_ms: float


@dataclass(frozen=True, slots=True)
class Finished:
    """Turn `utterance_id` is over at `at_ms`: its audio, when its speech ended, and the wait that
    ended it (`waited_ms`, a thinking wait when `thinking`)."""

    utterance_id: str
    pcm: bytes
    at_ms: float
    speech_end_ms: float
    waited_ms: float
    thinking: bool


@dataclass(frozen=True, slots=True)
class BargedIn:
    """A run of learner speech over the vendor, from `start_ms`, decided at `at_ms`: an interruption
    (`interrupt`) of turn `utterance_id`'s making, or a backchannel (dropped)."""

    utterance_id: str
    interrupt: bool
    at_ms: float
    start_ms: float
    pcm: bytes = b""  # a backchannel's audio, for the recogniser to check it was one (`promote`)


MicEvent = Heard | Finished | BargedIn


class OpenMic:
    """One learner's open microphone, stream `stream_id`."""

    def __init__(self, stream_id: str, detector: Detector, end_of_turn: EndOfTurn, *, max_turn_ms: float,
                 barge_in: BargeIn | None = None) -> None:
        self.stream_id = stream_id
        self.barge_in = barge_in
        self.vad = VadStream(detector)
        self.end_of_turn = end_of_turn
        self.max_turn_ms = max_turn_ms
        self.turns = 0  # turns finished
        self._audio = bytearray()  # the stream from `_base_ms` on
        self._base_ms = 0.0
        self._interrupting = False  # the barge-in run under way was decided an interruption
        self._lead: tuple[float, float] | None = None  # the last backchannel run: kept for a turn that follows
        self._heard_to: float | None = None  # the speech end the last `Heard` covered

    @property
    def utterance_id(self) -> str:
        """The id the turn in progress (or the next one) will have."""
        return f"{self.stream_id}.{self.turns + 1}"

    @property
    def in_turn(self) -> bool:
        return self.end_of_turn.in_turn

    def partial(self, text: str) -> None:
        """The recogniser's text of the turn so far."""
        self.end_of_turn.partial(text)

    def feed(self, pcm: bytes, *, vendor_speaking: bool = False) -> list[MicEvent]:
        """Take the next chunk of the stream (said while the vendor was heard speaking, or not); the
        events it completes. A turn longer than `max_turn_ms` is dropped
        (`AudioRejected("audio_too_long")`) and listening starts afresh."""
        frames = self.vad.feed(pcm)  # refuses an odd chunk before anything is kept
        self._audio += pcm
        events: list[MicEvent] = []
        barge = self.barge_in
        for frame in frames:
            if barge is not None and (vendor_speaking or barge.in_run):
                was = barge.in_run
                verdict = barge.frame(frame)
                if verdict is not None:
                    interrupt = verdict.kind is VerdictKind.INTERRUPT
                    self._interrupting = interrupt
                    run = b"" if interrupt else self._span(verdict.start_ms - PRE_ROLL_MS, verdict.at_ms)
                    events.append(BargedIn(self.utterance_id, interrupt, verdict.at_ms, verdict.start_ms, run))
                    if not interrupt:
                        self._lead = (verdict.start_ms, verdict.at_ms)
                if was and not barge.in_run and not self._interrupting:
                    # A backchannel, or a sound too short to be anything, said over him: no turn
                    # (a backchannel's audio is kept a while, for a turn that may follow: `_lead`).
                    self.end_of_turn.next_turn()
                    self._keep_from(frame.end_ms if self._lead is None else self._lead[0] - PRE_ROLL_MS)
                    continue
                if not barge.in_run:
                    self._interrupting = False
            for event in self.end_of_turn.frame(frame):
                if isinstance(event, (Paused, UtteranceEnded)):
                    if event.speech_end_ms == self._heard_to:
                        continue  # the glance at this silence heard all of it already
                    if isinstance(event, Paused) and barge is not None and barge.in_run and not self._interrupting:
                        continue  # a run over the vendor not yet judged: likely a backchannel, no turn
                    self._heard_to = event.speech_end_ms
                    events.append(Heard(self.utterance_id, self._turn_audio(event.at_ms), event.at_ms,
                                        event.speech_end_ms))
                elif isinstance(event, TurnEnded):
                    events.append(Finished(self.utterance_id, self._turn_audio(event.at_ms), event.at_ms,
                                           event.speech_end_ms, event.waited_ms, event.thinking))
                    self.turns += 1
                    self.end_of_turn.next_turn()
                    self._lead = None
                    self._keep_from(event.at_ms)
        if not self.in_turn:
            start = self.end_of_turn.turn_start_ms  # a run of speech that may yet start a turn
            at = self.vad.position_ms if start is None else start
            if self._lead is not None and at - self._lead[1] > LINK_MS:
                self._lead = None
            self._keep_from((at if self._lead is None else min(at, self._lead[0])) - PRE_ROLL_MS)
        elif self._turn_ms() > self.max_turn_ms:
            self.end_of_turn.next_turn()
            self._keep_from(self.vad.position_ms)
            raise AudioRejected("audio_too_long", f"the turn went on for over {self.max_turn_ms / 1000:g} s "
                                "without a pause; it was dropped")
        return events

    def promote(self, start_ms: float) -> Finished | None:
        """The recogniser heard words in the backchannel run from `start_ms` (a short "Bhaiya,
        suno."): it was a turn after all. Its turn, unless the learner has gone on speaking (the
        turn in progress then starts with it, `LINK_MS`) or it is gone."""
        lead = self._lead
        if lead is None or lead[0] != start_ms or self.in_turn:
            return None
        finished = Finished(self.utterance_id, self._span(lead[0] - PRE_ROLL_MS, lead[1]), lead[1], lead[1], 0.0,
                            False)
        self.turns += 1
        self._lead = None
        self._keep_from(lead[1])
        return finished

    def _span(self, start_ms: float, end_ms: float) -> bytes:
        """The kept audio between two stream positions."""
        at = max(0, int((start_ms - self._base_ms) * BYTES_PER_MS))
        end = int((end_ms - self._base_ms) * BYTES_PER_MS)
        return bytes(self._audio[at - at % 2:end - end % 2])

    def close(self) -> Finished | None:
        """The client closed the microphone: the turn in progress, if any, ends now."""
        ended = self.end_of_turn.cut(self.vad.position_ms)
        if ended is None:
            return None
        finished = Finished(self.utterance_id, self._turn_audio(ended.at_ms), ended.at_ms, ended.speech_end_ms,
                            ended.waited_ms, ended.thinking)
        self.turns += 1
        self.end_of_turn.next_turn()
        self._lead = None
        self._keep_from(ended.at_ms)
        return finished

    def _turn_start_ms(self) -> float:
        start = self.end_of_turn.turn_start_ms
        if start is None:
            return self._base_ms
        lead = self._lead
        if lead is not None and start - lead[1] <= LINK_MS:
            start = lead[0]  # the backchannel just before was this turn's first words
        return max(self._base_ms, start - PRE_ROLL_MS)

    def _turn_ms(self) -> float:
        return self._base_ms + len(self._audio) / BYTES_PER_MS - self._turn_start_ms()

    def _turn_audio(self, until_ms: float) -> bytes:
        """The turn's audio up to stream position `until_ms` (the decision that ended it), whatever the chunks."""
        at = int((self._turn_start_ms() - self._base_ms) * BYTES_PER_MS)
        end = int((until_ms - self._base_ms) * BYTES_PER_MS)
        return bytes(self._audio[at - at % 2:end - end % 2])

    def _keep_from(self, ms: float) -> None:
        """Forget the audio before stream position `ms`."""
        drop = int((ms - self._base_ms) * BYTES_PER_MS)
        drop -= drop % 2
        if drop > 0:
            del self._audio[:drop]
            self._base_ms += drop / BYTES_PER_MS
