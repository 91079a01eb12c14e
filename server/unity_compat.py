"""The shipped Unity build's HTTP contract (seed 000): `POST /api/test`, one request per utterance.

Request keys: `audioData` (base64 of a PCM16 mono 16 kHz WAV with a 44-byte header, whose sizes
the build may get wrong), `inputLanguage`, `targetLanguage` (`en`, `hi`, `ta`, `kn`, `pa`),
`object_grabbed` (an item name, or `general`), `happiness_score`, `negotiation_state`. Response
keys: `reply`, `replyEnglish`, `audioReply` (base64 of a WAV with a canonical 44-byte header, or
"" when this server cannot speak), `negotiation_state`, `happiness_score` (always present: the
build sets its slider to 0 on a missing key), `suggested_user_response`,
`suggested_user_response_english`.

The turn runs through the same actor and rules as a socket's. The build sends no session
identity, so a session is kept per device, and which device is asking is a credential, not a
claim (docs/security.md):

- With `UNITY_DEVICE_KEYS` (`device:key,...`), each request carries its device's key as
  `Authorization: Bearer` (the headset's configuration, or the proxy in front of it, adds it); the
  key picks the device and so its session. A missing or unknown key: 401. Required in production.
- Without them (development only) a session is kept per `X-Samvad-Client` header, else per
  client address: convenient on a desk, and anyone can play into anyone's session, which the
  start-up warning says.
- The route is on in development and off in production unless `UNITY_TEST_ROUTE=true` (404).

A session that has ended is followed by a new one on the next request. The
state the build sends back (`happiness_score`, `negotiation_state`) is ignored: the server is
authoritative. `pa` (which the original crashed on) is mapped to Hindi, which the vendor speaks,
and the answer says so in `X-Samvad-Language`. Errors are the HTTP API's `{"error": {...}}`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
from typing import Any

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from schemas.enums import LanguageCode
from schemas.frames import SceneFrame, TranscriptFrame
from schemas.scenario import DEFAULT_SCENARIO
from server.services import Services, bearer, error_response
from server.voice import scene_context
from session.actor import SessionBusy, SessionStopped
from session.registry import CapacityError
from voice.audio import decode_clip, duration_ms, wav_bytes
from voice.errors import AudioRejected, SpeechServiceError

log = logging.getLogger("samvad.unity")
CLIENT_HEADER = "x-samvad-client"
TURN_TIMEOUT_S = 60.0
KEPT_CLIENTS = 10_000  # client -> session entries remembered; the oldest go first
LANGUAGES = {"en": LanguageCode.EN_IN, "hi": LanguageCode.HI_IN, "ta": LanguageCode.TA_IN,
             "kn": LanguageCode.KN_IN}
# Punjabi has no vendor lines; its speakers in Jaipur's bazaars get by in Hindi, so Ramesh uses it.
MAPPED = {"pa": LanguageCode.HI_IN}
ENGLISH = {LanguageCode.EN_IN, LanguageCode.EN}


def _language(code: object) -> tuple[LanguageCode, str | None]:
    """The session language for a Unity code, and a note when it had to be mapped."""
    raw = code.strip().lower() if isinstance(code, str) else ""
    if raw in LANGUAGES:
        return LANGUAGES[raw], None
    if raw in MAPPED:
        return MAPPED[raw], f"{raw}->{MAPPED[raw].value}"
    try:
        return LanguageCode(code), None
    except ValueError:
        return LanguageCode.EN_IN, f"{str(code)[:16]}->en-IN"


def _item(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip() or value.strip().lower() == "general":
        return None
    return value.strip()[:64]


async def _speak(services: Services, text: str, language: LanguageCode) -> str:
    tts = services.voice.tts
    if tts is None or not text:
        return ""
    pcm = bytearray()
    try:
        async for piece in tts.synthesize(text, language.value):
            pcm += piece
    except SpeechServiceError as exc:
        log.warning("speech failed; answering with text only: %s", exc)
        return ""
    return base64.b64encode(wav_bytes(bytes(pcm), tts.sample_rate)).decode("ascii")


def _device(services: Services, request: Request) -> str | None:
    """The device whose key the request carries, compared in constant time against every key."""
    presented = (bearer(request) or "").encode()
    found = None
    for device, key in services.settings.UNITY_DEVICE_KEYS.items():
        if hmac.compare_digest(presented, key.encode()):
            found = device
    return found


async def unity_turn(request: Request) -> JSONResponse:
    services: Services = request.app.state.services
    settings = services.settings
    if not settings.unity_route:
        return error_response(404, "not_found", "POST /api/test is off (UNITY_TEST_ROUTE)")
    address = services.client_address(request)
    if settings.UNITY_DEVICE_KEYS:
        device = _device(services, request)
        if device is None:
            return error_response(401, "unauthorized", "send this device's key (UNITY_DEVICE_KEYS) as "
                                  "Authorization: Bearer")
        client = f"device:{device}"
    else:
        client = request.headers.get(CLIENT_HEADER, "").strip()[:64] or f"addr:{address}"
    stt = services.voice.stt
    limit = settings.MAX_AUDIO_CLIP_BYTES * 4 // 3 + 64 * 1024
    body_bytes = b""
    async for piece in request.stream():
        body_bytes += piece
        if len(body_bytes) > limit:
            return error_response(413, "audio_too_large", f"the request is over {limit} bytes")
    try:
        body = orjson.loads(body_bytes)
    except orjson.JSONDecodeError as exc:
        return error_response(422, "invalid", f"not JSON: {exc}")
    if not isinstance(body, dict) or not isinstance(body.get("audioData"), str):
        return error_response(422, "invalid", "audioData: a base64 string is required")
    try:
        clip = base64.b64decode(body["audioData"], validate=True)
    except (binascii.Error, ValueError):
        return error_response(422, "invalid", "audioData: not base64")
    if len(clip) > settings.MAX_AUDIO_CLIP_BYTES:
        return error_response(413, "audio_too_large", f"the clip is {len(clip)} bytes; the limit is "
                              f"{settings.MAX_AUDIO_CLIP_BYTES}")
    if stt is None:
        return error_response(503, "speech_unavailable", "this server has no speech recogniser")
    try:
        pcm = await anyio.to_thread.run_sync(decode_clip, clip)
    except AudioRejected as exc:
        return error_response(422, exc.code, exc.message)
    if duration_ms(pcm) > settings.MAX_UTTERANCE_SECONDS * 1000:
        return error_response(422, "audio_too_long", f"the clip is over {settings.MAX_UTTERANCE_SECONDS:g} s")
    input_language, note_in = _language(body.get("inputLanguage"))
    target_language, note_out = _language(body.get("targetLanguage"))
    actor = await _session_for(services, client, address, input_language, target_language)
    if actor == "rate_limited":
        return error_response(429, "rate_limited", "too many sessions created; slow down")
    if actor is None:
        return error_response(503, "capacity", "no room for another session")
    item = _item(body.get("object_grabbed"))
    negotiation = actor.negotiation
    if not negotiation.is_terminal and (item != negotiation.object_grabbed
                                        or negotiation.target_language != target_language
                                        or negotiation.input_language != input_language):
        actor.submit(None, SceneFrame(type="scene", id=f"u-scene-{_nonce()}", object_grabbed=item,
                                      input_language=input_language, target_language=target_language))
    try:
        heard = await stt.transcribe(pcm, input_language.value,
                                     scene_context(negotiation, input_language.value, item))
        text, confidence = heard.text[: settings.MAX_TRANSCRIPT_CHARS], heard.confidence
    except SpeechServiceError as exc:
        log.warning("speech recognition failed; asking the learner again: %s", exc)
        text, confidence = "", 0.0
    if not text:
        confidence = 0.0  # nothing recognised: the vendor asks to hear it again
    frame = TranscriptFrame(type="transcript", id=f"u-{_nonce()}", text=text, confidence=confidence,
                            language=input_language)
    try:
        reply = await actor.reply_to(frame, within=TURN_TIMEOUT_S)
    except SessionBusy as exc:
        return error_response(429, "rate_limited", str(exc))
    except (SessionStopped, TimeoutError):
        return error_response(503, "unavailable", "the session stopped before answering")
    english_target = reply_language_is_english(target_language)
    answer: dict[str, Any] = {
        "reply": reply.text,
        # The vendor's line in English: itself when he speaks English (see docs/voice.md).
        "replyEnglish": reply.text_english or (reply.text if english_target else ""),
        "audioReply": await _speak(services, reply.text, target_language),
        "negotiation_state": reply.negotiation_state.value,
        "happiness_score": reply.happiness_score,
        "suggested_user_response": reply.suggested_user_response,
        "suggested_user_response_english": reply.suggested_user_response_english
        or (reply.suggested_user_response if english_target else ""),
        "transcript": text,
        "confidence": confidence,
    }
    headers = {"X-Samvad-Session": actor.session_id}
    notes = [n for n in (note_in, note_out) if n]
    if notes:
        headers["X-Samvad-Language"] = ", ".join(notes)
    return JSONResponse(answer, headers=headers)


def reply_language_is_english(language: LanguageCode) -> bool:
    return language in ENGLISH


def _nonce() -> str:
    import uuid

    return uuid.uuid4().hex[:20]


async def _session_for(services: Services, client: str, address: str, input_language: LanguageCode,
                       target_language: LanguageCode) -> Any:
    """The client's live session, or a new one (rate-limited per address like POST /api/sessions);
    None when the server is full, "rate_limited" when the address creates too many."""
    sessions = services.unity_sessions
    known = sessions.get(client)
    if known is not None:
        actor = await services.registry.get(known[0])
        if actor is not None and not actor.negotiation.is_terminal:
            sessions.move_to_end(client)
            return actor
    if not services.allow_create(address, credential=client if client.startswith("device:") else None):
        return "rate_limited"
    generation = known[1] + 1 if known is not None else 0
    digest = hashlib.sha256(client.encode("utf-8")).hexdigest()[:16]
    pack = await services.packs.current(DEFAULT_SCENARIO)  # the version new sessions play (docs/studio.md)
    try:
        actor = services.registry.create(session_id=f"unity-{digest}-{generation}-{_nonce()[:6]}",
                                         input_language=input_language, target_language=target_language,
                                         scenario_version=pack.version if pack is not None else 1)
    except CapacityError as exc:
        log.warning("no session for a Unity client: %s", exc)
        return None
    sessions[client] = (actor.session_id, generation)
    while len(sessions) > KEPT_CLIENTS:
        sessions.popitem(last=False)
    return actor


def unity_routes() -> list[BaseRoute]:
    return [Route("/api/test", unity_turn, methods=["POST"])]
