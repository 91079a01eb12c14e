"""Voice on the session socket (docs/voice.md): `audio` frames in, `speech` and `reply.audio` out.

`build_voice` picks the STT and TTS backends the settings ask for. A player connection has a
`ConnectionVoice`, composed with it (`WsConnection.voice`): the connection shows it each event it
sends, and its `Speaker` (voice/speaker.py) speaks the vendor's replies sentence by sentence as
they stream. The socket reader hands `audio` frames to `on_audio`; a finished utterance waits
(bounded) for the connection's one transcriber task, which asks the actor what it needs to know
(`SessionActor.hearing`), decodes it, asks the STT backend, hands what it heard to the actor (a
sequenced `speech` event, replayed on resume) and submits the text as a `transcript` frame with
the utterance's id, so that the turn is exactly a typed one: the same ack, idempotency and
clarification.
"""

from __future__ import annotations

import base64
import binascii
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.websockets import WebSocket

from schemas.codec import Envelope
from schemas.enums import LanguageCode, Role
from schemas.errors import ErrorCode
from schemas.frames import AudioFrame, Heard, PlaybackFrame, Reply, ReplyAudio, ReplyDelta, TranscriptFrame, Welcome
from server.config import Settings, SttChoice, TtsChoice
from server.connection import WsConnection
from server.microphone import MicJob, Microphone
from session.messages import Recognised
from voice.align import Aligner
from voice.audio import BYTES_PER_SECOND_IN, decode_clip, duration_ms, levels
from voice.errors import AudioRejected, SpeechServiceError
from voice.lipsync import LipSync, lipsync_factory
from voice.speaker import Speaker
from voice.stt import SceneContext, SpeechToText, Transcription
from voice.tts import EspeakTts, TextToSpeech

if TYPE_CHECKING:
    from session.actor import SessionActor
    from session.negotiation import Negotiation

log = logging.getLogger("samvad.voice")
UTTERANCES_QUEUED = 4  # finished utterances waiting for the transcriber, per connection


@dataclass
class Voice:
    """The speech backends of one server; either may be None (text only in that direction)."""

    stt: SpeechToText | None
    tts: TextToSpeech | None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    by_sentence: bool = True  # TTS_BY_SENTENCE
    lipsync: Callable[[], LipSync] | None = None  # each connection's viseme maker (voice/lipsync.py)

    def health(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"stt": self.stt.name if self.stt else None,
                                  "tts": self.tts.name if self.tts else None,
                                  "audio_in": self.stt is not None, "audio_out": self.tts is not None}
        if self.stt is None:
            answer["note"] = "no speech recogniser: send transcript frames (audio frames get speech_unavailable)"
        return answer

    async def aclose(self) -> None:
        for closer in self.closers:
            await closer()


def build_voice(settings: Settings) -> Voice:
    stt: SpeechToText | None = None
    tts: TextToSpeech | None = None
    voice = Voice(None, None)
    stt_kind, tts_kind = settings.stt_kind, settings.tts_kind
    if SttChoice.OPENAI in (stt_kind,) or TtsChoice.OPENAI in (tts_kind,):
        from voice.openai_speech import OpenAISpeech, OpenAIStt, OpenAITts

        speech = OpenAISpeech(api_key=settings.speech_key,
                              base_url=settings.SPEECH_BASE_URL or settings.OPENAI_BASE_URL or None,
                              stt_model=settings.STT_MODEL, tts_model=settings.TTS_MODEL,
                              tts_voice=settings.TTS_VOICE, timeout_s=settings.AI_TIMEOUT_MS / 1000)
        voice.closers.append(speech.aclose)
        if stt_kind is SttChoice.OPENAI:
            stt = OpenAIStt(speech)
        if tts_kind is TtsChoice.OPENAI:
            tts = OpenAITts(speech)
    if stt_kind is SttChoice.POCKETSPHINX and settings.STT_SCENE:
        from schemas.scenario import available_scenarios
        from voice.scene_stt import SceneStt
        # The pronunciations come from the espeak-ng program (its --ipa output), not the library
        # that speaks (`espeak_available` names the library): without it, only the dictionary's words.
        scene = SceneStt(shutil.which("espeak-ng"), settings.STT_CACHE_DIR)
        scene.prepare(available_scenarios())  # every pack's models now, not on a learner's first word
        stt = scene
    elif stt_kind is SttChoice.POCKETSPHINX:
        from voice.stt import PocketsphinxStt

        stt = PocketsphinxStt()
    elif stt_kind is SttChoice.VOSK:
        from voice.vosk_stt import VoskStt

        stt = VoskStt(settings.VOSK_MODEL_DIR)  # fails loudly without the package or the model
    espeak = _espeak()
    if tts_kind is TtsChoice.ESPEAK:
        if espeak is None:
            raise RuntimeError("TTS=espeak but espeak-ng is not installed (apt-get install espeak-ng)")
        tts = espeak
    voice.stt, voice.tts = stt, tts
    if tts is not None:
        voice.lipsync = lipsync_factory(tts, espeak, _aligner(settings, tts))
    voice.by_sentence = settings.TTS_BY_SENTENCE
    return voice


def _espeak() -> EspeakTts | None:
    """espeak-ng's library: the embedded voice, and the silent pass that times another voice's visemes."""
    from voice.errors import SpeechServiceError
    from voice.espeak_lib import shared_espeak
    from voice.tts import EspeakTts, espeak_available

    if espeak_available() is None:
        return None
    try:
        return EspeakTts(shared_espeak())
    except SpeechServiceError as exc:
        log.warning("espeak-ng's library did not start: %s", exc)
        return None


def _aligner(settings: Settings, tts: TextToSpeech) -> Aligner | None:
    """pocketsphinx's aligner, when asked for (VISEME_ALIGN) and of use: a TTS without timings whose
    replies come whole (TTS_BY_SENTENCE=false)."""
    from voice.stt import pocketsphinx_available

    if not settings.VISEME_ALIGN or settings.TTS_BY_SENTENCE or isinstance(tts, EspeakTts):
        return None
    if not pocketsphinx_available():
        raise RuntimeError("VISEME_ALIGN=true needs pocketsphinx (pip install pocketsphinx)")
    from voice.align import Aligner

    return Aligner()


def scene_context(negotiation: Negotiation, language: str | None, item: str | None = None) -> SceneContext:
    """What the recogniser is told of the moment (issue #41): the pack, the learner's language,
    the item in hand (`item` when the caller knows it sooner than the session) and the standing
    quote. The one place that reads the session for speech."""
    return SceneContext(negotiation.scenario_name, language, item or negotiation.object_grabbed or negotiation.item,
                        negotiation.quote)


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


def wants_speech(websocket: WebSocket) -> bool:
    """`?voice=1` on the socket's URL asks for `reply.audio`: text clients (bots, the spectator
    view, a Unity scene with its own TTS) are not sent audio they would only throw away."""
    return websocket.query_params.get("voice", "").lower() in ("1", "true", "yes")


def wants_visemes(websocket: WebSocket) -> bool | None:
    """`?visemes=0` opts a voice connection out of visemes (and their CPU); absent or 1 is in;
    None for any other value, which gets an `invalid` error and leaves them on."""
    return {"": True, "1": True, "true": True, "0": False, "false": False}.get(
        websocket.query_params.get("visemes", "").lower())


class ConnectionVoice:
    """The voice of one connection, composed with it (`WsConnection.voice`): a player's that speaks
    the vendor's replies (`speaker`, when it asked with `?voice=1`) and transcribes the learner's
    utterances (`on_audio`, then its transcriber task); or a spectator's that asked to listen
    (`?voice=1`: its own speaker, which costs a synthesis of each sentence per listener).

    It reads nothing of the session from its own tasks. The connection shows it each event the
    actor sends (`observe`, which runs in the actor's step, so the vendor's language is read there),
    and the transcriber asks the actor what it needs to know of an utterance (`SessionActor.hearing`).
    """

    __slots__ = ("_jobs", "_jobs_in", "_services", "_tg", "_visemes", "conn", "mic", "speaker", "utterance",
                 "vendor_language", "voice")

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
            self.speaker.observe(event)
            if isinstance(event, Heard) and event.interrupted and self.conn.role != Role.PLAYER.value:
                self.speaker.stop(event.turn)  # a listening spectator stops where the learner cut in
        if self._visemes is None and isinstance(event, Welcome):  # a bad `?visemes=`, said once
            self._visemes = True
            self.conn.error(ErrorCode.INVALID, "visemes: 0 or 1 (they stay on)")

    def _send_audio(self, event: ReplyAudio) -> None:
        self.conn.write(Envelope(event))

    def _vendor_language(self) -> str | None:
        return self.vendor_language

    def error(self, code: ErrorCode, message: str, frame_id: str | None = None) -> None:
        self.conn.error(code, message, frame_id)

    # ----------------------------------------------------------------- frames from the reader

    def on_playback(self, frame: PlaybackFrame) -> None:
        if frame.interrupted and self.speaker is not None:
            self.speaker.stop(frame.turn)

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
                                    queue=queue)
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
        if partial:
            assert job.mic is not None and job.heard is not None
            job.mic.partial_heard(job.heard, heard)
            actor.recognised(Recognised(job.id, text, confidence, language, duration_ms(pcm), (), heard.backend,
                                        fallback, partial=True))
            return
        # What was heard goes into the session's own sequence (a `speech` event, replayed on resume),
        # just before the turn its transcript makes.
        actor.recognised(Recognised(job.id, text, confidence, language, duration_ms(pcm), tuple(levels(pcm)),
                                    heard.backend, fallback))
        frame = TranscriptFrame(type="transcript", id=job.id, text=text, confidence=confidence, language=language)
        if not actor.submit(self.conn, frame):
            self.error(ErrorCode.RATE_LIMITED, "the session is busy; retry shortly", job.id)

    def release(self) -> None:
        # Called after the connection's task group has ended: both ends of each stream are let go,
        # including those of a task that never started.
        if self.mic is not None:
            self.mic.closed = True
            self.mic = None
        speaker, self.speaker = self.speaker, None  # its callbacks hold this voice: no cycle left behind
        if speaker is not None:
            speaker.discard()
        self._tg = self._services = None
        if self._jobs_in is not None:
            self._jobs_in.close()
        if self._jobs is not None:
            self._jobs.close()
