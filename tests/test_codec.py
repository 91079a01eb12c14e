"""The codec: every valid frame survives both formats; every invalid one gets its error code."""

from __future__ import annotations

from typing import Any

import msgpack
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.codec import Envelope, FrameError, WireFormat, decode_event, decode_frame
from schemas.enums import LanguageCode, Mood, Stage
from schemas.errors import ErrorCode
from schemas.frames import PingFrame, Reply, ResumeFrame, SceneFrame, StageChanged, TranscriptFrame

ids = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=64)
transcripts = st.builds(
    TranscriptFrame, type=st.just("transcript"), id=ids, text=st.text(max_size=300), final=st.booleans(),
    confidence=st.one_of(st.none(), st.floats(0, 1)),
    language=st.one_of(st.none(), st.sampled_from(list(LanguageCode))),
)
scenes = st.builds(SceneFrame, type=st.just("scene"), id=ids, object_grabbed=st.one_of(st.none(), st.text(max_size=64)))
resumes = st.builds(ResumeFrame, type=st.just("resume"), last_seq=st.integers(0, 2**40), id=st.one_of(st.none(), ids))
finite = st.floats(allow_nan=False, allow_infinity=False)
pings = st.builds(PingFrame, type=st.just("ping"), t=st.one_of(st.none(), finite))
frames = st.one_of(transcripts, scenes, resumes, pings)


def encode(obj: dict[str, Any], fmt: WireFormat) -> str | bytes:
    return msgpack.packb(obj) if fmt is WireFormat.MSGPACK else orjson.dumps(obj).decode()


@given(frames, st.sampled_from(list(WireFormat)))
def test_valid_frames_round_trip(frame: Any, fmt: WireFormat) -> None:
    raw = encode(frame.model_dump(mode="json", exclude_none=True), fmt)
    assert decode_frame(raw, fmt, max_bytes=1 << 20) == frame


@pytest.mark.parametrize(("raw", "fmt", "code"), [
    ("{not json", WireFormat.JSON, ErrorCode.BAD_FRAME),
    ("[1, 2]", WireFormat.JSON, ErrorCode.BAD_FRAME),
    ('"text"', WireFormat.JSON, ErrorCode.BAD_FRAME),
    ('{"id": "a"}', WireFormat.JSON, ErrorCode.BAD_FRAME),
    ('{"type": 3}', WireFormat.JSON, ErrorCode.BAD_FRAME),
    (b"\xc1\xc1", WireFormat.MSGPACK, ErrorCode.BAD_FRAME),
    ('{"type": "ping"}', WireFormat.MSGPACK, ErrorCode.BAD_FRAME),  # text on a msgpack socket
    ('{"type": "dance", "id": "d1"}', WireFormat.JSON, ErrorCode.UNKNOWN_TYPE),
    ('{"type": "transcript", "id": "t1"}', WireFormat.JSON, ErrorCode.INVALID),
    ('{"type": "transcript", "text": "hi"}', WireFormat.JSON, ErrorCode.INVALID),
    ('{"type": "transcript", "id": "t1", "text": "hi", "language": "xx"}', WireFormat.JSON, ErrorCode.INVALID),
    ('{"type": "transcript", "id": "t1", "text": "hi", "colour": "red"}', WireFormat.JSON, ErrorCode.INVALID),
    ('{"type": "resume", "last_seq": -1}', WireFormat.JSON, ErrorCode.INVALID),
    ('{"type": "scene", "id": "' + "x" * 65 + '"}', WireFormat.JSON, ErrorCode.INVALID),
])
def test_invalid_frames_get_their_code(raw: str | bytes, fmt: WireFormat, code: ErrorCode) -> None:
    with pytest.raises(FrameError) as caught:
        decode_frame(raw, fmt)
    assert caught.value.code is code


def test_the_offending_id_is_named_when_it_can_be_read() -> None:
    with pytest.raises(FrameError) as caught:
        decode_frame('{"type": "transcript", "id": "t9", "language": "xx"}', WireFormat.JSON)
    assert caught.value.frame_id == "t9"


def test_size_and_length_limits() -> None:
    big = orjson.dumps({"type": "transcript", "id": "t1", "text": "a" * 70_000}).decode()
    with pytest.raises(FrameError) as caught:
        decode_frame(big, WireFormat.JSON, max_bytes=64 * 1024)
    assert caught.value.code is ErrorCode.TOO_LARGE
    long = orjson.dumps({"type": "transcript", "id": "t2", "text": "a" * 1001}).decode()
    with pytest.raises(FrameError) as caught:
        decode_frame(long, WireFormat.JSON, max_transcript_chars=1000)
    assert caught.value.code is ErrorCode.TOO_LARGE and caught.value.frame_id == "t2"


@given(st.binary(max_size=200), st.sampled_from(list(WireFormat)))
def test_garbage_never_escapes_as_anything_but_a_frame_error(raw: bytes, fmt: WireFormat) -> None:
    try:
        decode_frame(raw, fmt)
    except FrameError as exc:
        assert exc.code in set(ErrorCode)


def test_events_encode_once_per_format_and_decode_back() -> None:
    reply = Reply(session_id="s", seq=3, turn=1, text="Namaste!", happiness_score=55,
                  negotiation_state=Stage.GREETING, vendor_mood=Mood.NEUTRAL, counter_price=None,
                  suggested_user_response="", is_terminal=False)
    envelope = Envelope(reply)
    assert envelope.seq == 3
    as_json = envelope.encode(WireFormat.JSON)
    assert envelope.encode(WireFormat.JSON) is as_json
    assert decode_event(as_json) == decode_event(envelope.encode(WireFormat.MSGPACK))
    stage = StageChanged.model_validate({"session_id": "s", "seq": 4, "turn": 1, "from": "GREETING", "to": "INQUIRY"})
    assert decode_event(Envelope(stage).encode(WireFormat.JSON))["from"] == "GREETING"


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=80), st.integers(min_value=0, max_value=100), st.integers(min_value=1, max_value=10**6))
def test_an_event_kept_as_json_encodes_exactly_like_the_event(text: str, happiness: int, seq: int) -> None:
    reply = Reply(session_id="s", seq=seq, turn=1, text=text or "x", happiness_score=happiness,
                  negotiation_state=Stage.INQUIRY, vendor_mood=Mood.NEUTRAL, counter_price=None,
                  suggested_user_response="", is_terminal=False)
    live = Envelope(reply)
    kept_seq, kept_json = live.kept()
    assert kept_seq == seq
    again = Envelope.from_json(kept_seq, kept_json)
    assert again.seq == seq and again.event is None
    for fmt in (WireFormat.JSON, WireFormat.MSGPACK):
        assert again.encode(fmt) == Envelope(reply).encode(fmt)
