"""Run the real application under uvicorn, in-process, on a free loopback port."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn
from starlette.applications import Starlette

from privates import protocol_class

STARTUP_SECONDS = 10.0


@asynccontextmanager
async def serve(app: Starlette) -> AsyncIterator[str]:
    """Yield `127.0.0.1:PORT` while uvicorn serves `app`; shut it down afterwards."""
    # The WebSocket protocol `samvad serve` uses, so the end-to-end tests exercise it.
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False,
                            lifespan="on", ws_ping_interval=None, timeout_graceful_shutdown=2,
                            ws=protocol_class("auto"))
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(STARTUP_SECONDS):
            while not server.started:  # noqa: ASYNC110 (uvicorn sets a flag, not an event)
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"127.0.0.1:{port}"
        finally:
            server.should_exit = True


def collect_stopped_servers() -> None:
    """Garbage-collect what a stopped server left, so any resource warning surfaces here."""
    gc.collect()
