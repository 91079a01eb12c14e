"""The vendor's voice for one player connection: sentences spoken as the reply streams in.

`Speaker.observe` sees every event that goes to the player. `reply.delta` text is cut into
pieces (`voice.sentences`): the reply's first clause (at a comma once it has `FIRST_CLAUSE_WORDS`
words), then sentences; each whole piece is queued for synthesis at once, so the first audio
leaves while the brain is still writing; the `reply` speaks what is left (or, from a brain that
does not stream, the whole line, piece by piece). `reply.withdrawn` drops what
was queued for the turn and the `reply` is spoken afresh from sentence 0. A barge-in (`stop`: the
learner's `playback` with `interrupted`, or the learner starting a new utterance) drops everything
queued and cuts the sentence being synthesized.

One task (`run`) synthesizes in order; the queue is bounded (`QUEUE_SENTENCES`) and a sentence
that does not fit is dropped with the rest of its reply marked `degraded`. A backend failure
sends one `reply.audio` with `degraded: true` and the rest of that reply stays text.

`filler` sends a pre-synthesized thinking sound ("Hmm...") as a `reply.audio` with `filler: true`
and `sentence` -1, only while no audio of that turn has gone (so it never plays after the reply's
first audio started: clients play chunks in order). `playout` follows the client's loudspeaker
(voice/playout.py) for a barge-in decided on the server.

Visemes (voice/lipsync.py) ride on the chunks they describe: each chunk's are cut just before it is
sent, so they go, and are dropped by a barge-in, with their audio.

The player's speaker is told when each of the learner's spoken turns ended (`turn_ended`); the
first reply begun after it answers it, and that reply's first piece of audio carries `timings`: the
speech service's time to its first byte and the time since the turn ended (docs/voice.md,
"Per-stage timings").
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel

from schemas.frames import Reply, ReplyAudio, ReplyDelta, ReplyWithdrawn, SpokenTimings
from voice.errors import SpeechServiceError
from voice.lipsync import LipSync, NoVisemes, Voicing
from voice.playout import Playout
from voice.sentences import SentenceSplitter, split_sentences
from voice.tts import TextToSpeech

log = logging.getLogger("samvad.voice")
QUEUE_SENTENCES = 64
CHUNK_BYTES = 16 * 1024  # about 0.35 s at 22 kHz: small enough to start playing at once
# The reply's first piece ends at a clause boundary once it has this many words. Four words are
# about 1.5 s of speech at 150 words a minute: long enough to carry a phrase's own intonation (a
# two-word "Arre bhaiya," spoken alone sounds clipped), and longer than the next piece's synthesis
# takes to start (espeak-ng a few ms, a speech API's first byte 150-300 ms), so the voice does not
# stop between the first clause and the rest of its sentence.
FIRST_CLAUSE_WORDS = 4


@dataclass(frozen=True, slots=True)
class FillerClip:
    """A thinking sound, synthesized ahead (server/voice.py's `FillerBank`)."""

    text: str
    pcm: bytes
    sample_rate: int
    tts: str
    visemes: tuple[tuple[int, int], ...] = ()
    visemes_source: str = ""


@dataclass(frozen=True, slots=True)
class _Sentence:
    gen: int
    turn: int
    index: int
    text: str
    final: bool


class Speaker:
    def __init__(self, tts: TextToSpeech, send: Callable[[ReplyAudio], object], session_id: str,
                 language: Callable[[], str | None], *, by_sentence: bool = True,
                 lipsync: LipSync | None = None) -> None:
        self.tts = tts
        self.lipsync: LipSync = lipsync if lipsync is not None else NoVisemes(tts)
        # False: the seed's design, kept to measure against (benchmarks/voice_turn.py): the whole
        # reply is synthesized once it is known and sent once it is synthesized.
        self.by_sentence = by_sentence
        self._send = send
        self.session_id = session_id
        self._language = language
        self._gen = 0  # raised by every withdrawal and barge-in: queued work of older gens is dropped
        self._turn: int | None = None  # the turn whose deltas are being cut
        self._splitter = SentenceSplitter(FIRST_CLAUSE_WORDS)
        self._index = 0
        self._streaming = False
        self._streamed = ""  # the text streamed for `_turn` so far
        self._stopped_turn: int | None = None
        self._scope: anyio.CancelScope | None = None
        self._failed_gen = -1
        send_stream, receive_stream = anyio.create_memory_object_stream[_Sentence](QUEUE_SENTENCES)
        self._queue: MemoryObjectSendStream[_Sentence] = send_stream
        self._receive: MemoryObjectReceiveStream[_Sentence] = receive_stream
        self.sentences = 0  # statistics
        self._ended: tuple[str, float] | None = None  # the learner's last spoken turn: its id, when it ended
        self._timed: tuple[int, str, float] | None = None  # the reply answering it: turn, and the same
        self.fillers = 0  # statistics
        self.voiced_turn: int | None = None  # the turn of the last reply audio (not a filler) sent
        self._filled_turn: int | None = None
        self.playout = Playout()
        self.clock: Callable[[], float] = time.perf_counter

    # ----------------------------------------------------------------- fed by the connection

    def observe(self, event: BaseModel) -> None:
        if not self.by_sentence:
            if isinstance(event, Reply):
                self._new_reply(event.turn)
                self._enqueue(event.text, final=True)
            return
        if isinstance(event, ReplyDelta):
            if event.turn == self._stopped_turn:
                return
            if event.turn != self._turn or not self._streaming:
                self._new_reply(event.turn)
                self._streaming = True
            self._streamed += event.text
            for sentence in self._splitter.feed(event.text):
                self._enqueue(sentence, final=False)
            if event.end:  # the words are complete: speak the last sentence before the decision is
                rest = self._splitter.flush()
                if rest:
                    self._enqueue(rest, final=False)
        elif isinstance(event, ReplyWithdrawn):
            if event.turn == self._turn:
                self._gen += 1
                self._cut()
                self._new_reply(event.turn)
        elif isinstance(event, Reply):
            if event.turn == self._stopped_turn and event.mark is None:
                self._streaming = False
                return
            if self._streaming and event.turn == self._turn and event.text.startswith(self._streamed):
                # The reply is what streamed, plus perhaps a tail the deltas had not reached yet.
                for sentence in self._splitter.feed(event.text[len(self._streamed):]):
                    self._enqueue(sentence, final=False)
                self._enqueue(self._splitter.flush(), final=True)
            else:
                self._new_reply(event.turn)
                parts = split_sentences(event.text, FIRST_CLAUSE_WORDS) or [""]
                for i, sentence in enumerate(parts):
                    self._enqueue(sentence, final=i == len(parts) - 1)
            self._streaming = False
            self._stopped_turn = None

    def stop(self, turn: int | None = None) -> None:
        """Barge-in: nothing more of the reply to `turn` (or of any reply) is spoken."""
        if turn is not None and self._turn is not None and turn != self._turn:
            return
        self._gen += 1
        self._stopped_turn = self._turn if self._streaming else None
        self._streaming = False
        self.playout.stopped()
        self._cut()

    def turn_ended(self, utterance_id: str | None, at: float = 0.0) -> None:
        """The learner's spoken turn `utterance_id` ended at `at` (perf_counter) and goes to the
        session; the next reply begun answers it. None: it did not go (the session was busy)."""
        self._ended = None if utterance_id is None else (utterance_id, at)

    def filler(self, turn: int, clip: FillerClip, *, visemes: bool = True) -> bool:
        """Send thinking sound `clip` before the reply to `turn`, if none of that reply's audio has
        gone and no other reply is being spoken; once per turn. True if it went."""
        if turn in (self.voiced_turn, self._filled_turn) or self.playout.speaking(self.clock()):
            return False
        self._filled_turn = turn
        self.fillers += 1
        pairs = clip.visemes if visemes else ()
        self._send_chunk(ReplyAudio(session_id=self.session_id, turn=turn, sentence=-1, chunk=0,
                                    sample_rate=clip.sample_rate, data=clip.pcm, last=True, filler=True,
                                    tts=clip.tts, visemes=pairs, visemes_source=clip.visemes_source if pairs else ""))
        return True

    def _send_chunk(self, event: ReplyAudio, chars: int = 0) -> None:
        """Send a chunk, and follow it on the client's loudspeaker."""
        if not event.filler and not event.degraded:
            self.voiced_turn = event.turn
        self.playout.sent(event.turn, event.sentence, chars, len(event.data) / 2 / (event.sample_rate or 1),
                          self.clock(), final=event.final)
        self._send(event)

    def _cut(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def _new_reply(self, turn: int) -> None:
        if self._ended is not None:  # the first reply begun since a spoken turn ended answers it
            self._timed, self._ended = (turn, *self._ended), None
        self._turn = turn
        self._splitter = SentenceSplitter(FIRST_CLAUSE_WORDS)
        self._index = 0
        self._streamed = ""
        self._stopped_turn = None

    def _enqueue(self, text: str, *, final: bool) -> None:
        assert self._turn is not None
        item = _Sentence(self._gen, self._turn, self._index, text, final)
        self._index += 1
        try:
            self._queue.send_nowait(item)
        except anyio.WouldBlock:
            log.warning("speech queue full; sentence dropped", extra={"session_id": self.session_id})
            self._send_chunk(ReplyAudio(session_id=self.session_id, turn=item.turn, sentence=item.index, chunk=0,
                                  sample_rate=self.tts.sample_rate, last=True, final=True, degraded=True,
                                  tts=self.tts.name))
            self._failed_gen = item.gen

    # ----------------------------------------------------------------- the task

    async def run(self) -> None:
        async with self._receive:
            async for item in self._receive:
                if item.gen != self._gen or item.gen == self._failed_gen:
                    continue
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    try:
                        await self._speak(item)
                    except SpeechServiceError as exc:
                        log.warning("speech failed, the reply goes on as text: %s", exc,
                                    extra={"session_id": self.session_id})
                        self._failed_gen = item.gen
                        self._send_chunk(ReplyAudio(
                            session_id=self.session_id, turn=item.turn, sentence=item.index, chunk=0,
                            sample_rate=self.tts.sample_rate, last=True, final=True, degraded=True,
                            tts=self.tts.name))
                    finally:
                        self._scope = None

    async def _speak(self, item: _Sentence) -> None:
        if not item.text:  # nothing left after the streamed sentences: just close the reply
            self._send_chunk(ReplyAudio(session_id=self.session_id, turn=item.turn, sentence=item.index, chunk=0,
                                  sample_rate=self.tts.sample_rate, last=True, final=item.final, tts=self.tts.name))
            return
        voicing = self.lipsync.voicing(item.text, self._language())
        failed: SpeechServiceError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(voicing.prepare)  # an estimate's silent pass runs while the TTS answers
            try:
                await self._stream(item, voicing)
            except SpeechServiceError as exc:  # raised as itself, not in a group, for `run`
                failed = exc
                tg.cancel_scope.cancel()
        if failed is not None:
            raise failed

    async def _stream(self, item: _Sentence, voicing: Voicing) -> None:
        chunk = 0
        asked = time.perf_counter()
        first_byte: float | None = None  # s from asking the voice to its first audio

        async def send(data: bytes, *, last: bool) -> bool:
            """One chunk with its visemes, cut just before it leaves; False once a barge-in came."""
            nonlocal chunk
            visemes = await voicing.cut(len(data) // 2, last=last)
            if item.gen != self._gen:
                return False
            timings = None
            timed = self._timed
            if timed is not None and timed[0] == item.turn and data:  # the reply's first audio
                self._timed = None
                timings = SpokenTimings(in_reply_to=timed[1], tts_first_byte_ms=round((first_byte or 0.0) * 1000, 3),
                                        first_audio_ms=round((time.perf_counter() - timed[2]) * 1000, 3))
            self._send_chunk(ReplyAudio(
                session_id=self.session_id, turn=item.turn, sentence=item.index, chunk=chunk,
                text=item.text if chunk == 0 else "", sample_rate=self.tts.sample_rate, data=data, last=last,
                final=item.final and last, tts=self.tts.name, visemes=visemes,
                visemes_source=voicing.source if visemes else "", timings=timings), len(item.text))
            chunk += 1
            return True

        source = voicing.audio()
        if not self.by_sentence:
            source = _once(b"".join([pcm async for pcm in source]))
        held = b""  # one piece held back, so the sentence's last piece can say `last`
        async for pcm in source:
            if first_byte is None:
                first_byte = time.perf_counter() - asked
            data = held + pcm
            while len(data) > CHUNK_BYTES:
                if not await send(data[:CHUNK_BYTES], last=False):
                    return
                data = data[CHUNK_BYTES:]
            held = data
            if chunk == 0 and held and self.by_sentence:  # the sentence's first audio goes out at once
                if not await send(held, last=False):
                    return
                held = b""
        if item.gen != self._gen:
            return
        self.sentences += 1
        await send(held, last=True)

    def close(self) -> None:
        """No more sentences: `run` ends once it has spoken what is queued."""
        self._queue.close()

    def discard(self) -> None:
        """Let go of the queue's two ends, once `run` has ended (or never started)."""
        self._queue.close()
        self._receive.close()


async def _once(pcm: bytes) -> AsyncIterator[bytes]:
    yield pcm
