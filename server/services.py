"""What the routes share: `Services`, the parts of one running server, and the JSON error body.

It sits below both the HTTP routes (`server/http_api.py`, `server/spectate.py`) and the session socket
(`server/ws.py`), and imports none of them, so that `server/app.py` alone assembles the application.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from starlette.responses import JSONResponse

from server.auth import Tokens
from server.config import Settings
from server.connection import TokenBucket, WsConnection
from session.protocols import Brain, Mirror
from session.registry import SessionRegistry


@dataclass
class Services:
    settings: Settings
    tokens: Tokens
    brain: Brain
    mirror: Mirror
    registry: SessionRegistry
    started_at: float = field(default_factory=time.time)
    connections: int = 0
    sockets: set[WsConnection] = field(default_factory=set)  # open session sockets
    create_buckets: dict[str, TokenBucket] = field(default_factory=dict)

    def allow_create(self, client: str) -> bool:
        bucket = self.create_buckets.get(client)
        if bucket is None:
            if len(self.create_buckets) > 10_000:
                self.create_buckets.clear()  # bounded: forget old addresses wholesale
            bucket = self.create_buckets[client] = TokenBucket(
                self.settings.SESSION_CREATE_PER_SECOND, self.settings.SESSION_CREATE_BURST)
        return bucket.take()


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
