"""`serve`: uvicorn's `Server`, with its housekeeping tick once a second instead of ten times.

uvicorn's main loop wakes every 100 ms to refresh the `date` header (which changes once a
second) and to see whether a signal asked it to stop. On an idle server those ten wake-ups a
second are most of the process's CPU (docs/performance.md). `CalmServer` ticks once a second,
with the same `on_tick` (so the `date` header is as fresh as uvicorn keeps it), and a stop signal
wakes the loop at once instead of waiting for the next tick.
"""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE

TICK_S = 1.0
_TICKS_PER_SECOND = 10  # uvicorn's `on_tick` counts 100 ms ticks: every tenth refreshes the headers


class CalmServer(uvicorn.Server):
    """A `uvicorn.Server` whose main loop ticks every `TICK_S` and wakes at once on a stop signal."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + _TICKS_PER_SECOND) % 864000
            try:
                await asyncio.wait_for(self._stop.wait(), TICK_S)
            except TimeoutError:
                pass

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)  # a signal handler may not touch the loop directly


def serve(app: Any, **options: Any) -> None:
    """Run `app` as `uvicorn.run(app, **options)` does, on a `CalmServer`."""
    server = CalmServer(uvicorn.Config(app, **options))
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(STARTUP_FAILURE)  # the socket could not be bound, or the lifespan failed
