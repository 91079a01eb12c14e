"""`privates.read_buffered` (privates/aio.py) against aiohttp's own `readany`, on real `StreamReader`s
fed as aiohttp's HTTP parser feeds them: a chunked body, a chunk per piece, partly read first."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp.base_protocol import BaseProtocol
from hypothesis import given, settings
from hypothesis import strategies as st

from privates import read_buffered, readable


class Protocol(BaseProtocol):
    """What a `StreamReader` asks of its connection: whether it is up, and its flow control."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.resumed = 0

    @property
    def connected(self) -> bool:
        return True

    def pause_reading(self) -> None:
        self._reading_paused = True

    def resume_reading(self, resume_parser: bool = True) -> None:
        self.resumed += 1
        self._reading_paused = False


def fed(loop: asyncio.AbstractEventLoop, chunks: list[bytes], limit: int) -> tuple[aiohttp.StreamReader, Protocol]:
    protocol = Protocol(loop)
    reader = aiohttp.StreamReader(protocol, limit, loop=loop)
    reader.begin_http_chunk_receiving()
    for chunk in chunks:
        reader.feed_data(chunk)
        reader.end_http_chunk_receiving()
    return reader, protocol


@settings(max_examples=150, deadline=None)
@given(rounds=st.lists(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=40), min_size=1, max_size=4),
       first=st.integers(0, 30), limit=st.sampled_from([16, 64, 2**16]))
def test_read_buffered_gives_what_readany_gives_and_keeps_the_reader_as_readany_does(
        rounds: list[list[bytes]], first: int, limit: int) -> None:
    async def play() -> None:
        loop = asyncio.get_running_loop()
        ours, our_protocol = fed(loop, [], limit)
        theirs, their_protocol = fed(loop, [], limit)
        assert readable(ours)
        for number, chunks in enumerate(rounds):
            for reader in (ours, theirs):
                for chunk in chunks:
                    reader.feed_data(chunk)
                    reader.end_http_chunk_receiving()
            if number == 0 and 0 < first < sum(map(len, chunks)):  # a sized read leaves part of a piece
                assert ours.read_nowait(first) == theirs.read_nowait(first)
            assert await read_buffered(ours) == await theirs.readany()
            for name in ("_size", "_cursor", "_buffer_offset", "_http_chunk_splits", "total_bytes"):
                assert getattr(ours, name) == getattr(theirs, name), name
            assert not ours._buffer and not theirs._buffer
            assert our_protocol._reading_paused == their_protocol._reading_paused
        for reader in (ours, theirs):
            reader.feed_eof()
        assert await read_buffered(ours) == await theirs.readany() == b""

    asyncio.run(play())


def test_read_buffered_waits_for_data_and_raises_the_readers_error() -> None:
    async def play() -> None:
        loop = asyncio.get_running_loop()
        reader, _ = fed(loop, [], 2**16)
        loop.call_later(0.01, lambda: (reader.feed_data(b"data: 1\n\n"), reader.end_http_chunk_receiving()))
        assert await read_buffered(reader) == b"data: 1\n\n"
        reader.set_exception(aiohttp.ClientPayloadError("cut"))
        with pytest.raises(aiohttp.ClientPayloadError):
            await read_buffered(reader)

    asyncio.run(play())


def test_a_reader_without_what_read_buffered_reads_is_not_readable() -> None:
    assert not readable(object())
