"""What the routes share: `Services`, the parts of one running server, and the JSON error body.

It sits below both the HTTP routes (`server/http_api.py`, `server/spectate.py`) and the session socket
(`server/ws.py`), and imports none of them, so that `server/app.py` alone assembles the application.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from brain.knowledge.library import KnowledgeLibrary
from server.auth import Tokens
from server.cluster.node import ClusterNode
from server.config import Environment, Settings
from server.connection import TokenBucket, WsConnection
from server.learners.service import Learners
from server.voice import Voice
from session.protocols import Brain, Mirror
from session.registry import SessionRegistry


@dataclass
class Services:
    settings: Settings
    tokens: Tokens
    brain: Brain
    mirror: Mirror
    registry: SessionRegistry
    knowledge: KnowledgeLibrary
    learners: Learners  # profiles across sessions (server/learners/)
    voice: Voice  # speech in and out (server/voice.py, docs/voice.md)
    cluster: ClusterNode | None = None  # the leases of this node, when CLUSTER_NODE_ID is set (server/cluster/)
    started_at: float = field(default_factory=time.time)
    connections: int = 0
    sockets: set[WsConnection] = field(default_factory=set)  # open session sockets
    create_buckets: dict[str, TokenBucket] = field(default_factory=dict)
    retrieve_buckets: dict[str, TokenBucket] = field(default_factory=dict)
    # The shipped Unity build's clients (server/unity_compat.py): client -> (session id, generation).
    unity_sessions: OrderedDict[str, tuple[str, int]] = field(default_factory=OrderedDict)

    @property
    def admin_open(self) -> bool:
        """True when the admin routes need no key: no ADMIN_KEY, in development only."""
        return not self.settings.ADMIN_KEY and self.settings.SAMVAD_ENV is Environment.DEVELOPMENT

    def is_admin(self, presented: str | None) -> bool:
        """Whether `presented` opens the admin routes (the lobby, spectator links, learners, stats,
        drain). With no ADMIN_KEY they are open in development and closed with SAMVAD_ENV=production,
        where no credential opens them: learners' profiles and the lobby are never public by default."""
        key = self.settings.ADMIN_KEY
        if not key:
            return self.admin_open
        return self.tokens.check_admin(presented, key)

    def allow_create(self, client: str) -> bool:
        settings = self.settings
        return _take(self.create_buckets, client, settings.SESSION_CREATE_PER_SECOND,
                     settings.SESSION_CREATE_BURST)

    def allow_retrieve(self, client: str) -> bool:
        rate = self.settings.RETRIEVE_PER_SECOND
        return _take(self.retrieve_buckets, client, rate, max(1, int(rate * 2)))


def _take(buckets: dict[str, TokenBucket], client: str, rate: float, burst: int) -> bool:
    bucket = buckets.get(client)
    if bucket is None:
        if len(buckets) > 10_000:
            buckets.clear()  # bounded: forget old addresses wholesale
        bucket = buckets[client] = TokenBucket(rate, burst)
    return bucket.take()


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def admin_credential(conn: HTTPConnection) -> str | None:
    """The admin key a request presents: a bearer header, else the `admin` query parameter."""
    header = conn.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return conn.query_params.get("admin")
