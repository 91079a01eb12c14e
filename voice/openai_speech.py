"""OpenAI-compatible speech: `audio.transcriptions` and `audio.speech` through the official SDK.

Any server that speaks those two routes works (`SPEECH_BASE_URL`). The retry policy and the
deadline are the chat's (brain/transport.py): 5xx, 429, timeouts and dropped connections are
retried twice, after 1 s then 2 s (or the server's Retry-After when shorter than the time left),
within `AI_TIMEOUT_MS` for the whole call; any other 4xx fails at once. Speech is retried only
before its first byte went out. SDK exceptions become `SpeechServiceError` here and nowhere else.

Both calls go through the SDK's generic request method (`client.post`, as the chat's do, see
docs/llm.md): the SDK builds the request (its headers, authentication, the multipart form of a
transcription) and raises its own errors for an error status, but the answer is read as bytes:
a transcription's JSON with orjson, without the typed `TranscriptionVerbose` and its segment and
word models, and speech from aiohttp's buffer as it arrives (`brain.transport.body_pieces`),
without the SDK's and httpx2's five async generators per piece. A dropped connection or a
timeout while the body is read becomes the SDK's `APIConnectionError` or `APITimeoutError`, so
that `_translate` stays the one boundary.
"""

from __future__ import annotations

import logging
import math
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import aiohttp
import anyio
import httpx2
import openai
import orjson

import privates
from brain.transport import DEFAULT_BACKOFF, body_pieces, read_body, sdk_client
from voice.audio import wav_bytes
from voice.confidence import whisper_confidence
from voice.errors import SpeechServiceError
from voice.stt import SceneContext, Transcription, WordTime

log = logging.getLogger("samvad.voice")
T = TypeVar("T")
OPENAI_PCM_RATE = 24_000  # `response_format="pcm"`: 24 kHz 16-bit little-endian mono
# Speech is read in pieces no more often than needed to keep the listener fed (`_Pace`): a read may
# wait once the audio passed on is this far ahead of its loudspeaker (0.5 s: a clause's worth of
# margin for a late packet or a busy loop), and waits at most this long (a fifth of a second's audio
# arriving at once, a few reads a second).
PACE_MARGIN_S = 0.5
PACE_REST_S = 0.2
_LANG = {"hi-IN": "hi", "kn-IN": "kn", "ta-IN": "ta", "en-IN": "en", "en": "en", "hi-EN": "hi",
         "ja-JP": "ja", "ar-MA": "ar", "fr-MA": "fr"}


class _Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _translate(exc: openai.OpenAIError) -> SpeechServiceError | _Transient:
    """The one place an SDK exception is mapped to ours."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429 or status >= 500:
            wait = None
            raw = exc.response.headers.get("retry-after")
            try:
                wait = float(raw) if raw is not None else None
            except ValueError:
                wait = None
            return _Transient(f"HTTP {status}", wait if wait is not None and math.isfinite(wait) else None)
        return SpeechServiceError(f"HTTP {status}: {str(exc.message)[:200]}")
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.APIError)):
        return _Transient(type(exc).__name__)
    return SpeechServiceError(f"{type(exc).__name__}: {str(exc)[:200]}")


class OpenAISpeech:
    """Both directions against one OpenAI-compatible server; `stt` and `tts` views share the client."""

    def __init__(self, *, api_key: str, base_url: str | None, stt_model: str, tts_model: str,
                 tts_voice: str, timeout_s: float, backoff: Sequence[float] = DEFAULT_BACKOFF) -> None:
        self.client = sdk_client(api_key=api_key or "none", base_url=base_url, timeout_s=timeout_s)
        base = self.client.base_url  # the endpoints joined as the SDK joins them, once
        self._transcriptions_url = str(base.copy_with(raw_path=base.raw_path + b"audio/transcriptions"))
        self._speech_url = str(base.copy_with(raw_path=base.raw_path + b"audio/speech"))
        self.stt_model = stt_model
        self.tts_model = tts_model
        self.tts_voice = tts_voice
        self.timeout_s = timeout_s
        self.backoff = tuple(backoff)

    async def aclose(self) -> None:
        await self.client.close()

    async def _call(self, what: str, attempt_once: Callable[[], Awaitable[T]], deadline: float) -> T:
        attempt = 0
        while True:
            try:
                try:
                    return await attempt_once()
                except openai.OpenAIError as exc:
                    raise _translate(exc) from exc
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

        form: dict[str, object] = {"model": self.stt_model, "response_format": "verbose_json",
                                    "timestamp_granularities": ["word", "segment"]}
        if lang:
            form["language"] = lang

        async def once() -> Transcription:
            # The SDK's multipart form (`Content-Type: multipart/form-data` is how its own
            # `transcriptions.create` asks for it), the answer left unread for `read_body`.
            response = await self.client.post(
                self._transcriptions_url, cast_to=httpx2.Response, body=form,
                files=[("file", ("speech.wav", wav, "audio/wav"))],
                options={"headers": {"Content-Type": "multipart/form-data"}},
                stream=True, stream_cls=openai.AsyncStream[Any])
            http = cast(httpx2.Response, response)
            try:
                data = await _body_or_sdk_error(http, read_body(http))
            finally:
                with anyio.CancelScope(shield=True):
                    await http.aclose()
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

    async def synthesize(self, text: str, language: str | None) -> AsyncIterator[bytes]:
        speech = self.speech
        deadline = anyio.current_time() + speech.timeout_s
        attempt = 0
        while True:
            sent = False
            try:
                try:
                    with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                        response = cast(httpx2.Response, await speech.client.post(
                            speech._speech_url, cast_to=httpx2.Response, content=orjson.dumps({
                                "model": speech.tts_model, "voice": speech.tts_voice, "input": text,
                                "response_format": "pcm"}),
                            options={"headers": {"Accept": "application/octet-stream",
                                                 "Content-Type": "application/json"}},
                            stream=True, stream_cls=openai.AsyncStream[Any]))
                        try:
                            carry = b""
                            raw = privates.aiohttp_response(response)
                            pieces = body_pieces(response, raw).__aiter__()
                            pace = _Pace(OPENAI_PCM_RATE)
                            while True:  # what has arrived, in one piece
                                chunk = await _body_or_sdk_error(response, _next_piece(pieces))
                                if chunk is None:
                                    break
                                chunk = carry + chunk
                                cut = len(chunk) - len(chunk) % 2
                                carry = chunk[cut:]
                                if cut:
                                    sent = True
                                    yield chunk[:cut]
                                    rest = pace.rest(cut, anyio.current_time())
                                    if rest > 0:
                                        await privates.rest_reading(raw, rest)
                        finally:
                            with anyio.CancelScope(shield=True):
                                await response.aclose()
                    return
                except openai.OpenAIError as exc:
                    raise _translate(exc) from exc
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


async def _next_piece(pieces: AsyncIterator[bytes]) -> bytes | None:
    return await anext(pieces, None)


async def _body_or_sdk_error(response: httpx2.Response, reading: Awaitable[T]) -> T:
    """Read (part of) a body the SDK left open; a transport failure meanwhile is the SDK's error,
    as it would be had the SDK read it."""
    try:
        return await reading
    except (httpx2.TimeoutException, aiohttp.ServerTimeoutError) as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except (httpx2.RequestError, aiohttp.ClientError, ssl.SSLError) as exc:
        raise openai.APIConnectionError(request=response.request) from exc
