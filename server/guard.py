"""What every HTTP request passes before a route sees it: no key in the URL, and a body within its limit.

`RequestGuard` is pure ASGI, outside Starlette's routing:

1. A request whose query string carries `admin=` is refused, 400 `credential_in_url`: the admin
   key goes in the `Authorization` header only, never where browser history, proxy logs and
   `Referer` headers keep it (docs/security.md).
2. A request body over its route's limit (`body_limit`) is refused, 413 `too_large`, before a byte
   of it is read: a `Content-Length` over the limit is answered at once, and a body without one
   (chunked) is read through a counter that stops at the limit. A response sent before a chunked
   body was read says `Connection: close`, so the server drops the connection instead of reading
   an unbounded rest to reuse it, and uvicorn's flow control reads no more of a body nobody
   receives: a refused body does not grow the server.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from brain.knowledge.chunking import MAX_FILE_BYTES

__all__ = ["DEFAULT_BODY_BYTES", "PACK_BODY_BYTES", "UPLOAD_OVERHEAD_BYTES", "RequestGuard", "body_limit"]

DEFAULT_BODY_BYTES = 16 * 1024  # every JSON route: sessions, /retrieve, sign-in, dev generate
UPLOAD_OVERHEAD_BYTES = 64 * 1024  # multipart boundaries and headers around a playbook upload
# A scenario pack's manifest (POST /api/scenarios, PUT /api/scenarios/{id}): the shipped ones are
# 20-30 KB; eight times the largest leaves an author room and keeps one parse cheap.
PACK_BODY_BYTES = 256 * 1024


def body_limit(path: str, audio_clip_bytes: int) -> int:
    """The largest body `path` accepts: one playbook upload, one Unity clip in base64, else 16 KiB."""
    if path.startswith("/api/scenarios/") and path.endswith("/knowledge"):
        return MAX_FILE_BYTES + UPLOAD_OVERHEAD_BYTES
    if path == "/api/scenarios" or (path.startswith("/api/scenarios/") and path.count("/") == 3):
        return PACK_BODY_BYTES
    if path == "/api/test":
        return audio_clip_bytes * 4 // 3 + 64 * 1024
    return DEFAULT_BODY_BYTES


class BodyTooLarge(Exception):
    """A body without a Content-Length went past its limit while the route read it."""


def _error(status: int, code: str, message: str) -> tuple[dict[str, object], bytes]:
    body = orjson.dumps({"error": {"code": code, "message": message}})
    start = {"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                         (b"connection", b"close")]}
    return start, body


class RequestGuard:
    def __init__(self, app: ASGIApp, *, audio_clip_bytes: int) -> None:
        self.app = app
        self.audio_clip_bytes = audio_clip_bytes

    async def _refuse(self, send: Send, status: int, code: str, message: str) -> None:
        start, body = _error(status, code, message)
        await send(start)
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = scope.get("query_string", b"")
        if query and any(name == "admin" for name, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True)):
            await self._refuse(send, 400, "credential_in_url",
                               "the admin key goes in the Authorization header, never in the URL")
            return
        limit = body_limit(scope["path"], self.audio_clip_bytes)
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if length is not None:
            if not length.isdigit():
                await self._refuse(send, 400, "bad_request", "Content-Length is not a number")
                return
            if int(length) > limit:
                await self._refuse(send, 413, "too_large", f"the body limit here is {limit} bytes")
                return
        seen = 0
        # A declared body within its limit may be left to the server to read and discard (at most
        # `limit` bytes); a chunked one has no end we know of.
        done = length is not None or not _chunked(scope)
        started = False

        async def capped() -> Message:
            nonlocal seen, done
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
                done = done or not message.get("more_body", False)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if not done:
                    # Answered before the body was read (refused): close rather than let the server
                    # read and discard the rest of it to reuse the connection.
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, capped, watched)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(send, 413, "too_large", f"the body limit here is {limit} bytes")


def _chunked(scope: Scope) -> bool:
    return any(k == b"transfer-encoding" and b"chunked" in v.lower() for k, v in scope["headers"])
