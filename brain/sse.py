"""`EventReader`: server-sent events out of the bytes of a streamed HTTP body.

The chat-completions stream is a `text/event-stream`: events separated by a blank line, each a few
`field: value` lines. The brain reads it from the SDK's raw streaming response and needs only the
`data` of each event (and its `event` name, to spot an error event), so this reader does only that,
on bytes, without building an object per line:

* lines end in LF, CRLF or CR, and a line ending may be split across two network reads;
* `data` lines of one event are joined with LF, as the specification says; a single space after
  the colon is dropped;
* comment lines (starting with ':'), `id` and `retry` are ignored, as is an event with no data.

Each complete event comes out as `(event, data)`: the event name (None when the stream names none)
and the data as bytes, which `orjson.loads` takes as they are.
"""

from __future__ import annotations

__all__ = ["EventReader"]


class EventReader:
    """Feed it the body's bytes in order; it returns the events they complete."""

    __slots__ = ("_buffer", "_data", "_event", "_pending_cr")

    def __init__(self) -> None:
        self._buffer = b""  # an incomplete last line
        self._data: list[bytes] = []  # data lines of the event being read
        self._event: str | None = None
        self._pending_cr = False  # the last read ended in CR: an LF that follows belongs to it

    def feed(self, chunk: bytes) -> list[tuple[str | None, bytes]]:
        if self._pending_cr:
            self._pending_cr = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                self._pending_cr = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        text = self._buffer + chunk if self._buffer else chunk
        lines = text.split(b"\n")
        self._buffer = lines.pop()  # what follows the last line ending: not a whole line yet
        events: list[tuple[str | None, bytes]] = []
        for line in lines:
            if not line:  # a blank line dispatches the event
                if self._data:
                    events.append((self._event, b"\n".join(self._data)))
                    self._data = []
                self._event = None
                continue
            name, colon, value = line.partition(b":")
            if colon and value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                self._data.append(value)
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
            # a comment (empty name), `id`, `retry` and unknown fields are ignored
        return events
