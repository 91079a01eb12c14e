"""A bare `websockets` echo server: the baseline the load bots compare Samvad with.

    python -m clients.bots.echo --port 8765 [--host 127.0.0.1] [--no-uvloop] [--duration S]

Every message comes back unchanged on the same connection. It does nothing else, so what the
bots measure against it is the cost of Python, asyncio and the WebSocket library on this machine.
It uses uvloop when installed, like uvicorn does by default, so the comparison is like for like.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from dataclasses import replace
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from clients.bots.runner import RunConfig, RunStats, run


async def echo(ws: ServerConnection) -> None:
    with contextlib.suppress(Exception):
        async for message in ws:
            await ws.send(message)


async def serve_echo(host: str, port: int, *, ready: asyncio.Event | None = None,
                     duration: float | None = None) -> None:
    """Serve until cancelled, SIGTERM/SIGINT, or `duration` seconds."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    async with serve(echo, host, port, compression=None, ping_interval=20.0, ping_timeout=20.0,
                     max_queue=64, backlog=4096):
        print(f"echo: listening on ws://{host}:{port}", file=sys.stderr, flush=True)
        if ready is not None:
            ready.set()
        if duration is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), duration)
        else:
            await stop.wait()


async def run_baseline(config: RunConfig, echo_url: str, **kw: Any) -> RunStats:
    """The bots' echo mode: the same N, think time and duration, against the echo server."""
    return await run(replace(config, url=echo_url, echo=True), **kw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clients.bots.echo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--no-uvloop", action="store_true", help="use the default asyncio loop")
    parser.add_argument("--duration", type=float, default=None,
                        help="stop by itself after this many seconds")
    args = parser.parse_args(argv)
    coro = serve_echo(args.host, args.port, duration=args.duration)
    if not args.no_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            uvloop.run(coro)
            return 0
    asyncio.run(coro)
    return 0


if __name__ == "__main__":
    sys.exit(main())
