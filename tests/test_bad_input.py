"""Bad input over a real socket: each is refused with its code, changes nothing, and the
connection (or a new one, after a close) still plays a valid turn afterwards."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgpack
import pytest

from tests.servers import Client, Served, client, close_code, create, running_server, state

pytestmark = pytest.mark.anyio
GOOD_LINE = "Namaste bhaiya, tamatar kitne ka hai?"


class Setup:
    def __init__(self, served: Served, created: dict[str, Any], c: Client) -> None:
        self.served = served
        self.created = created
        self.sid: str = created["session_id"]
        self.c = c
        self.before: dict[str, Any] = {}

    async def state(self) -> dict[str, Any]:
        return await state(self.served, self.sid, self.created["player_token"])

    async def unchanged(self) -> None:
        after = await self.state()
        assert after == self.before
        assert after["seq"] == self.before["seq"] and after["turn"] == self.before["turn"]

    def player_url(self) -> str:
        return self.served.ws_url(self.sid, self.created["player_token"])


async def still_plays(c: Client, frame_id: str = "ok-1") -> None:
    """A valid transcript afterwards gets its ack and its reply."""
    got = await c.turn(frame_id, GOOD_LINE)
    assert got[0]["type"] == "reply" and got[0]["in_reply_to"] == frame_id
    assert any(f["type"] == "ack" and f["id"] == frame_id for f in c.seen)


@contextlib.asynccontextmanager
async def playing(subprotocol: str = "samvad.v1.json", **overrides: Any) -> AsyncIterator[Setup]:
    """A server, a session that has played one turn, and its player connection."""
    async with running_server(**overrides) as served:
        created = await create(served)
        url = served.ws_url(created["session_id"], created["player_token"])
        async with client(url, subprotocol=subprotocol) as c:
            assert (await c.recv())["type"] == "welcome"
            await still_plays(c, "warm-up")
            setup = Setup(served, created, c)
            setup.before = await setup.state()
            assert setup.before["seq"] >= 1
            yield setup


async def refused(c: Client, code: str, frame_id: str | None = None) -> dict[str, Any]:
    error = await c.recv()
    assert error["type"] == "error", error
    assert error["code"] == code, error
    assert error["id"] == frame_id
    return error


async def test_malformed_json() -> None:
    async with playing() as s:
        await s.c.ws.send('{"type": "transcript", "id": "j1", "text": ')
        await refused(s.c, "bad_frame")
        await s.unchanged()
        await still_plays(s.c)


async def test_malformed_msgpack() -> None:
    async with playing(subprotocol="samvad.v1.msgpack") as s:
        await s.c.ws.send(b"\xc1\x93\x01")  # 0xc1 is never used by msgpack
        await refused(s.c, "bad_frame")
        await s.c.ws.send(msgpack.packb({"type": "transcript", "id": "m1"})[:-3])  # truncated
        await refused(s.c, "bad_frame")
        await s.unchanged()
        await still_plays(s.c)


async def test_a_frame_that_is_not_an_object() -> None:
    async with playing() as s:
        for raw in ('["transcript", "t1", "hi"]', '"transcript"', "42", "null"):
            await s.c.ws.send(raw)
            await refused(s.c, "bad_frame")
        await s.c.ws.send('{"id": "x1", "text": "no type"}')
        await refused(s.c, "bad_frame", "x1")
        await s.unchanged()
        await still_plays(s.c)


async def test_an_unknown_type() -> None:
    async with playing() as s:
        await s.c.send({"type": "dance", "id": "d1"})
        error = await refused(s.c, "unknown_type", "d1")
        assert "dance" in error["message"]
        await s.unchanged()
        await still_plays(s.c)


async def test_missing_fields() -> None:
    async with playing() as s:
        await s.c.send({"type": "transcript", "id": "m1"})  # no text
        error = await refused(s.c, "invalid", "m1")
        assert "text" in error["message"]
        await s.c.send({"type": "transcript", "text": "hello"})  # no id
        await refused(s.c, "invalid")
        await s.c.send({"type": "resume"})  # no last_seq
        await refused(s.c, "invalid")
        await s.unchanged()
        await still_plays(s.c)


async def test_a_bad_enum_value() -> None:
    async with playing() as s:
        await s.c.send({"type": "transcript", "id": "e1", "text": "hello", "language": "xx"})
        error = await refused(s.c, "invalid", "e1")
        assert "language" in error["message"]
        await s.c.send({"type": "scene", "id": "e2", "target_language": "xx"})
        await refused(s.c, "invalid", "e2")
        await s.c.send({"type": "transcript", "id": "e3", "text": "hello", "colour": "red"})
        await refused(s.c, "invalid", "e3")  # an unknown field
        await s.unchanged()
        await still_plays(s.c)


async def test_a_frame_over_64_kib_is_too_large() -> None:
    async with playing() as s:
        text = "bhaiya " * (70 * 1024 // 7)
        await s.c.send({"type": "transcript", "id": "big", "text": text})
        error = await refused(s.c, "too_large")  # refused before it is decoded: no id
        assert "65536" in error["message"]
        await s.unchanged()
        await still_plays(s.c)


async def test_a_transcript_over_max_transcript_chars_is_too_large() -> None:
    async with playing(MAX_TRANSCRIPT_CHARS=200) as s:
        await s.c.send({"type": "transcript", "id": "long", "text": "a" * 201})
        error = await refused(s.c, "too_large", "long")
        assert "200" in error["message"]
        await s.c.send({"type": "transcript", "id": "fits", "text": "a" * 200})
        assert (await s.c.until("reply", in_reply_to="fits"))["type"] == "reply"


async def test_a_flood_past_the_rate_limit_is_refused() -> None:
    """14 transcripts at once against a burst of 8: at least 5 are refused, each changes nothing.

    No count here depends on how fast this machine sends. At 4 tokens a second, fewer than 5 would
    be refused only if sending the 14 took 0.5 s (8 + 2 refilled = 10 accepted); it takes 0.2-0.3 ms
    here (measured on the 2-core machine with a load average of 1.8), a margin of over 1,000x. Every
    transcript is answered by its reply or its error, whatever order they come in."""
    async with playing(RATE_LIMIT_PER_SECOND=4, RATE_LIMIT_BURST=8, RATE_ABUSE_CLOSE_AFTER=1000) as s:
        await asyncio.sleep(0.4)  # the warm-up spent a token of the burst; let it refill
        s.before = await s.state()
        ids = [f"f{i}" for i in range(14)]
        for frame_id in ids:
            await s.c.send({"type": "transcript", "id": frame_id, "text": GOOD_LINE})
        answered: dict[str, dict[str, Any]] = {}  # id -> the frame that settled it: its reply or its error
        while len(answered) < len(ids):
            frame = await s.c.recv()
            settled = frame.get("in_reply_to") if frame["type"] == "reply" else frame.get("id")
            if frame["type"] in ("reply", "error"):
                assert settled in ids and settled not in answered, frame
                answered[settled] = frame
        limited = [f for f in answered.values() if f["type"] == "error"]
        assert len(limited) >= 5 and {f["code"] for f in limited} == {"rate_limited"}
        replies = [f for f in answered.values() if f["type"] == "reply"]
        # Whatever was refused changed nothing: only the accepted frames made turns.
        after = await s.state()
        assert after["turn"] == s.before["turn"] + len(replies) == s.before["turn"] + 14 - len(limited)
        await asyncio.sleep(0.6)  # two tokens at 4 a second: the next line is not refused, however late the refill ran
        await still_plays(s.c)


async def test_flooding_on_after_rate_limited_errors_closes_with_4429() -> None:
    async with playing(RATE_LIMIT_PER_SECOND=2, RATE_LIMIT_BURST=4, RATE_ABUSE_CLOSE_AFTER=5) as s:
        s.before = await s.state()
        errors = 0
        for i in range(40):  # one at a time, until the fifth rate_limited error
            await s.c.send({"type": "ping", "id": f"p{i}"})
            answer = await s.c.recv()
            if answer["type"] == "error":
                assert answer["code"] == "rate_limited"
                errors += 1
                if errors == 5:
                    break
            else:
                assert answer["type"] == "pong"
        assert errors == 5  # RATE_ABUSE_CLOSE_AFTER errors, as docs/protocol.md says
        await s.c.send({"type": "ping", "id": "last-straw"})  # over the limit after five errors: closed
        assert await close_code(s.c) == 4429
        await s.unchanged()
        async with client(s.player_url()) as again:
            await again.recv()
            await still_plays(again)


async def test_a_spectator_may_not_send_a_transcript() -> None:
    async with playing() as s:
        url = s.served.ws_url(s.sid, s.created["spectator_token"])
        async with client(url) as spectator:
            await spectator.recv()
            await spectator.send({"type": "transcript", "id": "sp1", "text": GOOD_LINE})
            await refused(spectator, "forbidden", "sp1")
            await s.unchanged()
            await still_plays(s.c)
            # the spectator saw the player's valid turn, and no error of the player's
            assert (await spectator.until("reply", in_reply_to="ok-1"))["type"] == "reply"


async def test_a_token_for_another_session_closes_with_4403() -> None:
    async with playing() as s:
        other = await create(s.served)
        url = s.served.ws_url(s.sid, other["player_token"])
        async with client(url) as intruder:
            assert await close_code(intruder) == 4403
            assert intruder.seen == []
        await s.unchanged()
        await still_plays(s.c)
