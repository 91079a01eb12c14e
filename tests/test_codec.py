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


# ---------------------------------------------------------------------------- strict types

# Each row: a frame that is valid but for one field, that field's name, and the ill-typed value.
# Every value is one a lax decoder would coerce ("no" to false, "0.5" to 0.5, 1 to true, ...).
ILL_TYPED: list[tuple[dict[str, Any], str, Any]] = [
    *[({"type": "transcript", "id": "x1", "text": "kitne ka hai?"}, "final", v)
      for v in ("no", "f", "0", "false", 0, 1, 1.0, None)],
    *[({"type": "transcript", "id": "x1", "text": "hi"}, "confidence", v) for v in ("0.5", True, "1")],
    *[({"type": "transcript", "id": "x1", "text": "hi"}, "language", v) for v in (1, True, ["hi-IN"])],
    ({"type": "transcript", "id": "x1"}, "text", 42),
    ({"type": "transcript", "id": "x1"}, "text", None),
    ({"type": "transcript", "text": "hi"}, "id", 7),
    *[({"type": "scene", "id": "s1"}, "happiness_score", v) for v in ("50.0", "50", 50.0, 50.5, True)],
    *[({"type": "scene", "id": "s1"}, field, v)
      for field in ("object_grabbed", "object_in_view") for v in (1, True, ["Tomato"])],
    *[({"type": "scene", "id": "s1"}, field, v)
      for field in ("input_language", "target_language", "negotiation_state") for v in (0, True)],
    *[({"type": "resume", "id": "r1"}, "last_seq", v) for v in ("3", 3.0, True, None)],
    ({"type": "resume", "last_seq": 3}, "id", 3),
    *[({"type": "ping", "id": "p1"}, "t", v) for v in ("1.5", True, [1.5])],
]
# Where msgpack would carry a string, bin (bytes) is refused: a client that packs with
# use_bin_type=False is fine (raw strings), one that sends real bytes has a bug.
AS_BYTES: list[tuple[dict[str, Any], str, bytes]] = [
    ({"type": "transcript", "id": "x1"}, "text", b"kitne ka hai?"),
    ({"type": "transcript", "text": "hi"}, "id", b"x1"),
    ({"type": "transcript", "id": "x1", "text": "hi"}, "language", b"hi-IN"),
    ({"type": "scene", "id": "s1"}, "object_grabbed", b"Tomato"),
    ({"type": "scene", "id": "s1"}, "object_in_view", b"Tomato"),
    ({"type": "scene", "id": "s1"}, "input_language", b"hi-IN"),
    ({"type": "scene", "id": "s1"}, "target_language", b"en-IN"),
    ({"type": "scene", "id": "s1"}, "negotiation_state", b"DEAL"),
    ({"type": "resume", "last_seq": 0}, "id", b"r1"),
    ({"type": "ping"}, "id", b"p1"),
]


def refusal(frame: dict[str, Any], fmt: WireFormat) -> FrameError:
    with pytest.raises(FrameError) as caught:
        decode_frame(msgpack.packb(frame, use_bin_type=True) if fmt is WireFormat.MSGPACK
                     else orjson.dumps(frame).decode(), fmt)
    return caught.value


@pytest.mark.parametrize("fmt", list(WireFormat))
@pytest.mark.parametrize(("base", "field", "value"), ILL_TYPED)
def test_a_value_of_the_wrong_type_is_invalid_and_names_its_field(
        base: dict[str, Any], field: str, value: Any, fmt: WireFormat) -> None:
    error = refusal({**base, field: value}, fmt)
    assert error.code is ErrorCode.INVALID
    assert error.message.startswith(f"{field}:"), error.message
    assert error.frame_id == (base.get("id") if field != "id" else None)


@pytest.mark.parametrize(("base", "field", "value"), AS_BYTES)
def test_msgpack_bytes_where_a_string_belongs_are_invalid(base: dict[str, Any], field: str, value: bytes) -> None:
    error = refusal({**base, field: value}, WireFormat.MSGPACK)
    assert error.code is ErrorCode.INVALID
    assert error.message.startswith(f"{field}:"), error.message
    # The same values as msgpack strings are fine, packed either way (str or legacy raw).
    good = {**base, field: value.decode()}
    for bin_type in (True, False):
        assert decode_frame(msgpack.packb(good, use_bin_type=bin_type), WireFormat.MSGPACK)


@pytest.mark.parametrize("fmt", list(WireFormat))
def test_an_integer_where_a_float_is_documented_is_accepted(fmt: WireFormat) -> None:
    for frame in ({"type": "transcript", "id": "x1", "text": "hi", "confidence": 1},
                  {"type": "transcript", "id": "x1", "text": "hi", "confidence": 0},
                  {"type": "ping", "id": "p1", "t": 1234}):
        raw = encode(frame, fmt)
        decoded = decode_frame(raw, fmt)
        value = decoded.confidence if isinstance(decoded, TranscriptFrame) else getattr(decoded, "t", None)
        assert isinstance(value, float) and value == next(v for k, v in frame.items() if k in ("confidence", "t"))


@pytest.mark.parametrize("fmt", list(WireFormat))
def test_enums_are_read_from_their_string_values(fmt: WireFormat) -> None:
    frame = decode_frame(encode({"type": "scene", "id": "s1", "input_language": "hi-IN",
                                 "target_language": "kn-IN", "negotiation_state": "HAGGLING"}, fmt), fmt)
    assert isinstance(frame, SceneFrame)
    assert (frame.input_language, frame.target_language, frame.negotiation_state) == (
        LanguageCode.HI_IN, LanguageCode.KN_IN, Stage.HAGGLING)


def test_non_finite_floats_are_what_they_were() -> None:
    """Strictness changes types only: JSON has no NaN or Infinity (orjson refuses them), and
    msgpack's non-finite floats are as before: kept in a ping's `t`, out of range as confidence."""
    for raw in ('{"type": "ping", "t": NaN}', '{"type": "ping", "t": Infinity}', '{"type": "ping", "t": 1e400}'):
        with pytest.raises(FrameError) as caught:
            decode_frame(raw, WireFormat.JSON)
        assert caught.value.code is ErrorCode.BAD_FRAME
    pinged = decode_frame(msgpack.packb({"type": "ping", "t": float("inf")}), WireFormat.MSGPACK)
    assert isinstance(pinged, PingFrame) and pinged.t == float("inf")
    for odd in (float("nan"), float("inf"), float("-inf")):
        error = refusal({"type": "transcript", "id": "x1", "text": "hi", "confidence": odd}, WireFormat.MSGPACK)
        assert error.code is ErrorCode.INVALID and error.message.startswith("confidence:")


def _wrong_for(field: str) -> st.SearchStrategy[Any]:
    """Values of every msgpack type but the ones the field is documented to take."""
    ints = st.integers(-(2**63), 2**64 - 1)
    floats = st.floats(allow_nan=False)
    strings, blobs = st.text(max_size=8), st.binary(max_size=8)
    lists = st.lists(st.integers(-100, 100), max_size=2)
    maps = st.dictionaries(st.text(max_size=3), st.integers(-100, 100), max_size=2)
    others = {
        "final": st.one_of(ints, floats, strings, blobs, lists, maps, st.none()),
        "confidence": st.one_of(st.booleans(), strings, blobs, lists, maps),
        "text": st.one_of(st.booleans(), ints, floats, blobs, lists, maps, st.none()),
        "language": st.one_of(st.booleans(), ints, floats, blobs, lists, maps),
        "last_seq": st.one_of(st.booleans(), floats, strings, blobs, lists, maps, st.none()),
        "t": st.one_of(st.booleans(), strings, blobs, lists, maps),
    }
    return others[field]


_bases = {"final": {"type": "transcript", "id": "h1", "text": "hi"},
          "confidence": {"type": "transcript", "id": "h1", "text": "hi"},
          "text": {"type": "transcript", "id": "h1"},
          "language": {"type": "transcript", "id": "h1", "text": "hi"},
          "last_seq": {"type": "resume", "id": "h1"},
          "t": {"type": "ping", "id": "h1"}}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(_bases)).flatmap(lambda f: st.tuples(st.just(f), _wrong_for(f))))
def test_no_value_of_another_msgpack_type_is_coerced(case: tuple[str, Any]) -> None:
    field, value = case
    error = refusal({**_bases[field], field: value}, WireFormat.MSGPACK)
    assert error.code is ErrorCode.INVALID and error.message.startswith(f"{field}:")
    assert error.frame_id == "h1"
