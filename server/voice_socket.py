"""One connection's voice on the session socket (docs/voice.md): `audio` frames in, `speech` and
`reply.audio` out. The server's backends are server/voice.py's `Voice`.

A player connection has a `ConnectionVoice`, composed with it (`WsConnection.voice`): the
connection shows it each event it sends, and its `Speaker` (voice/speaker.py) speaks the vendor's
replies piece by piece as they stream. The socket reader hands `audio` frames to `on_audio`; a
finished utterance waits (bounded) for the connection's one transcriber task, which asks the actor
what it needs to know (`SessionActor.hearing`), decodes it, asks the STT backend, hands what it
heard to the actor (a sequenced `speech` event, replayed on resume) and submits the text as a
`transcript` frame with the utterance's id, so that the turn is exactly a typed one: the same ack,
idempotency and clarification.

Issue #34 adds two things here. A spoken turn whose reply has no audio `THINKING_SOUND_AFTER_MS`
after the learner's last word (and not before the turn is taken) gets one of the pack's thinking
sounds (`FillerBank`, voice/fillers.py). And an
open microphone's speech over the vendor is judged on the server (`Microphone`'s `BargedIn`): a
backchannel lets him go on, an interruption stops the speaker and is reported to the actor as the
client's `playback` would be, so the `heard` event and what follows are a client barge-in's.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from schemas.codec import Envelope
from schemas.enums import LanguageCode, Role
from schemas.errors import ErrorCode
from schemas.frames import (
    Ack,
    AudioFrame,
    Heard,
    PlaybackFrame,
    Reply,
    ReplyAudio,
    ReplyDelta,
    ReplySpoken,
    TranscriptFrame,
    Welcome,
)
from schemas.scenario import load_scenario
from server.config import Settings
from server.connection import WsConnection
from server.microphone import MicJob, Microphone
from session.messages import Recognised
from voice.audio import BYTES_PER_SECOND_IN, decode_clip, duration_ms, levels
from voice.errors import AudioRejected, SpeechServiceError
from voice.fillers import sound_at
from voice.fluency import measure, pack_fillers
from voice.open_mic import BargedIn
from voice.speaker import Speaker
from voice.stt import SceneContext, Transcription
from voice.turn_words import words

if TYPE_CHECKING:
    from session.actor import SessionActor

from server.voice import Voice

log = logging.getLogger("samvad.voice")
UTTERANCES_QUEUED = 4  # finished utterances waiting for the transcriber, per connection


@dataclass
class _Utterance:
    id: str
    language: LanguageCode | None
    pcm: bytearray = field(default_factory=bytearray)


@dataclass(frozen=True)
class _Job:
    id: str
    audio: bytes
    clip: str | None  # the clip's format, or None for streamed PCM16
    language: LanguageCode | None
    ended: float  # perf_counter when the learner stopped speaking
    mic: Microphone | None = None  # an open microphone's turn, and its job
    heard: MicJob | None = None


class ConnectionVoice:
    """The voice of one connection, composed with it (`WsConnection.voice`): a player's that speaks
    the vendor's replies (`speaker`, when it asked with `?voice=1`) and transcribes the learner's
    utterances (`on_audio`, then its transcriber task); or a spectator's that asked to listen
    (`?voice=1`: its own speaker, which costs a synthesis of each sentence per listener).

    It reads nothing of the session from its own tasks. The connection shows it each event the
    actor sends (`observe`, which runs in the actor's step, so the vendor's language is read there),
    and the transcriber asks the actor what it needs to know of an utterance (`SessionActor.hearing`).
    A player's speaker is also the session's speech preview (`BrainCalls.preview`): a speculative
    call's first clause is synthesized while the end-of-turn wait runs, and sent only once taken.
    """

    __slots__ = ("_awaiting", "_barge", "_jobs", "_jobs_in", "_replies", "_services", "_sounds", "_tg", "_visemes",
                 "backchannels", "conn", "mic", "speaker", "utterance", "vendor_language", "voice")

    def __init__(self, conn: WsConnection, voice: Voice, *, speak: bool, visemes: bool | None) -> None:
        self.conn = conn
        self.voice = voice
        self.utterance: _Utterance | None = None
        self.mic: Microphone | None = None  # an open microphone (server/microphone.py)
        self.speaker: Speaker | None = None
        self.vendor_language: str | None = None  # as of the last reply the actor sent
        self._visemes = visemes
        if speak and voice.tts is not None:  # a spectator may listen too (the watch page's `voice=1`)
            lipsync = voice.lipsync() if voice.lipsync is not None and visemes is not False else None
            self.speaker = Speaker(voice.tts, self._send_audio, conn.session_id, self._vendor_language,
                                   by_sentence=voice.by_sentence, lipsync=lipsync)
        # The transcriber's queue and task are made with the first utterance: most sessions
        # (typed ones, bots) never send audio, and each connection paid for both (docs/performance.md).
        self._jobs_in: MemoryObjectSendStream[_Job] | None = None
        self._jobs: MemoryObjectReceiveStream[_Job] | None = None
        self._tg: TaskGroup | None = None
        self._services: Any = None
        # Thinking sounds: the pack's in the vendor's language, and the spoken turns waiting for
        # their reply's first audio, by utterance id (the turn once acknowledged as one).
        self._sounds: tuple[str | None, tuple[str, ...]] = (None, ())
        self._awaiting: dict[str, int | None] = {}
        # A barge-in decided on the server: the turns' replies as sent (their text's length), and a
        # cut-off waiting for its reply's `reply` (a streamed reply's audio starts before it).
        self._replies: dict[int, int] = {}
        self._barge: PlaybackFrame | None = None
        self.backchannels = 0  # statistics: learner speech over the vendor that did not stop him

    def start(self, tg: TaskGroup, services: Any) -> None:
        if self.speaker is not None:
            tg.start_soon(self.speaker.run)
        self._tg, self._services = tg, services

    def observe(self, envelope: Envelope) -> None:
        """An event the connection was sent (by the actor, in its step; or an error, by the reader)."""
        event = envelope.event
        if event is None:
            return
        if self.speaker is not None:
            if isinstance(event, (Welcome, Reply, ReplyDelta)) and self.conn.actor is not None:
                self.vendor_language = self.conn.actor.negotiation.target_language.value  # in the actor's step
            if isinstance(event, Welcome):
                self._prepare_sounds()
                if self.conn.actor is not None and self.conn.role == Role.PLAYER.value:
                    self.conn.actor.calls.preview = self.speaker  # a speculative call's first clause, synthesized ahead
            elif isinstance(event, Reply) and event.mark is None:
                self._replied(event)
            elif isinstance(event, Ack) and event.id in self._awaiting and self.conn.actor is not None:
                thinking = self.conn.actor.machine.thinking  # read in the actor's step
                if not event.duplicate and thinking is not None and thinking.client_id == event.id:
                    self._awaiting[event.id] = thinking.turn
                else:
                    self._awaiting.pop(event.id, None)  # not a turn (a clarification, a duplicate)
            self.speaker.observe(event)
            if isinstance(event, Heard) and event.interrupted and self.conn.role != Role.PLAYER.value:
                self.speaker.stop(event.turn)  # a listening spectator stops where the learner cut in
        if self._visemes is None and isinstance(event, Welcome):  # a bad `?visemes=`, said once
            self._visemes = True
            self.conn.error(ErrorCode.INVALID, "visemes: 0 or 1 (they stay on)")

    def _prepare_sounds(self) -> None:
        """Have the pack's thinking sounds in the vendor's language made (once per server), in the
        actor's step (`observe` of the `welcome`)."""
        actor, bank, tg = self.conn.actor, self.voice.fillers, self._tg
        if actor is None or bank is None or tg is None or self.conn.role != Role.PLAYER.value:
            return
        negotiation = actor.negotiation
        sounds = load_scenario(negotiation.scenario_name, negotiation.scenario_version).thinking_sounds
        language = negotiation.target_language
        found = sounds.get(language) or next(iter(sounds.values()), ())
        self._sounds = (self.vendor_language, tuple(found))
        if found:
            tg.start_soon(bank.prepare, self.vendor_language, self._sounds[1])

    async def _think_aloud(self, utterance_id: str, at: float) -> None:
        """At `at` (perf_counter): a thinking sound, if the turn was acknowledged as one and its
        reply has no audio yet (the speaker checks that)."""
        await anyio.sleep(max(0.0, at - time.perf_counter()))
        turn = self._awaiting.pop(utterance_id, None)
        bank, speaker = self.voice.fillers, self.speaker
        if turn is None or bank is None or speaker is None:
            return
        clips = bank.ready(*self._sounds)
        if clips:
            speaker.filler(turn, clips[turn % len(clips)], visemes=self._visemes is not False)

    # ----------------------------------------------------------------- barge-in, decided on the server

    def _vendor_speaking(self) -> bool:
        speaker = self.speaker
        return speaker is not None and speaker.playout.speaking(speaker.clock())

    def _barged(self, event: BargedIn) -> None:
        """The open microphone's verdict on the learner's speech over the vendor. An interruption
        stops him here (nothing more of the reply is synthesized or sent) and is reported as the
        client's `playback` would be: a `heard` event, the characters he had said when the learner
        began. A backchannel lets him go on."""
        speaker = self.speaker
        if speaker is None:
            return
        if not event.interrupt:
            self.backchannels += 1  # until its probe says otherwise (`_probed`)
            return
        self._interrupt(event.utterance_id, event.start_ms)

    def _probed(self, job: _Job, heard: Transcription) -> None:
        """What the recogniser made of a backchannel run over the vendor: words that are not the
        pack's backchannels make it an interruption after all, and a turn."""
        mic, probe = job.mic, job.heard
        said = words(heard.text)
        if mic is None or probe is None or probe.probe_ms is None or mic.words is None or not said:
            return
        if mic.words.only_backchannels(said):
            return
        self.backchannels -= 1
        self._interrupt(job.id, probe.probe_ms)
        mic.promote(probe, heard)

    def _interrupt(self, utterance_id: str, start_ms: float) -> None:
        """The learner's speech from stream position `start_ms` interrupts the vendor: stop him, and
        report what he had said by then."""
        speaker = self.speaker
        if speaker is None:
            return
        turn = speaker.playout.turn
        mic = self.mic
        began = speaker.clock() - (mic.position_ms - start_ms) / 1000 if mic is not None else speaker.clock()
        if not speaker.playout.speaking(began):
            return  # he had finished when the learner began: nothing was cut off
        heard = speaker.playout.heard_chars(turn, began) if turn is not None else None
        speaker.stop()
        if turn is None or heard is None:
            return  # only a thinking sound was playing: nothing of a reply to report
        frame = PlaybackFrame(type="playback", id=f"{utterance_id}.barge"[-64:], turn=turn,
                              heard_chars=heard, interrupted=True)
        self._barge = frame
        if turn in self._replies:
            self._report_barge()

    def _replied(self, reply: Reply) -> None:
        """A turn's `reply` went out (in the actor's step)."""
        self._replies = {reply.turn: len(reply.text)}  # only the latest reply can be cut off
        barge = self._barge
        if barge is not None and barge.turn == reply.turn and self._tg is not None:
            self._tg.start_soon(self._report_barge_soon)

    async def _report_barge_soon(self) -> None:
        self._report_barge()  # out of the actor's step, which sent the reply

    def _report_barge(self) -> None:
        barge, actor = self._barge, self.conn.actor
        self._barge = None
        if barge is None or actor is None:
            return
        length = self._replies.get(barge.turn)
        if length is None:
            return
        frame = barge.model_copy(update={"heard_chars": min(barge.heard_chars, length)})
        if not actor.submit(self.conn, frame):
            log.info("a barge-in was not reported: the session is busy", extra={"session_id": self.conn.session_id})

    def _send_audio(self, event: ReplyAudio) -> None:
        self.conn.write(Envelope(event))
        if event.timings is not None and self.conn.actor is not None:  # the spectators see the figures too
            self.conn.actor.spoken(ReplySpoken(session_id=event.session_id, turn=event.turn, tts=event.tts,
                                               timings=event.timings))

    def _vendor_language(self) -> str | None:
        return self.vendor_language

    def error(self, code: ErrorCode, message: str, frame_id: str | None = None) -> None:
        self.conn.error(code, message, frame_id)

    # ----------------------------------------------------------------- frames from the reader

    def on_playback(self, frame: PlaybackFrame) -> None:
        if self.speaker is not None:
            if frame.interrupted:
                self.speaker.stop(frame.turn)
            elif frame.turn == self.speaker.playout.turn:
                self.speaker.playout.finished()  # heard to the end: he is no longer speaking

    def on_audio(self, frame: AudioFrame, settings: Settings) -> None:
        if self.voice.stt is None:
            self.error(ErrorCode.SPEECH_UNAVAILABLE, "this server has no speech recogniser; send transcript "
                       "frames", frame.id)
            return
        if self.conn.actor is not None:
            self.conn.actor.speaking()  # streamed audio is not a silence (issue #34)
        data = frame.data
        if isinstance(data, str):
            try:
                data = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                self.error(ErrorCode.INVALID, "data: not standard base64", frame.id)
                return
        data = data or b""
        max_pcm = int(settings.MAX_UTTERANCE_SECONDS * BYTES_PER_SECOND_IN)
        try:
            if frame.event == "clip":
                if not data:
                    raise AudioRejected("audio_unsupported", "a clip needs its data")
                if len(data) > settings.MAX_AUDIO_CLIP_BYTES:
                    raise AudioRejected("audio_too_large", f"the clip is {len(data)} bytes; the limit is "
                                        f"{settings.MAX_AUDIO_CLIP_BYTES}")
                if self.speaker is not None:
                    self.speaker.stop()  # the learner spoke over the vendor
                self._queue(frame.id, data, frame.format or "auto", frame.language)
                return
            if frame.event == "open":
                self._open_mic(frame, settings)
                return
            mic = self.mic
            if mic is not None and frame.id == mic.stream_id:
                if frame.event == "chunk":
                    mic.feed(data)
                elif frame.event == "close":
                    mic.close()
                    self.mic = None
                else:
                    raise AudioRejected("audio_not_started", f"{frame.id!r} is an open microphone: send `chunk`s "
                                        "and `close`")
                return
            if frame.event == "close":
                raise AudioRejected("audio_not_started", f"no microphone {frame.id!r} is open; send `open` first")
            if frame.event == "start":
                if frame.format not in (None, "pcm16"):
                    raise AudioRejected("audio_unsupported", "a streamed utterance is pcm16 (mono, 16 kHz); "
                                        "send other formats as one `clip`")
                if self.speaker is not None:
                    self.speaker.stop()  # barge-in: the learner started speaking
                self.utterance = _Utterance(frame.id, frame.language)
                self.utterance.pcm += data
            else:
                utterance = self.utterance
                if utterance is None or utterance.id != frame.id:
                    raise AudioRejected("audio_not_started", f"no utterance {frame.id!r} is open; send "
                                        "`start` first")
                utterance.pcm += data
            utterance = self.utterance
            assert utterance is not None
            if len(utterance.pcm) > max_pcm:
                self.utterance = None
                raise AudioRejected("audio_too_long", f"the utterance is over {settings.MAX_UTTERANCE_SECONDS:g} s; "
                                    "it was dropped")
            if frame.event == "end":
                self.utterance = None
                pcm = bytes(utterance.pcm[: len(utterance.pcm) - len(utterance.pcm) % 2])
                self._queue(utterance.id, pcm, None, utterance.language)
        except AudioRejected as exc:
            self.error(ErrorCode(exc.code), exc.message, frame.id)

    def _open_mic(self, frame: AudioFrame, settings: Settings) -> None:
        if frame.format not in (None, "pcm16"):
            raise AudioRejected("audio_unsupported", "an open microphone streams pcm16 (mono, 16 kHz)")
        if self.mic is not None:
            self.mic.close()
        actor, tg = self.conn.actor, self._tg
        if actor is None or tg is None:
            return
        def queue(job: MicJob, language: LanguageCode | None) -> None:
            self._queue(job.id, job.pcm, None, language, mic=mic, heard=job)

        mic = self.mic = Microphone(frame.id, frame.language, max_turn_ms=settings.MAX_UTTERANCE_SECONDS * 1000,
                                    queue=queue, speaking=self._vendor_speaking, barged=self._barged)
        tg.start_soon(self._start_mic, mic, actor)

    async def _start_mic(self, mic: Microphone, actor: SessionActor) -> None:
        hearing = await actor.hearing(mic.stream_id)
        if hearing is None:
            return
        try:
            await mic.start(hearing)
        except Exception as exc:  # the model would not load: say so, and take no more of this stream
            log.warning("open microphone failed to start: %s", exc, extra={"session_id": self.conn.session_id})
            mic.close()
            if self.mic is mic:
                self.mic = None
            self.error(ErrorCode.SPEECH_UNAVAILABLE, "the open microphone could not start; use start/chunk/end",
                       mic.stream_id)

    def _queue(self, frame_id: str, audio: bytes, clip: str | None, language: LanguageCode | None,
               mic: Microphone | None = None, heard: MicJob | None = None) -> None:
        jobs_in = self._jobs_in
        if jobs_in is None:
            if self._tg is None:
                return  # not started (or closing): there is no one to transcribe it
            jobs_in, self._jobs = anyio.create_memory_object_stream[_Job](UTTERANCES_QUEUED)
            self._jobs_in = jobs_in
            self._tg.start_soon(self._transcriber, self._jobs, self._services)
        try:
            jobs_in.send_nowait(_Job(frame_id, audio, clip, language, time.perf_counter(), mic, heard))
        except anyio.WouldBlock:
            if heard is not None and heard.partial:
                return  # a partial is only a preview: the turn's own job is what counts
            self.error(ErrorCode.RATE_LIMITED, "utterances are waiting to be transcribed; send it again "
                       "shortly", frame_id)

    # ----------------------------------------------------------------- the transcriber task

    async def _transcriber(self, jobs: MemoryObjectReceiveStream[_Job], services: Any) -> None:
        settings: Settings = services.settings
        async with jobs:
            async for job in jobs:
                try:
                    await self._transcribe(job, services, settings)
                except AudioRejected as exc:
                    self.error(ErrorCode(exc.code), exc.message, job.id)

    async def _transcribe(self, job: _Job, services: Any, settings: Settings) -> None:
        actor = self.conn.actor
        stt = self.voice.stt
        if actor is None or stt is None:
            return
        hearing = await actor.hearing(job.id)  # what the session knows of the moment, asked of its actor
        if hearing is None:
            return  # the session stopped
        language = job.language or hearing.language
        partial = job.heard is not None and job.heard.partial
        if hearing.duplicate:
            if partial:
                return
            # A re-sent utterance: the actor acknowledges it as a duplicate, without a second STT call.
            actor.submit(self.conn, TranscriptFrame(type="transcript", id=job.id, text=""))
            return
        pcm = job.audio
        if job.clip is not None:
            clip = job.clip
            pcm = await anyio.to_thread.run_sync(lambda: decode_clip(job.audio, None if clip == "auto" else clip))
            if duration_ms(pcm) > settings.MAX_UTTERANCE_SECONDS * 1000:
                raise AudioRejected("audio_too_long", f"the clip is over {settings.MAX_UTTERANCE_SECONDS:g} s")
        fallback = False
        ready = job.mic.ready(job.heard) if job.mic is not None and job.heard is not None and not partial else None
        try:
            code = language.value if language else None
            heard = ready or await stt.transcribe(pcm, code, SceneContext(hearing.scenario, code, hearing.item,
                                                                          hearing.quote, paused=partial))
        except SpeechServiceError as exc:
            log.warning("speech recognition failed; asking the learner again: %s", exc,
                        extra={"session_id": self.conn.session_id})
            heard, fallback = Transcription("", 0.0, stt.name), True
        text = heard.text[: settings.MAX_TRANSCRIPT_CHARS]
        confidence = heard.confidence if text else 0.0  # nothing recognised: the vendor asks again
        if job.heard is not None and job.heard.probe_ms is not None:
            self._probed(job, heard)  # a backchannel's check: nothing goes into the session's sequence
            return
        if partial:
            assert job.mic is not None and job.heard is not None
            job.mic.partial_heard(job.heard, heard)
            actor.recognised(Recognised(job.id, text, confidence, language, duration_ms(pcm), (), heard.backend,
                                        fallback, partial=True))
            return
        # What was heard goes into the session's own sequence (a `speech` event, replayed on resume),
        # just before the turn its transcript makes, with the stages so far: the silence that ended
        # an open microphone's turn, and the time from the utterance's end to its transcript.
        stt_ms = round((time.perf_counter() - job.ended) * 1000, 3)
        end_of_turn_ms = None if job.heard is None or job.heard.end_of_turn_ms is None else round(
            job.heard.end_of_turn_ms, 3)
        fluency = measure(heard.words, pack_fillers(hearing.scenario, hearing.scenario_version)) if text else None
        actor.recognised(Recognised(job.id, text, confidence, language, duration_ms(pcm), tuple(levels(pcm)),
                                    heard.backend, fallback, end_of_turn_ms=end_of_turn_ms, stt_ms=stt_ms,
                                    fluency=fluency))
        frame = TranscriptFrame(type="transcript", id=job.id, text=text, confidence=confidence, language=language)
        expect = self.speaker is not None and self.voice.fillers is not None and self._tg is not None
        if expect:
            self._awaiting[job.id] = None  # its `ack` (in the actor's step) says whether it is a turn
        if self.speaker is not None:
            self.speaker.turn_ended(job.id, job.ended)  # before the turn: an instant brain answers within `submit`
        if not actor.submit(self.conn, frame):
            self._awaiting.pop(job.id, None)
            if self.speaker is not None:
                self.speaker.turn_ended(None)
            self.error(ErrorCode.RATE_LIMITED, "the session is busy; retry shortly", job.id)
        elif expect and self._tg is not None:
            due = sound_at(job.ended, end_of_turn_ms, self.voice.filler_after_s)
            self._tg.start_soon(self._think_aloud, job.id, due)

    def release(self) -> None:
        # Called after the connection's task group has ended: both ends of each stream are let go,
        # including those of a task that never started.
        if self.mic is not None:
            self.mic.closed = True
            self.mic = None
        speaker, self.speaker = self.speaker, None  # its callbacks hold this voice: no cycle left behind
        if speaker is not None:
            actor = self.conn.actor
            if actor is not None and actor.calls.preview is speaker:
                actor.calls.preview = None
            speaker.discard()
        self._tg = self._services = None
        if self._jobs_in is not None:
            self._jobs_in.close()
        if self._jobs is not None:
            self._jobs.close()
