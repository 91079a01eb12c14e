"""OpenAI-compatible speech: `audio.transcriptions` and `audio.speech`, over aiohttp.

Any server that speaks those two routes works (`SPEECH_BASE_URL`). The retry policy and the
deadline are the chat's (brain/transport.py): 5xx, 429, timeouts and dropped connections are
retried twice, after 1 s then 2 s (or the server's Retry-After when shorter than the time left),
within `AI_TIMEOUT_MS` for the whole call; any other 4xx fails at once. Speech is retried only
before its first byte went out. A transport failure or an error status becomes ours in one place,
`OpenAISpeech._post` (and a failed read of a body, where it is read).

The two routes are plain HTTP: a multipart form or a small JSON body out, JSON or raw PCM back.
They are asked over one aiohttp session per server (its pool keeps the connections alive), not
through the SDK's generic request as the chat is: building a request in the SDK (its options
model, headers and URL joining, then httpx2 over the same aiohttp) cost 1.25 ms of CPU per call
against 0.4 ms for the whole exchange over aiohttp alone, and a spoken turn makes three, two of
them on the way to the first audio (docs/performance.md). What the SDK did for them is written
out here: the bearer key, the form's fields (`timestamp_granularities[]` as the SDK names a
list), and the error's `message` from the body. A transcription's `verbose_json` is read with
orjson; speech is read from aiohttp's buffer as it arrives, paced (`_Pace`).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import anyio
import orjson

import privates
from brain.transport import DEFAULT_BACKOFF, retry_after
from voice.audio import wav_bytes
from voice.confidence import whisper_confidence
from voice.errors import SpeechServiceError
from voice.stt import SceneContext, Transcription, WordTime

log = logging.getLogger("samvad.voice")
T = TypeVar("T")
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's, when neither base URL is set
OPENAI_PCM_RATE = 24_000  # `response_format="pcm"`: 24 kHz 16-bit little-endian mono
# Speech is read in pieces no more often than needed to keep the listener fed (`_Pace`): a read may
# wait once the audio passed on is this far ahead of its loudspeaker (0.5 s: a clause's worth of
# margin for a late packet or a busy loop), and waits at most this long (half a second: a service
# at 4x real time sends 2 s of audio meanwhile, taken in one read, where rests of 0.2 s took three;
# each read is a wake-up, and a `reply.audio` frame or two, voice/speaker.py).
PACE_MARGIN_S = 0.5
PACE_REST_S = 0.5
_LANG = {"hi-IN": "hi", "kn-IN": "kn", "ta-IN": "ta", "en-IN": "en", "en": "en", "hi-EN": "hi",
         "ja-JP": "ja", "ar-MA": "ar", "fr-MA": "fr"}
# What a dropped connection, a refused one, a TLS failure or aiohttp's own timeout raise.
_TRANSPORT_ERRORS = (aiohttp.ClientError, ssl.SSLError, OSError)


class _Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _status_error(status: int, headers: Mapping[str, str], body: bytes) -> SpeechServiceError | _Transient:
    """An error status as ours: 429 and 5xx are worth another try, any other is final."""
    if status == 429 or status >= 500:
        return _Transient(f"HTTP {status}", retry_after(headers))
    return SpeechServiceError(f"HTTP {status}: {_message(body)[:200]}")


def _message(body: bytes) -> str:
    """The error's `message` (OpenAI's `{"error": {"message": ...}}`), else the body as text."""
    try:
        error = orjson.loads(body).get("error")
    except (ValueError, AttributeError):
        error = None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else body.decode("utf-8", "replace")


class OpenAISpeech:
    """Both directions against one OpenAI-compatible server; `stt` and `tts` views share the session."""

    def __init__(self, *, api_key: str, base_url: str | None, stt_model: str, tts_model: str,
                 tts_voice: str, timeout_s: float, backoff: Sequence[float] = DEFAULT_BACKOFF) -> None:
        root = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._transcriptions_url = root + "/audio/transcriptions"
        self._speech_url = root + "/audio/speech"
        self._headers = {"Authorization": f"Bearer {api_key or 'none'}"}
        self._session: aiohttp.ClientSession | None = None
        self.stt_model = stt_model
        self.tts_model = tts_model
        self.tts_voice = tts_voice
        self.timeout_s = timeout_s
        self.backoff = tuple(backoff)

    def _http(self) -> aiohttp.ClientSession:
        """The session, made on first use (aiohttp wants a running loop); the calls' own deadline
        (`anyio.fail_after`) bounds them, not aiohttp's default five minutes."""
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._headers, timeout=aiohttp.ClientTimeout(total=None))
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def _post(self, url: str, **request: Any) -> aiohttp.ClientResponse:
        """POST; the response once its status is a success (the caller reads and releases it)."""
        try:
            response = await self._http().post(url, **request)
        except _TRANSPORT_ERRORS as exc:
            raise _Transient(type(exc).__name__) from exc
        if response.status < 400:
            return response
        try:
            body = await response.read()
        except _TRANSPORT_ERRORS:
            body = b""
        finally:
            response.release()
        raise _status_error(response.status, response.headers, body)

    async def _call(self, what: str, attempt_once: Callable[[], Awaitable[T]], deadline: float) -> T:
        attempt = 0
        while True:
            try:
                return await attempt_once()
            except _Transient as exc:
                remaining = deadline - anyio.current_time()
                wait = exc.retry_after if exc.retry_after is not None else (
                    self.backoff[attempt] if attempt < len(self.backoff) else None)
                if attempt >= len(self.backoff) or wait is None or wait >= remaining:
                    raise SpeechServiceError(f"{what} failed: {exc} (after {attempt} retries)") from exc
                log.warning("%s failed, retrying in %.2f s: %s", what, wait, exc)
                await anyio.sleep(wait)
                attempt += 1

    async def transcribe(self, pcm: bytes, language: str | None) -> Transcription:
        wav = wav_bytes(pcm, 16_000)
        lang = _LANG.get(language or "")

        async def once() -> Transcription:
            form = aiohttp.FormData()  # a new one per attempt: aiohttp writes a form once
            form.add_field("model", self.stt_model)
            form.add_field("response_format", "verbose_json")
            for granularity in ("word", "segment"):
                form.add_field("timestamp_granularities[]", granularity)
            if lang:
                form.add_field("language", lang)
            form.add_field("file", wav, filename="speech.wav", content_type="audio/wav")
            response = await self._post(self._transcriptions_url, data=form)
            try:
                data = await response.read()
            except _TRANSPORT_ERRORS as exc:
                raise _Transient(type(exc).__name__) from exc
            finally:
                response.release()
            try:
                return parse_transcription(orjson.loads(data))
            except (ValueError, TypeError, KeyError) as exc:  # orjson's JSONDecodeError is a ValueError
                raise _Transient(f"malformed transcription: {str(exc)[:120]}") from exc

        try:
            with anyio.fail_after(self.timeout_s):
                return await self._call("transcription", once, anyio.current_time() + self.timeout_s)
        except TimeoutError as exc:
            raise SpeechServiceError("transcription timed out") from exc


class OpenAIStt:
    name = "openai"

    def __init__(self, speech: OpenAISpeech) -> None:
        self.speech = speech

    async def transcribe(self, pcm: bytes, language: str | None,
                         scene: SceneContext | None = None) -> Transcription:
        return await self.speech.transcribe(pcm, language)  # a general recogniser: the scene is not used


class OpenAITts:
    """`audio.speech` with `response_format="pcm"`, read as it streams in."""

    name = "openai"
    sample_rate = OPENAI_PCM_RATE

    def __init__(self, speech: OpenAISpeech) -> None:
        self.speech = speech

    async def synthesize(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> AsyncIterator[bytes]:
        speech = self.speech
        asked = anyio.current_time()
        deadline = asked + speech.timeout_s
        body = orjson.dumps({"model": speech.tts_model, "voice": speech.tts_voice, "input": text,
                             "response_format": "pcm"})
        headers = {"Accept": "application/octet-stream", "Content-Type": "application/json"}
        attempt = 0
        while True:
            sent = False
            try:
                try:
                    with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                        response = await speech._post(speech._speech_url, data=body, headers=headers)
                        try:
                            carry = b""
                            # What the listener holds of the reply's earlier pieces plays while this one
                            # streams: counted from the ask, it is audio already ahead of the loudspeaker.
                            pace = (_Pace(OPENAI_PCM_RATE, first=asked, seconds=in_hand_s) if in_hand_s > 0
                                    else _Pace(OPENAI_PCM_RATE))
                            while True:  # what has arrived, in one piece
                                try:
                                    chunk = await response.content.readany()
                                except _TRANSPORT_ERRORS as exc:
                                    raise _Transient(type(exc).__name__) from exc
                                if not chunk:
                                    break
                                chunk = carry + chunk
                                cut = len(chunk) - len(chunk) % 2
                                carry = chunk[cut:]
                                if cut:
                                    sent = True
                                    yield chunk[:cut]
                                    rest = pace.rest(cut, anyio.current_time())
                                    if rest > 0:
                                        await privates.rest_reading(response, rest)
                        finally:
                            response.release()  # its connection back to the pool, or closed if cut off
                    return
                except TimeoutError as exc:
                    raise SpeechServiceError("speech timed out") from exc
            except _Transient as exc:
                remaining = deadline - anyio.current_time()
                wait = exc.retry_after if exc.retry_after is not None else (
                    speech.backoff[attempt] if attempt < len(speech.backoff) else None)
                if sent or attempt >= len(speech.backoff) or wait is None or wait >= remaining:
                    raise SpeechServiceError(f"speech failed: {exc} (after {attempt} retries)") from exc
                log.warning("speech failed, retrying in %.2f s: %s", wait, exc)
                await anyio.sleep(wait)
                attempt += 1


@dataclass(slots=True)
class _Pace:
    """How long the speech's socket may rest between reads (`OpenAITts.synthesize`).

    A speech service streams faster than real time, in small pieces (the fake: 0.1 s of audio
    every 25 ms), and every read of a piece costs the server a wake-up,
    aiohttp's parser, and the generators up to the speaker. The listener needs only to be kept
    ahead of its loudspeaker: once the audio passed on is more than `PACE_MARGIN_S` ahead of the
    time since its first piece went (the earliest the loudspeaker could have started), the next
    read waits, up to `PACE_REST_S`, and takes what arrived meanwhile in one piece. The first
    pieces are read as they come, so the first audio is not later.

    A later piece of a reply starts with the earlier pieces' audio still to play (`in_hand_s` of
    `OpenAITts.synthesize`, from voice/speaker.py's `Playout`): its pace then counts from the ask
    (`first`) with that audio already passed on (`seconds`), so its reads rest from the first one
    while the listener is more than the margin ahead; with nothing in hand, as before. The first
    read itself never waits: a piece's first audio goes out as it comes, so the reply's last
    sentence is heard to begin while the model may still be writing the rest of its decision.
    """

    rate: int
    first: float | None = None
    seconds: float = 0.0  # of audio passed on

    def rest(self, passed: int, now: float) -> float:
        """Seconds the next read may wait, `passed` bytes (PCM16) having just been passed on at `now`."""
        if self.first is None:
            self.first = now
        self.seconds += passed / (2 * self.rate)
        ahead = self.seconds - (now - self.first)
        return min(PACE_REST_S, ahead - PACE_MARGIN_S)


def parse_transcription(result: Any) -> Transcription:
    """A `verbose_json` transcription (Whisper's `text`, `segments` and `words`) as ours."""
    if not isinstance(result, dict):
        raise ValueError("not a JSON object")
    segments = result.get("segments") or ()
    # Whisper's own numbers, mapped as voice/confidence.py says (not measurable here).
    confidence = whisper_confidence([(float(s["avg_logprob"]), float(s["no_speech_prob"]),
                                      float(s.get("compression_ratio") or 0.0)) for s in segments])
    timed = tuple(WordTime(w["word"], round(w["start"] * 1000), round(w["end"] * 1000))
                  for w in result.get("words") or ())
    return Transcription(str(result["text"]).strip(), confidence, "openai", timed)


