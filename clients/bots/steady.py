"""Keeping a load generator out of its own measurements.

A generator stamps the moment it sends and the moment the answer arrives, so any time its own
process stands still between the two counts as the server's. Three things make it stand still:

* its cyclic garbage collector. With 1,000 sessions open, `samvad bots` holds enough live objects
  (sockets, checkers, personas) for a gen1 pass to take up to 43 ms and a full pass 141 ms, and
  scenario b's turn latency p99 read 18 ms with the server's own turn time at p99 0.35 ms. The
  bots make almost no cyclic garbage (225 objects after a 60 s run with 13,700 sessions), so
  `collector_paused` turns the collector off for a run and catches up after it. The capacity
  benchmark's generator does the same for each step: with 1,000 streaming learners its passes
  took up to 8 ms (gen0, gen1) and 32 ms (full), and its loop woke late by p99 7.5 ms, against
  2.3-2.6 ms with the collector off;
* the cycle every closed `websockets` connection leaves behind. Its sans-I/O protocol keeps its
  parser, a generator suspended inside one of the protocol's own methods, after the close:
  protocol -> parser -> frame -> protocol, with the reader, the close frames and the rest hanging
  off it (about 3 KB a connection). With the collector paused, 230 sessions a second made the
  bots' RSS grow by 0.6 MiB a second; `release` closes the parser of a closed connection, so
  reference counting frees it at once;
* a loop that is simply busy. `watch_loop_lag` measures how late the generator's event loop wakes, and
  the bots report it next to the latencies (`generator_loop_late_ms`): a p99 there as large as
  the latency p99 says the generator, not the server, was the limit.

And one thing makes it stamp late: a message is read from the socket by the loop's read callback
but seen by the task that awaits `recv()` only when the loop next runs that task, after whatever
else is ready. `StampedConnection` notes, for each message, when the bytes that completed it were
read (`arrivals`), so that a generator can stamp an answer by its arrival instead of by when its
task got round to it.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.frames import DATA_OPCODES, Frame
from websockets.protocol import State
from websockets.typing import Data


@contextmanager
def collector_paused() -> Iterator[None]:
    """This process's cyclic collector off inside the block, back on (and caught up) after it.

    Whatever was already live is collected first, so the pause starts clean; the cycles that
    die during the block are freed when it ends."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.collect()


async def watch_loop_lag(late_ms: list[float], every: float = 0.05) -> None:
    """Until cancelled, append to `late_ms` how late this process's event loop woke from each
    sleep of `every` seconds, in milliseconds."""
    while True:
        asked = time.perf_counter() + every
        await asyncio.sleep(every)
        late_ms.append(max(0.0, time.perf_counter() - asked) * 1000)


def release(connection: ClientConnection) -> None:
    """Free a closed connection's protocol now instead of at the next collection (see above).

    Closing the parser is what the protocol would do if it ever finished: a closed connection
    reads nothing more. A connection that is not closed yet, or a `websockets` without the
    parser, is left alone."""
    if connection.state is not State.CLOSED:
        return
    parser = getattr(connection.protocol, "parser", None)
    if parser is not None and hasattr(parser, "close"):
        parser.close()


class StampedConnection(ClientConnection):
    """A client connection that notes when each message arrived: the wall-clock time at which the
    loop read the bytes completing it (`websockets.connect(..., create_connection=StampedConnection)`).

    `arrivals` holds one time per message not yet taken, in order; `recv_stamped` takes a message
    and its time together. A message read with plain `recv()` leaves its time behind, so use one
    or the other throughout a connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrivals: deque[float] = deque()
        self._read_at = 0.0

    def data_received(self, data: bytes) -> None:
        self._read_at = time.time()
        super().data_received(data)

    def process_event(self, event: Any) -> None:
        # The last frame of a message (a text or binary frame, or the last continuation) completes it.
        if isinstance(event, Frame) and event.opcode in DATA_OPCODES and event.fin:
            self.arrivals.append(self._read_at)
        super().process_event(event)

    async def recv_stamped(self) -> tuple[Data, float]:
        """The next message, and when its last bytes were read from the socket."""
        message = await self.recv()
        return message, self.arrivals.popleft()
