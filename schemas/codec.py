"""Decode client frames and encode server events, in JSON (text) or msgpack (binary).

Decoding is the one place where untrusted bytes become typed frames. Each failure maps to one
error code, and the frame's `id` is recovered whenever the bytes allowed it, so that the error can
name the frame it refuses.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import msgpack
import orjson
from pydantic import BaseModel, ValidationError

from schemas.errors import ErrorCode
from schemas.frames import CLIENT_FRAME_TYPES, SEQUENCED_TYPES, ReplyAudio, TranscriptFrame

DEFAULT_MAX_FRAME_BYTES = 64 * 1024


def event_dict(event: BaseModel) -> dict[str, Any]:
    """The wire form of a server event, aliases applied; audio stays bytes (base64 in JSON, its serializer)."""
    if isinstance(event, ReplyAudio):
        return event.model_dump(mode="python", by_alias=True)
    return event.model_dump(mode="json", by_alias=True)


class WireFormat(str, Enum):
    JSON = "samvad.v1.json"
    MSGPACK = "samvad.v1.msgpack"


class FrameError(Exception):
    """A client frame that cannot be accepted; carries the code and the frame id if known."""

    def __init__(self, code: ErrorCode, message: str, frame_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.frame_id = frame_id


def _frame_id(obj: dict[Any, Any]) -> str | None:
    value = obj.get("id")
    if isinstance(value, str) and 0 < len(value) <= 64:
        return value
    return None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "frame"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def decode_frame(
    raw: str | bytes,
    fmt: WireFormat,
    *,
    max_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_transcript_chars: int | None = None,
    max_audio_bytes: int | None = None,
) -> BaseModel:
    """Turn one WebSocket message into a validated client frame, or raise `FrameError`.

    `audio` frames may be up to `max_audio_bytes` (a recorded clip is bigger than any other
    frame); any other frame over `max_bytes` is refused as before, without its id.
    """
    size = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
    if size > max_bytes and size > (max_audio_bytes or 0):
        raise FrameError(ErrorCode.TOO_LARGE, f"frame is {size} bytes; the limit is {max_bytes}")
    try:
        if fmt is WireFormat.MSGPACK:
            if isinstance(raw, str):
                raise FrameError(ErrorCode.BAD_FRAME, "this connection speaks msgpack in binary frames")
            obj = msgpack.unpackb(raw, raw=False, strict_map_key=True)
        else:
            obj = orjson.loads(raw)
    except FrameError:
        raise
    except (ValueError, msgpack.UnpackException, TypeError) as exc:
        raise FrameError(ErrorCode.BAD_FRAME, f"cannot decode frame: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError(ErrorCode.BAD_FRAME, "a frame must be an object")
    frame_id = _frame_id(obj)
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise FrameError(ErrorCode.BAD_FRAME, "a frame needs a string `type`", frame_id)
    if size > max_bytes and kind != "audio":
        raise FrameError(ErrorCode.TOO_LARGE, f"frame is {size} bytes; the limit is {max_bytes}")
    model = CLIENT_FRAME_TYPES.get(kind)
    if model is None:
        raise FrameError(ErrorCode.UNKNOWN_TYPE, f"unknown frame type {kind[:40]!r}", frame_id)
    try:
        frame = model.model_validate(obj)
    except ValidationError as exc:
        raise FrameError(ErrorCode.INVALID, _describe(exc), frame_id) from None
    if (
        max_transcript_chars is not None
        and isinstance(frame, TranscriptFrame)
        and len(frame.text) > max_transcript_chars
    ):
        raise FrameError(
            ErrorCode.TOO_LARGE,
            f"transcript is {len(frame.text)} characters; the limit is {max_transcript_chars}",
            frame.id,
        )
    return frame


class Envelope:
    """A server event plus its encodings, made at most once per format however many receive it."""

    __slots__ = ("_json", "_msgpack", "event", "seq")

    def __init__(self, event: BaseModel) -> None:
        self.event: BaseModel | None = event
        self.seq: int | None = getattr(event, "seq", None) if _is_sequenced(event) else None
        self._json: str | None = None
        self._msgpack: bytes | None = None

    @classmethod
    def from_json(cls, seq: int | None, encoded: str) -> Envelope:
        """An event known only by its JSON encoding: what the replay buffer keeps (see `kept`)."""
        envelope = cls.__new__(cls)
        envelope.event = None
        envelope.seq = seq
        envelope._json = encoded
        envelope._msgpack = None
        return envelope

    def kept(self) -> tuple[int | None, str]:
        """`(seq, json)`: the event as a plain tuple of a number and a string.

        The replay buffer holds these instead of envelopes. A tuple of atomic values is untracked
        by the garbage collector, while an envelope and its event model (an instance, its
        `__dict__` and its fields-set, plus nested models) are several tracked objects each; with
        hundreds of events per session they were half of what every collection had to scan.
        """
        encoded = self.encode(WireFormat.JSON)
        assert isinstance(encoded, str)
        return self.seq, encoded

    def encode(self, fmt: WireFormat) -> str | bytes:
        if fmt is WireFormat.MSGPACK:
            if self._msgpack is None:
                if self.event is not None:
                    data = event_dict(self.event)
                else:
                    data = orjson.loads(self.encode(WireFormat.JSON))
                self._msgpack = msgpack.packb(data, use_bin_type=True)
            return self._msgpack
        if self._json is None:
            assert self.event is not None
            self._json = self.event.model_dump_json(by_alias=True)
        return self._json


def _is_sequenced(event: BaseModel) -> bool:
    return getattr(event, "type", None) in SEQUENCED_TYPES


def encode_event(event: BaseModel, fmt: WireFormat) -> str | bytes:
    return Envelope(event).encode(fmt)


def decode_event(raw: str | bytes) -> dict[str, Any]:
    """For clients and tests: a server frame as a plain dict, whichever format it came in."""
    if isinstance(raw, bytes):
        obj = msgpack.unpackb(raw, raw=False)
    else:
        obj = orjson.loads(raw)
    if not isinstance(obj, dict):
        raise ValueError("server frames are objects")
    return obj
