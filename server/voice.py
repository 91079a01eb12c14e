"""The server's voice (docs/voice.md): the STT and TTS backends the settings pick (`build_voice`,
`Voice`), what the recogniser is told of the moment (`scene_context`), and what a socket asks for
(`wants_speech`, `wants_visemes`). The socket side, one connection's voice, is
server/voice_socket.py.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket

from server.config import Settings, SttChoice, TtsChoice
from voice.align import Aligner
from voice.errors import SpeechServiceError
from voice.fillers import FillerBank
from voice.lipsync import LipSync, lipsync_factory
from voice.stt import SceneContext, SpeechToText
from voice.tts import EspeakTts, TextToSpeech

if TYPE_CHECKING:
    from session.negotiation import Negotiation

log = logging.getLogger("samvad.voice")


@dataclass
class Voice:
    """The speech backends of one server; either may be None (text only in that direction)."""

    stt: SpeechToText | None
    tts: TextToSpeech | None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    by_sentence: bool = True  # TTS_BY_SENTENCE
    lipsync: Callable[[], LipSync] | None = None  # each connection's viseme maker (voice/lipsync.py)
    fillers: FillerBank | None = None  # the thinking sounds, made once per server (voice/fillers.py)
    filler_after_s: float = 0.3  # THINKING_SOUND_AFTER_MS

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
    if tts is not None and settings.THINKING_SOUND_AFTER_MS:
        voice.fillers = FillerBank(tts, voice.lipsync)
        voice.filler_after_s = settings.THINKING_SOUND_AFTER_MS / 1000
    return voice


def _espeak() -> EspeakTts | None:
    """espeak-ng's library: the embedded voice, and the silent pass that times another voice's visemes."""
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


def wants_speech(websocket: WebSocket) -> bool:
    """`?voice=1` on the socket's URL asks for `reply.audio`: text clients (bots, the spectator
    view, a Unity scene with its own TTS) are not sent audio they would only throw away."""
    return websocket.query_params.get("voice", "").lower() in ("1", "true", "yes")


def wants_visemes(websocket: WebSocket) -> bool | None:
    """`?visemes=0` opts a voice connection out of visemes (and their CPU); absent or 1 is in;
    None for any other value, which gets an `invalid` error and leaves them on."""
    return {"": True, "1": True, "true": True, "0": False, "false": False}.get(
        websocket.query_params.get("visemes", "").lower())
