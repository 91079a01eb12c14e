"""What the routes share: `Services`, the parts of one running server, and the JSON error body.

It sits below both the HTTP routes (`server/http_api.py`, `server/spectate.py`) and the session socket
(`server/ws.py`), and imports none of them, so that `server/app.py` alone assembles the application.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from brain.knowledge.library import KnowledgeLibrary
from brain.policy import PolicyBrain
from server.auth import LearnerAssertions, TokenError, Tokens
from server.backends import Backends, MirrorBackend
from server.clientaddr import TrustedProxies
from server.cluster.node import ClusterNode
from server.config import Environment, Settings
from server.connection import TokenBucket, WsConnection
from server.learners.service import Learners
from server.studio.catalog import PackCatalog
from server.voice import Voice
from session.registry import SessionRegistry

ADMIN_COOKIE = "samvad_admin"  # the teachers' sign-in (POST /api/signin): HttpOnly, SameSite=Strict
TEACHER_COOKIE = "samvad_teacher"  # a teacher's own sign-in (a teacher token), the same way


class Buckets:
    """Token buckets by key (an address, a token's digest, a learner), `limit` of them at most: the
    least recently used goes first, so a flood of new keys forgets the idle ones, never the busy.
    A bucket refilled to its burst is forgotten too, from the least recently used end, as keys
    are taken: it limits nothing a new one would not, and every session of a new learner would
    otherwise leave one behind (issue #33: an ended session keeps nothing only a live one needs)."""

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str, rate: float, burst: int) -> bool:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(rate, burst)
            while len(self._buckets) > self.limit:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        allowed = bucket.take()
        buckets, now = self._buckets, bucket.stamp
        while buckets:
            oldest = next(iter(buckets.values()))
            if oldest is bucket or not oldest.full(now):
                break
            buckets.popitem(last=False)
        return allowed


@dataclass
class Services:
    settings: Settings
    tokens: Tokens
    brain: PolicyBrain  # every brain answers behind the response policy (brain/policy.py)
    mirror: MirrorBackend
    registry: SessionRegistry
    knowledge: KnowledgeLibrary
    learners: Learners  # profiles across sessions (server/learners/)
    voice: Voice  # speech in and out (server/voice.py, docs/voice.md)
    backends: Backends  # what server/wiring.py built: the stores and the one Neo4j driver
    packs: PackCatalog  # which version of each scenario a new session plays (server/studio/)
    cluster: ClusterNode | None = None  # the leases of this node, when CLUSTER_NODE_ID is set (server/cluster/)
    started_at: float = field(default_factory=time.time)
    connections: int = 0
    sockets: set[WsConnection] = field(default_factory=set)  # open session sockets
    create_buckets: Buckets = field(default_factory=Buckets)
    retrieve_buckets: Buckets = field(default_factory=Buckets)
    # The shipped Unity build's clients (server/unity_compat.py): client -> (session id, generation).
    unity_sessions: OrderedDict[str, tuple[str, int]] = field(default_factory=OrderedDict)
    assertions: LearnerAssertions = field(init=False)  # a school login server's learner assertions
    proxies: TrustedProxies = field(init=False)  # whose X-Forwarded-For is believed

    def __post_init__(self) -> None:
        self.assertions = LearnerAssertions(self.settings.LEARNER_ASSERTION_KEY)
        self.create_buckets.limit = self.retrieve_buckets.limit = self.settings.RATE_BUCKETS
        self.proxies = TrustedProxies(self.settings.TRUSTED_PROXIES)

    @property
    def admin_open(self) -> bool:
        """True when the admin routes need no key: no ADMIN_KEY, in development only."""
        return not self.settings.ADMIN_KEY and self.settings.SAMVAD_ENV is Environment.DEVELOPMENT

    def is_admin(self, conn: HTTPConnection) -> bool:
        """Whether the request may do what the admin key allows: it carries the key as a bearer, or a
        teacher's sign-in cookie sent from this server's own pages. With no ADMIN_KEY the admin routes
        are open in development (with a warning at start-up); production refuses to start without one."""
        key = self.settings.ADMIN_KEY
        if not key:
            return self.admin_open
        if self.tokens.check_admin(bearer(conn), key):
            return True
        cookie = conn.cookies.get(ADMIN_COOKIE)
        return cookie is not None and same_origin(conn) and self.tokens.verify_admin(cookie, key)

    def teacher_of(self, conn: HTTPConnection) -> str | None:
        """The teacher a request comes from: a teacher token as a bearer, or a teacher's sign-in cookie
        sent from this server's own pages; None for anyone else (the admin included)."""
        presented = bearer(conn)
        if presented is None:
            cookie = conn.cookies.get(TEACHER_COOKIE)
            if cookie is None or not same_origin(conn):
                return None
            presented = cookie
        try:
            return self.tokens.verify_teacher(presented)
        except TokenError:
            return None

    def learner_of(self, credential: str | None) -> str:
        """The learner a learner credential proves: Samvad's learner token or a login server's assertion."""
        try:
            return self.tokens.verify_learner(credential)
        except TokenError as own:
            if not self.settings.LEARNER_ASSERTION_KEY:
                raise own from None
        return self.assertions.verify(credential)

    def client_address(self, conn: HTTPConnection) -> str:
        """The client's address: the peer's, or what a trusted proxy says it forwarded (TRUSTED_PROXIES)."""
        return self.proxies.client(conn)

    def allow_create(self, client: str, *, learner: str | None = None, credential: str | None = None,
                     trusted: bool = False) -> bool:
        """Session creation within the limits of the client's address and credential, and of the
        learner: one abuser is held back by what is theirs, not by what they share with others.
        A trusted backend (the admin key) creates sessions for a whole school from one address
        with one key, so only its learners' limits apply to it."""
        settings = self.settings
        rate, burst = settings.SESSION_CREATE_PER_SECOND, settings.SESSION_CREATE_BURST
        keys = [] if trusted else [f"addr:{client}"]
        if credential and not trusted:
            keys.append(f"cred:{digest(credential)}")
        if learner is not None:
            keys.append(f"learner:{learner}")
        return all([self.create_buckets.take(k, rate, burst) for k in keys])

    def allow_retrieve(self, client: str, credential: str | None = None) -> bool:
        rate = self.settings.RETRIEVE_PER_SECOND
        keys = [f"addr:{client}"] + ([f"cred:{digest(credential)}"] if credential else [])
        return all([self.retrieve_buckets.take(k, rate, max(1, int(rate * 2))) for k in keys])


def digest(credential: str) -> str:
    """A short digest of a credential: rate-limit keys and logs never hold the credential itself."""
    return hashlib.sha256(credential.encode()).hexdigest()[:24]


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def bearer(conn: HTTPConnection) -> str | None:
    """The credential of `Authorization: Bearer`, the only place an HTTP route reads a key or token
    from (report links excepted: server/report_api.py)."""
    header = conn.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return None


def same_origin(conn: HTTPConnection) -> bool:
    """False for a request a page of another origin made (its `Origin` names another host): a
    cookie it carries was not sent by this server's own pages."""
    origin = conn.headers.get("origin")
    if origin is None:
        return True
    host = conn.headers.get("host", "")
    return origin.split("://", 1)[-1].rstrip("/") == host
