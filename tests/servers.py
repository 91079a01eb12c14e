"""Real servers for end-to-end tests: uvicorn in this process, or `samvad serve` as a process.

`running_server(brain=..., REPLAY_EVENTS=16, ...)` serves `server.app.create_app` with uvicorn on
a free loopback port inside the test's event loop and yields a `Served` with its URLs and the
app's services. `server_process(...)` starts `python -m server.cli serve` as a separate process,
waits for `/health` and always stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgpack
import orjson
import uvicorn
from websockets.asyncio.client import ClientConnection, connect

from privates import protocol_class
from server.app import create_app
from server.config import load_settings
from server.services import Services
from session.protocols import Brain

ROOT = Path(__file__).resolve().parent.parent
SECRET = "test-secret-" + "x" * 40
TEST_SETTINGS: dict[str, Any] = {
    "SAMVAD_SECRET": SECRET,
    "LOG_LEVEL": "WARNING",
    "USE_MOCKS": True,  # the rule-based brain and no mirror, whatever the environment says
    "SESSION_CREATE_PER_SECOND": 1000.0,
    "SESSION_CREATE_BURST": 1000,
    # uploaded playbooks go to a folder of this test process, never to the checkout's var/
    "KNOWLEDGE_DIR": tempfile.mkdtemp(prefix="samvad-knowledge-"),
    # and the scene recogniser's models (issue #41) too
    "STT_CACHE_DIR": tempfile.mkdtemp(prefix="samvad-stt-"),
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    base_url: str
    ws_base: str
    services: Services | None = None
    pid: int | None = None  # the server's process, when it is one (`server_process`)

    def ws_url(self, session_id: str, token: str | None = None) -> str:
        url = f"{self.ws_base}/ws/sessions/{session_id}"
        return f"{url}?token={token}" if token else url


@contextlib.asynccontextmanager
async def running_server(brain: Brain | None = None, **overrides: Any) -> AsyncIterator[Served]:
    """uvicorn serving the real app on 127.0.0.1:<free port>, in this event loop."""
    settings = load_settings(**{**TEST_SETTINGS, **overrides})
    app = create_app(settings, brain=brain)
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto says
    # TCP, and Nagle plus delayed ACKs would add 40 ms to every turn.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", proxy_headers=False,
                            ws_max_size=settings.MAX_FRAME_BYTES * 16, ws_ping_interval=20.0,
                            ws_ping_timeout=20.0, timeout_graceful_shutdown=2,
                            ws=protocol_class(settings.UVICORN_WS))  # as `samvad serve` does
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start within 10 s")
            await asyncio.sleep(0.01)
        yield Served(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", app.state.services)
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(task, 10)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
        finally:
            sock.close()


@contextlib.contextmanager
def server_process(env: dict[str, str] | None = None, *,
                   startup_s: float = 20.0, log_path: Path | None = None) -> Iterator[Served]:
    """`python -m server.cli serve` on a free port as a child process; stopped on exit.

    Its log (stderr) goes to `log_path` when given."""
    port = free_port()
    child_env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMVAD_SECRET": SECRET,
                 "LOG_LEVEL": "WARNING", "USE_MOCKS": "true",
                 "SESSION_CREATE_PER_SECOND": "1000", "SESSION_CREATE_BURST": "1000",
                 "KNOWLEDGE_DIR": tempfile.mkdtemp(prefix="samvad-knowledge-"), **(env or {})}
    # The log goes to a file, never to a pipe nobody reads: a full pipe would block the server.
    log = log_path.open("wb") if log_path is not None else tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", "--port", str(port)], cwd=ROOT,
        env=child_env, stdout=subprocess.DEVNULL, stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if proc.poll() is not None:
                log.flush()
                if log_path is not None:
                    err = log_path.read_text(errors="replace")
                else:
                    log.seek(0)
                    err = log.read().decode(errors="replace")
                raise RuntimeError(f"server exited with {proc.returncode}: {err[-2000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not answer /health within {startup_s} s")
            time.sleep(0.1)
        yield Served(base, f"ws://127.0.0.1:{port}", pid=proc.pid)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stderr is not None:
            proc.stderr.close()
        if log is not None:
            log.close()


# ---------------------------------------------------------------------------- clients


async def create(served: Served, *, credential: str | None = None, **body: Any) -> dict[str, Any]:
    """POST /api/sessions. A named learner is vouched for as a trusted backend does: with the admin
    key as a bearer (when the server has one), unless another `credential` is given."""
    key = served.services.settings.ADMIN_KEY if served.services is not None else ""
    credential = credential or (key if body.get("learner_id") and key else None)
    headers = {"authorization": f"Bearer {credential}"} if credential else {}
    async with httpx.AsyncClient(base_url=served.base_url) as client:
        response = await client.post("/api/sessions", json=body, headers=headers)
    assert response.status_code == 201, response.text
    created = response.json()
    assert isinstance(created, dict)
    return created


async def state(served: Served, session_id: str, token: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=served.base_url) as client:
        response = await client.get(f"/api/sessions/{session_id}",
                                    headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    got = response.json()
    assert isinstance(got, dict)
    return got


class Client:
    """A websockets client that decodes frames and reads with a timeout."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.msgpack = ws.subprotocol == "samvad.v1.msgpack"
        self.seen: list[dict[str, Any]] = []

    async def send(self, frame: dict[str, Any]) -> None:
        if self.msgpack:
            await self.ws.send(msgpack.packb(frame, use_bin_type=True))
        else:
            await self.ws.send(orjson.dumps(frame).decode())

    async def recv(self, wait: float = 5.0) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.ws.recv(), wait)
        frame = msgpack.unpackb(raw, raw=False) if isinstance(raw, bytes) else orjson.loads(raw)
        assert isinstance(frame, dict)
        self.seen.append(frame)
        return frame

    async def until(self, kind: str, wait: float = 5.0, **fields: Any) -> dict[str, Any]:
        """Read until a frame of `kind` whose fields match; returns it."""
        deadline = time.monotonic() + wait
        while True:
            frame = await self.recv(max(0.01, deadline - time.monotonic()))
            if frame["type"] == kind and all(frame.get(k) == v for k, v in fields.items()):
                return frame

    async def quiet(self, wait: float = 0.3) -> list[dict[str, Any]]:
        """Everything that arrives within `wait` seconds (usually: nothing)."""
        out = []
        with contextlib.suppress(TimeoutError):
            while True:
                out.append(await self.recv(wait))
        return out

    async def turn(self, frame_id: str, text: str) -> list[dict[str, Any]]:
        """Send a transcript; return its reply and every frame after it up to the turn's end."""
        await self.send({"type": "transcript", "id": frame_id, "text": text})
        got = [await self.until("reply", in_reply_to=frame_id)]
        # A pong is queued behind the reply's mood/stage/end events: read up to it.
        await self.send({"type": "ping", "id": f"barrier-{frame_id}"})
        while True:
            frame = await self.recv()
            if frame["type"] == "pong" and frame.get("id") == f"barrier-{frame_id}":
                return got
            got.append(frame)


@contextlib.asynccontextmanager
async def client(url: str, *, subprotocol: str | None = "samvad.v1.json",
                 headers: dict[str, str] | None = None, **kw: Any) -> AsyncIterator[Client]:
    async with connect(url, subprotocols=[subprotocol] if subprotocol else None,  # type: ignore[list-item]
                       additional_headers=headers, compression=None, open_timeout=5,
                       close_timeout=1, ping_interval=None, **kw) as ws:
        yield Client(ws)


async def player(served: Served, created: dict[str, Any], **kw: Any) -> Any:
    """A client on the session socket with the session's player token (use with `async with await`)."""
    return client(served.ws_url(created["session_id"], created["player_token"]), **kw)


async def close_code(c: Client, wait: float = 5.0) -> int | None:
    """Read until the server closes the socket; the close code it sent."""
    from websockets.exceptions import ConnectionClosed

    deadline = time.monotonic() + wait
    try:
        while time.monotonic() < deadline:
            await c.recv(max(0.01, deadline - time.monotonic()))
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd is not None else None
    raise AssertionError("the server did not close the socket")


def checked(frames: list[dict[str, Any]]) -> Any:
    """The bots' invariant checker run over a stream of frames a test client received."""
    from clients.bots.checker import SessionChecker

    checker = SessionChecker()
    for frame in frames:
        checker.feed(frame)
    checker.finish()
    return checker


def without(snapshot: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A session state without `keys` (what a command may change: its seq, its clock)."""
    return {k: v for k, v in snapshot.items() if k not in keys}


async def accepting_app(scope: Any, receive: Any, send: Any) -> None:
    """A bare ASGI app for uvicorn's own tests: accepts a WebSocket and waits for its close."""
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        while (await receive())["type"] != "websocket.disconnect":
            pass


@contextlib.asynccontextmanager
async def bare_uvicorn(app: Any = accepting_app, **config: Any) -> AsyncIterator[int]:
    """uvicorn itself serving `app` (`accepting_app` unless given) on a loopback port (yielded) with
    `config`; stopped after."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None,
                                           lifespan="off", **config))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn sets a flag, not an event)
            await asyncio.sleep(0.01)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await task
