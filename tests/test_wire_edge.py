"""The wire edge over a real socket, in both subprotocols: ill-typed values are refused by name
and change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_bad_input import GOOD_LINE, playing, refused, still_plays

pytestmark = pytest.mark.anyio
SUBPROTOCOLS = ["samvad.v1.json", "samvad.v1.msgpack"]

# From issue #11, and one of each kind besides: every value here a lax decoder would coerce.
HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"type": "transcript", "id": "x1", "text": "kitne ka hai?", "final": "no"}, "final"),
    ({"type": "transcript", "id": "x2", "text": "kitne ka hai?", "final": "f"}, "final"),
    ({"type": "transcript", "id": "x3", "text": "kitne ka hai?", "final": "0"}, "final"),
    ({"type": "transcript", "id": "x4", "text": GOOD_LINE, "final": 1}, "final"),
    ({"type": "transcript", "id": "x5", "text": GOOD_LINE, "confidence": "0.5"}, "confidence"),
    ({"type": "transcript", "id": "x6", "text": 42}, "text"),
    ({"type": "transcript", "id": "x7", "text": GOOD_LINE, "language": 1}, "language"),
    ({"type": "scene", "id": "x8", "happiness_score": "50.0"}, "happiness_score"),
    ({"type": "scene", "id": "x9", "happiness_score": 50.0}, "happiness_score"),
    ({"type": "scene", "id": "x10", "object_grabbed": 7}, "object_grabbed"),
    ({"type": "scene", "id": "x11", "negotiation_state": True}, "negotiation_state"),
    ({"type": "resume", "id": "x12", "last_seq": "0"}, "last_seq"),
    ({"type": "ping", "id": "x13", "t": "1.5"}, "t"),
]
# msgpack bin where a string belongs: the id cannot be read back from bytes, so it is not named.
AS_BYTES: list[tuple[dict[str, Any], str, str | None]] = [
    ({"type": "transcript", "id": "b1", "text": GOOD_LINE.encode()}, "text", "b1"),
    ({"type": "transcript", "id": b"b2", "text": GOOD_LINE}, "id", None),
    ({"type": "scene", "id": "b3", "object_grabbed": b"Tomato"}, "object_grabbed", "b3"),
    ({"type": "scene", "id": "b4", "input_language": b"hi-IN"}, "input_language", "b4"),
]


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_ill_typed_values_are_invalid_by_name_and_change_nothing(subprotocol: str) -> None:
    async with playing(subprotocol=subprotocol) as s:
        for frame, field in HOSTILE:
            await s.c.send(frame)
            error = await refused(s.c, "invalid", frame["id"])
            assert error["message"].startswith(f"{field}:"), error
        await s.unchanged()
        assert await s.c.quiet(0.2) == []  # no ack, no reply, for any of them
        await still_plays(s.c)


async def test_msgpack_bytes_where_a_string_belongs_are_invalid() -> None:
    async with playing(subprotocol="samvad.v1.msgpack") as s:
        for frame, field, frame_id in AS_BYTES:
            await s.c.send(frame)
            error = await refused(s.c, "invalid", frame_id)
            assert error["message"].startswith(f"{field}:"), error
        await s.unchanged()
        await still_plays(s.c)


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_what_the_docs_allow_still_plays(subprotocol: str) -> None:
    """An integer where a number is documented, and a real `false` (ignored, as documented)."""
    async with playing(subprotocol=subprotocol) as s:
        await s.c.send({"type": "transcript", "id": "p1", "text": GOOD_LINE, "final": False})
        assert await s.c.quiet(0.3) == []
        await s.unchanged()
        await s.c.send({"type": "ping", "id": "p2", "t": 12})
        pong = await s.c.until("pong", id="p2")
        assert pong["t"] == 12
        await s.c.send({"type": "transcript", "id": "p3", "text": GOOD_LINE, "confidence": 1,
                        "language": "hi-IN"})
        assert (await s.c.until("reply", in_reply_to="p3"))["type"] == "reply"
