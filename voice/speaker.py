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

The reply's first piece is synthesized ahead (`_Ahead`) when its words are complete but the
splitter cannot cut it yet: session/spoken.py's gate releases a clause without its trailing mark
(the mark goes with the next clause, rule 6), and a sentence's stop needs the space that comes with
the next clause. So once the pending text holds `FIRST_CLAUSE_WORDS` words up to a released clause,
or a stop, the voice is asked for it then (a clause with a comma), and the piece, once cut, is
spoken from that audio if its words are those (with any clause mark, `;` and `:` said as the
comma); otherwise the early synthesis is cancelled and the piece is asked as usual. Nothing is
sent before the piece is cut, so nothing is heard that the reply lacks.

Earlier still, a speculative brain call (session/speculation.py) shows the speaker the words it
streams while the learner's turn is not yet taken (`prepare`): the first piece of those words is
synthesized ahead in the same way, and kept, unsent, until the reply's own first piece is cut. It
is spoken only if the reply (the turn taken, its words through the session's gate) has that same
first piece; a speculation cancelled (`forget`), a barge-in or other words drop it unheard. So
when the end-of-turn wait is longer than the brain's first clause (a beginner, a thinking pause)
the first audio does not wait for the voice's first byte after the turn is taken.

The player's speaker is told when each of the learner's spoken turns ended (`turn_ended`); the
first reply begun after it answers it, and that reply's first piece of audio carries `timings`: the
speech service's time to its first byte and the time since the turn ended (docs/voice.md,
"Per-stage timings").
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup
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
# After a sentence's first chunk, each later one is what a read of the voice brought (at least
# CHUNK_BYTES, at most MAX_CHUNK_BYTES), less a short tail held back so that the sentence's last
# chunk, sent once the voice's stream ends, has audio and says `last`. A paced read
# (voice/openai_speech.py) brings most of a second at once, and every chunk is a frame to build
# and write with its visemes cut: cutting a read into 16 KB pieces made three frames of it. The
# tail is all that waits, where up to CHUNK_BYTES waited before.
MAX_CHUNK_BYTES = 64 * 1024
TAIL_BYTES = 2048  # about 40 ms at 24 kHz
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


_STOP = re.compile(r"[.!?\u0964\u2026][\"')\]]*$")  # a sentence's stop, its space not yet come
_CLAUSE_MARKS = ",;:"


@dataclass(eq=False)
class _Ahead:
    """The reply's first piece asked of the voice before the splitter could cut it."""

    gen: int
    turn: int
    words: str  # the piece as far as it is known: a clause without its mark, or a sentence
    clause: bool  # `words` wait for a clause mark (synthesized with a comma)
    voicing: Voicing
    asked: float
    audio: MemoryObjectReceiveStream[bytes]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    first_byte: float | None = None
    failed: SpeechServiceError | None = None
    preview: bool = False  # from a speculative call's words, its turn not yet taken (`Speaker.prepare`)

    def fits(self, item: _Sentence) -> bool:
        if item.gen != self.gen or item.turn != self.turn or item.index != 0:
            return False
        if not self.clause:
            return item.text == self.words
        return item.text[:-1] == self.words and item.text[-1:] in tuple(_CLAUSE_MARKS)

    def drop(self) -> None:
        """Stops the synthesis and lets its audio go (spoken, unwanted or cut off)."""
        self.scope.cancel()
        self.audio.close()


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
        self._ahead: _Ahead | None = None
        self._tg: TaskGroup | None = None  # `run`'s, for the first piece synthesized ahead
        self.ahead = 0  # statistics: first pieces synthesized ahead and spoken from it
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
            elif self._index == 0:
                self._synthesize_ahead()
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

    def prepare(self, turn: int, text: str) -> None:
        """A speculative brain call's words so far (`text`, as the brain streams them) for reply `turn`,
        whose turn is not taken yet: have the voice synthesize their first piece now. Nothing is sent:
        the audio waits for the reply's own first piece, and is spoken only if that is the same words."""
        tg = self._tg
        if not self.by_sentence or tg is None or turn in (self._turn, self._stopped_turn) or self._ahead is not None:
            return  # a reply of that turn has begun, or another piece is being synthesized ahead
        pieces = SentenceSplitter(FIRST_CLAUSE_WORDS).feed(text)
        if not pieces:
            return  # the first piece's words are not complete yet
        piece = pieces[0]
        clause = piece[-1] in _CLAUSE_MARKS
        words = piece[:-1].rstrip() if clause else piece
        if not words:
            return
        self._start_ahead(tg, turn, words, clause, preview=True)

    def forget(self, turn: int) -> None:
        """The speculative call for reply `turn` was cancelled: drop what `prepare` asked for, unheard."""
        ahead = self._ahead
        if ahead is not None and ahead.preview and ahead.turn == turn and self._turn != turn:
            self._drop_ahead()

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
        self._drop_ahead()

    def _synthesize_ahead(self) -> None:
        """Ask the voice for the reply's first piece now, if its words are complete and the
        splitter waits only for its mark or its stop's space (see the module's docstring)."""
        pending = self._splitter.pending.strip()
        tg, turn = self._tg, self._turn
        if tg is None or turn is None or not pending:
            return
        stop = bool(_STOP.search(pending))
        if not stop and (len(pending.split()) < FIRST_CLAUSE_WORDS or not pending[-1].isalnum()):
            return
        ahead = self._ahead
        if ahead is not None:
            if not ahead.preview or ahead.words == pending:
                return  # asked already (or by the speculative call, for these words)
            self._drop_ahead()  # the speculative call's words were not the reply's: ask for the reply's
        self._start_ahead(tg, turn, pending, not stop)

    def _start_ahead(self, tg: TaskGroup, turn: int, words: str, clause: bool, *, preview: bool = False) -> None:
        text = words + "," if clause else words
        send, receive = anyio.create_memory_object_stream[bytes](math.inf)  # one piece's audio
        ahead = _Ahead(self._gen, turn, words, clause, self.lipsync.voicing(text, self._language()),
                       time.perf_counter(), receive, preview=preview)
        self._ahead = ahead
        tg.start_soon(self._fetch_ahead, ahead, send)

    async def _fetch_ahead(self, ahead: _Ahead, send: MemoryObjectSendStream[bytes]) -> None:
        with ahead.scope, send:
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ahead.voicing.prepare)
                    async for pcm in ahead.voicing.audio():
                        if ahead.first_byte is None:
                            ahead.first_byte = time.perf_counter()
                        send.send_nowait(pcm)  # the buffer is unbounded; the read above was the checkpoint
            except SpeechServiceError as exc:  # raised where the piece is spoken, as a voice's own
                ahead.failed = exc
            except anyio.BrokenResourceError:
                pass  # its piece was dropped or cut off

    def _drop_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.drop()

    def _take_ahead(self, item: _Sentence) -> _Ahead | None:
        ahead = self._ahead
        if ahead is None or ahead.turn != item.turn or ahead.gen != item.gen:
            return None
        self._ahead = None
        if ahead.fits(item):
            self.ahead += 1
            return ahead
        ahead.drop()
        return None

    def _new_reply(self, turn: int) -> None:
        ahead = self._ahead
        if ahead is None or not ahead.preview or ahead.turn != turn or ahead.gen != self._gen:
            self._drop_ahead()  # (a speculative call's first piece for this reply is kept, to be checked)
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
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                await self._run()
            finally:
                self._tg = None
                self._drop_ahead()

    async def _run(self) -> None:
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
        ahead = self._take_ahead(item) if item.index == 0 else None
        voicing = ahead.voicing if ahead is not None else self.lipsync.voicing(
            item.text, self._language(), in_hand_s=self.playout.in_hand(item.turn, self.clock()))
        failed: SpeechServiceError | None = None
        try:
            async with anyio.create_task_group() as tg:
                if ahead is None:
                    tg.start_soon(voicing.prepare)  # an estimate's silent pass runs while the TTS answers
                try:
                    await self._stream(item, voicing, ahead)
                except SpeechServiceError as exc:  # raised as itself, not in a group, for `run`
                    failed = exc
                    tg.cancel_scope.cancel()
        finally:
            if ahead is not None:  # spoken, or cut off by a barge-in: the rest is not wanted
                ahead.drop()
        if failed is not None:
            raise failed

    async def _stream(self, item: _Sentence, voicing: Voicing, ahead: _Ahead | None = None) -> None:
        chunk = 0
        asked = time.perf_counter() if ahead is None else ahead.asked
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

        source = voicing.audio() if ahead is None else _drained(ahead)
        if not self.by_sentence:
            source = _once(b"".join([pcm async for pcm in source]))
        held = b""  # a tail held back, so the sentence's last chunk has audio and can say `last`
        async for pcm in source:
            if first_byte is None:
                got = ahead.first_byte if ahead is not None and ahead.first_byte is not None else time.perf_counter()
                first_byte = got - asked
            data = held + pcm
            if len(data) > CHUNK_BYTES + TAIL_BYTES:  # a chunk's worth, and the tail
                body, data = data[:-TAIL_BYTES], data[-TAIL_BYTES:]
                while body:
                    size = MAX_CHUNK_BYTES if chunk else CHUNK_BYTES
                    if not await send(body[:size], last=False):
                        return
                    body = body[size:]
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


async def _drained(ahead: _Ahead) -> AsyncIterator[bytes]:
    """The audio synthesized ahead, as it came and comes; its voice's failure, raised here."""
    async with ahead.audio:
        while True:
            try:  # what has arrived, without anyio's checkpoint per item (a task step each)
                pcm: bytes | None = ahead.audio.receive_nowait()
            except anyio.WouldBlock:
                pcm = await anext(ahead.audio, None)  # the wait for the next piece is the checkpoint
            except anyio.EndOfStream:
                pcm = None
            if pcm is None:
                break
            yield pcm
    if ahead.failed is not None:
        raise ahead.failed
