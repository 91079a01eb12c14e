"""aiohttp's body reader, read without its bookkeeping per HTTP chunk (brain/transport.py).

A model streams one HTTP chunk per token, and aiohttp's `StreamReader` keeps each as a piece of
its buffer: `readany` then takes the pieces one by one (`_read_nowait_chunk`: its size, cursor,
chunk offsets and flow control, per piece), a dozen of them after a rest of the socket
(`ReadingRest`), about a twentieth of a streamed turn's CPU on the loop (issue #33).
`read_buffered` waits as `readany` does and takes the whole buffer in one join, with the same
bookkeeping done once.

What this reaches into, for `WRITTEN_FOR`'s aiohttp: `StreamReader._buffer`, `_buffer_offset`,
`_size`, `_cursor`, `_http_chunk_splits`, `_low_water`, `_low_water_chunks`, `_protocol`,
`_timer`, `_exception`, `_eof` and `_wait`. Gone: `readable` says False and the caller reads
with `readany`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_buffered", "readable"]

_READ = ("_buffer", "_buffer_offset", "_size", "_cursor", "_http_chunk_splits", "_low_water",
         "_low_water_chunks", "_protocol", "_timer", "_exception", "_eof")


def readable(content: Any) -> bool:
    """Whether `read_buffered` can read this reader: it keeps what `readany` keeps, as it did."""
    return all(hasattr(content, name) for name in _READ) and callable(getattr(content, "_wait", None))


async def read_buffered(content: Any) -> bytes:
    """`content.readany()`: whatever the reader holds, once it holds something; b"" at the end."""
    if content._exception is not None:
        raise content._exception
    buffer = content._buffer
    while not buffer and not content._eof:
        await content._wait("readany")
    content._timer.assert_timeout()
    if not buffer:
        return b""
    if content._buffer_offset:  # a read of a given size took part of the first piece
        buffer[0] = buffer[0][content._buffer_offset:]
        content._buffer_offset = 0
    data = buffer[0] if len(buffer) == 1 else b"".join(buffer)
    buffer.clear()
    content._size -= len(data)
    content._cursor += len(data)
    splits = content._http_chunk_splits
    while splits and splits[0] < content._cursor:  # offsets of chunk ends already read
        splits.popleft()
    if content._size < content._low_water and (splits is None or len(splits) < content._low_water_chunks):
        content._protocol.resume_reading()
    return data
