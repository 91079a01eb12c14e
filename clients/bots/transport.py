"""The bots' transport: one-shot HTTP requests on loopback, and WebSocket connections that speak
either subprotocol. No client library for HTTP, so thousands of bots stay cheap.

`BotError` is the failure that ends one bot's session; its `kind` is the bucket the run counts it in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import msgpack
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

JSON_SUBPROTOCOL = "samvad.v1.json"
MSGPACK_SUBPROTOCOL = "samvad.v1.msgpack"


class BotError(Exception):
    """A failure that ends one bot's session; `kind` is the error bucket it is counted in."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail



# ---------------------------------------------------------------------------- HTTP


async def http_request(
    base: str, method: str, path: str, body: dict[str, Any] | None = None,
    *, headers: dict[str, str] | None = None, limit_s: float = 10.0,
) -> tuple[int, bytes]:
    """One HTTP/1.1 request on a fresh loopback connection: cheap, and no client library."""
    parts = urlsplit(base)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    payload = orjson.dumps(body) if body is not None else b""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
             f"Content-Length: {len(payload)}"]
    if body is not None:
        lines.append("Content-Type: application/json")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
    try:
        async with asyncio.timeout(limit_s):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(request)
                data = await reader.read(-1)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except TimeoutError:
        raise BotError("http_timeout", f"{method} {path}: no answer within {limit_s:g} s") from None
    except OSError as exc:
        raise BotError("http_connect", f"{method} {path}: {exc}") from None
    head, _, content = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or not status_line[1].isdigit():
        raise BotError("http_bad_response", repr(data[:80]))
    return int(status_line[1]), content


async def create_session(base: str, *, limit_s: float = 10.0, credential: str = "", **fields: Any) -> dict[str, Any]:
    """POST /api/sessions. A named `learner_id` needs `credential`: the admin key (the bots act as a
    trusted backend) or that learner's credential; a development server without ADMIN_KEY needs none."""
    headers = {"Authorization": f"Bearer {credential}"} if credential else None
    status, content = await http_request(base, "POST", "/api/sessions", fields, headers=headers, limit_s=limit_s)
    if status != 201:
        raise BotError(f"http_{status}", content[:200].decode("utf-8", "replace"))
    created = orjson.loads(content)
    assert isinstance(created, dict)
    return created


def ws_base(base: str) -> str:
    parts = urlsplit(base)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    return f"{scheme}://{parts.netloc}"


# ---------------------------------------------------------------------------- sockets


class Wire:
    """Encode client frames and decode server frames for one connection's format."""

    def __init__(self, use_msgpack: bool) -> None:
        self.use_msgpack = use_msgpack
        self.subprotocol = MSGPACK_SUBPROTOCOL if use_msgpack else JSON_SUBPROTOCOL

    async def send(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        if self.use_msgpack:
            await ws.send(msgpack.packb(frame, use_bin_type=True))
        else:
            await ws.send(orjson.dumps(frame), text=True)

    @staticmethod
    def decode(raw: str | bytes) -> dict[str, Any]:
        obj = msgpack.unpackb(raw, raw=False) if isinstance(raw, bytes) else orjson.loads(raw)
        if not isinstance(obj, dict):
            raise BotError("bad_server_frame", repr(obj)[:100])
        return obj


async def read_until(ws: ClientConnection, wire: Wire, match: Callable[[dict[str, Any]], bool], *,
                     limit_s: float, what: str, seen: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Read server frames, each shown to `seen`, until one matches; an `error` frame, or nothing
    matching within `limit_s`, raises `BotError` (`error_<code>`, `timeout_<what>`)."""
    try:
        async with asyncio.timeout(limit_s):
            while True:
                frame = wire.decode(await ws.recv())
                seen(frame)
                if frame["type"] == "error":
                    raise BotError(f"error_{frame.get('code')}", str(frame.get("message")))
                if match(frame):
                    return frame
    except TimeoutError:
        raise BotError(f"timeout_{what.replace(' ', '_')}", f"no {what} within {limit_s:g} s") from None


async def open_socket(url: str, subprotocol: str | None, *, limit_s: float = 10.0,
                      headers: dict[str, str] | None = None) -> ClientConnection:
    """A client connection tuned for many sockets in one process."""
    try:
        return await connect(
            url,
            subprotocols=[subprotocol] if subprotocol else None,  # type: ignore[list-item]
            additional_headers=headers,
            compression=None,  # loopback: deflate would only cost CPU on both ends
            open_timeout=limit_s,
            close_timeout=2.0,
            ping_interval=None,  # the server pings every 20 s; the client answers automatically
            max_queue=64,
            max_size=16 * 1024 * 1024,
        )
    except InvalidStatus as exc:
        raise BotError(f"ws_status_{exc.response.status_code}", str(exc)) from None
    except (InvalidHandshake, OSError, TimeoutError) as exc:
        raise BotError("ws_connect", f"{type(exc).__name__}: {exc}") from None


def close_kind(exc: ConnectionClosed) -> str:
    code = exc.rcvd.code if exc.rcvd is not None else None
    return f"close_{code}" if code is not None else "close_abnormal"
