"""The wire edge over a real socket, in both subprotocols: ill-typed values are refused by name
and change nothing; frames too big, or text that is not UTF-8, get the documented answer."""

from __future__ import annotations

import asyncio
import socket
from typing import Any
from urllib.parse import urlsplit

import msgpack
import orjson
import pytest
from websockets.client import ClientProtocol
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from tests.servers import client, close_code
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


# ---------------------------------------------------------------------------- size and encoding


def write_whole_frame_then_read(url: str, subprotocol: str, payload: bytes, *, text: bool) -> int | None:
    """A plain blocking client that writes its whole message before reading anything, as simple
    clients do. Returns the close code it reads, or None when the connection was reset before a
    close frame could be read (what a client reports as 1006)."""
    protocol = ClientProtocol(parse_uri(url), subprotocols=[Subprotocol(subprotocol)], max_size=None)
    where = urlsplit(url)
    assert where.hostname is not None and where.port is not None
    with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
        protocol.send_request(protocol.connect())
        sock.sendall(b"".join(protocol.data_to_send()))
        while protocol.handshake_exc is None and not protocol.events_received():
            protocol.receive_data(sock.recv(65536))  # the response (and then the welcome)
        assert protocol.handshake_exc is None
        if text:
            protocol.send_text(payload)
        else:
            protocol.send_binary(payload)
        try:
            sock.sendall(b"".join(protocol.data_to_send()))
            while protocol.close_rcvd is None:
                data = sock.recv(65536)
                if not data:
                    break
                protocol.receive_data(data)
        except ConnectionError:  # reset, or a broken pipe while still writing
            return None
    return protocol.close_rcvd.code if protocol.close_rcvd is not None else None


def oversized(subprotocol: str, size: int) -> tuple[bytes, bool]:
    frame = {"type": "transcript", "id": "huge", "text": "a" * size}
    if subprotocol == "samvad.v1.json":
        return orjson.dumps(frame), True
    return msgpack.packb(frame, use_bin_type=True), False


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_a_frame_within_the_transport_limit_is_too_large_and_the_socket_stays(subprotocol: str) -> None:
    async with playing(subprotocol=subprotocol) as s:
        for size in (70 * 1024, 16 * 64 * 1024 - 100):  # just over MAX_FRAME_BYTES; just under 16x
            payload, _ = oversized(subprotocol, size)
            await s.c.ws.send(payload.decode() if subprotocol == "samvad.v1.json" else payload)
            error = await refused(s.c, "too_large")
            assert "65536" in error["message"]
        await s.unchanged()
        await still_plays(s.c)


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
@pytest.mark.parametrize("times", [1.1, 10])
async def test_a_frame_over_the_transport_limit_closes_with_1009(subprotocol: str, times: float) -> None:
    """Over 16 x MAX_FRAME_BYTES the frame is not read: the socket closes with 1009, and the
    close frame reaches a client that is still writing the rest of its frame (it once got a
    reset, seen as 1006). A new connection then plays on, nothing changed."""
    async with playing(subprotocol=subprotocol) as s:
        payload, text = oversized(subprotocol, int(16 * 64 * 1024 * times))
        code = await asyncio.to_thread(write_whole_frame_then_read, s.player_url(), subprotocol,
                                       payload, text=text)
        assert code == 1009
        assert await close_code(s.c) == 4409  # the blocking client had superseded it
        await s.unchanged()
        async with client(s.player_url(), subprotocol=subprotocol) as again:
            assert (await again.recv())["type"] == "welcome"
            await still_plays(again)


async def test_a_text_frame_that_is_not_utf8_closes_with_1007() -> None:
    async with playing() as s:
        code = await asyncio.to_thread(write_whole_frame_then_read, s.player_url(), "samvad.v1.json",
                                       b'{"type": "ping", "id": "\xff"}', text=True)
        assert code == 1007
        await s.unchanged()
        async with client(s.player_url()) as again:
            assert (await again.recv())["type"] == "welcome"
            await still_plays(again)
