"""The spectator view: static pages, the lobby of live sessions, and spectator links.

Routes (all added by `spectator_routes`):

- `GET /view/` and `GET /view/lobby.html`: the lobby page (admin).
- `GET /view/...`: the other static files in `clients/browser/` (no session data in them).
- `GET /api/lobby`: the live sessions as JSON (admin).
- `WS /ws/lobby`: the same list, then coalesced updates as sessions change (admin).
- `GET /api/sessions/{id}/spectator-link`: a watch-page URL with a fresh spectator token (admin).

"Admin" means `Authorization: Bearer <ADMIN_KEY>`, or the teachers' sign-in cookie that
`POST /api/signin` sets (server/signin.py), checked with `Services.is_admin` (constant time). The
key is never read from a URL. With no ADMIN_KEY configured the lobby is open to anyone who can
reach the server in development, and a warning says so at start-up; production does not start
without one. The watch page itself needs only the session's spectator token, issued for
LINK_TTL_SECONDS, which the session socket checks as usual.

Lobby updates are driven by `registry.listeners`. Each lobby socket keeps a set of the sessions
that changed since its last message, not a queue of events: a session that changes fifty times
in a quarter second costs one row. A socket gets at most one message per `COALESCE_SECONDS`; if
more than `OUTBOUND_QUEUE` distinct sessions are waiting the set collapses into one full list,
so memory per socket stays bounded, and a socket whose send does not complete within
`SEND_TIMEOUT_SECONDS` is closed with 4430 (slow consumer), as `server/connection.py` does.
"""

from __future__ import annotations

import logging
import time
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from schemas.enums import Role
from schemas.errors import CloseCode
from server.services import Services, error_response
from session.ended import EndedSession, last_turn_at
from session.negotiation import Negotiation
from session.rules import mood_for

if TYPE_CHECKING:
    from session.actor import SessionActor

log = logging.getLogger("samvad.spectate")

STATIC_PACKAGE = ("clients", "browser")
COALESCE_SECONDS = 0.25  # at most one lobby message per socket per this interval
RESYNC_SECONDS = 30.0  # a full list now and then drops sessions evicted in between
SEND_TIMEOUT_SECONDS = 10.0  # a lobby socket that cannot take one message in this long is dropped
WATCH_PAGE = "/view/watch.html"

_NEED_ADMIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Samvad lobby: admin key needed</title><link rel="stylesheet" href="/view/style.css"></head>
<body class="page-message"><main><h1>Admin key needed</h1>
<p>This server protects its lobby. <a id="signin-link" href="/view/signin.html?next=/view/lobby.html">Sign in
with the admin key</a>, or ask for a watch link for one session (see docs/spectator.md).</p></main></body></html>"""


class _LobbySocket:
    """What one lobby socket still has to be told: changed session ids, or everything."""

    __slots__ = ("dirty", "full", "limit", "wake")

    def __init__(self, limit: int) -> None:
        self.dirty: dict[str, None] = {}  # an ordered set
        self.full = False
        self.limit = limit
        self.wake = anyio.Event()

    def mark(self, session_id: str) -> None:
        if not self.full:
            self.dirty[session_id] = None
            if len(self.dirty) > self.limit:
                self.dirty.clear()
                self.full = True
        self.wake.set()


class Lobby:
    """The live-session list, its sockets, and the spectator tokens it hands out."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.sockets: set[_LobbySocket] = set()
        self._tokens: dict[str, tuple[str, float]] = {}
        services.registry.listeners.append(self._on_change)

    @property
    def open(self) -> bool:
        return self.services.admin_open

    def allowed(self, conn: HTTPConnection) -> bool:
        return self.services.is_admin(conn)

    def _on_change(self, actor: SessionActor) -> None:
        # Called by the session actor on every change: only mark, never format or send here.
        for sock in self.sockets:
            sock.mark(actor.session_id)

    # ------------------------------------------------------------------ rows

    def spectator_token(self, session_id: str) -> str:
        """A spectator token for the session, reused until half its lifetime has passed."""
        now = time.time()
        cached = self._tokens.get(session_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        if len(self._tokens) > 4 * self.services.settings.MAX_SESSIONS:
            self._tokens.clear()
        ttl = self.services.settings.LINK_TTL_SECONDS
        token = self.services.tokens.issue(session_id, Role.SPECTATOR, ttl=ttl)
        self._tokens[session_id] = (token, now + ttl / 2)
        return token

    def watch_url(self, session_id: str, token: str) -> str:
        return f"{WATCH_PAGE}?session={session_id}&token={token}"

    def row(self, n: Negotiation | EndedSession, actor: SessionActor | None) -> dict[str, Any]:
        """A session's row: its negotiation, or the record an ended one is kept as (session/ended.py,
        which names the same facts, and has no actor), and its actor's connections."""
        if isinstance(n, EndedSession):
            last_turn, thinking, max_turns = n.last_turn_at, False, self.services.registry.limits.max_turns
        else:
            last_turn, thinking, max_turns = last_turn_at(n), n.pending is not None, n.limits.max_turns
        spectators = 0 if actor is None else sum(1 for c in actor.connections.values()
                                                 if c.role == Role.SPECTATOR.value)
        sid = n.session_id
        return {
            "session_id": sid,
            "learner_id": n.learner_id,
            "scenario": n.scenario_name,
            "vendor": n.scenario.vendor.name,
            "currency": n.scenario.currency,
            "stage": n.stage.value,
            "happiness_score": n.happiness,
            "vendor_mood": mood_for(n.happiness).value,
            "turn": n.turn,
            "max_turns": max_turns,
            "item": n.item,
            "vendor_quote": n.quote,
            "last_offer": n.last_offer,
            "is_terminal": n.is_terminal,
            "outcome": n.outcome.value if n.outcome else None,
            "thinking": thinking,
            "player_connected": actor is not None and actor.player is not None,
            "spectators": spectators,
            "created_at": n.created_at,
            "updated_at": n.updated_at,
            "last_turn_at": last_turn,
            "watch_url": self.watch_url(sid, self.spectator_token(sid)),
        }

    def rows(self) -> list[dict[str, Any]]:
        registry = self.services.registry
        sessions: list[tuple[float, Negotiation | EndedSession, SessionActor | None]] = [
            (a.negotiation.created_at, a.negotiation, a) for a in registry.actors()]
        sessions.extend((r.created_at, r, None) for r in registry.ended())
        sessions.sort(key=lambda s: s[0])
        return [self.row(n, actor) for _, n, actor in sessions]

    def full_message(self) -> dict[str, Any]:
        return {"type": "lobby", "server_time": time.time(), "sessions": self.rows()}

    def update_message(self, session_ids: list[str]) -> dict[str, Any]:
        rows, removed = [], []
        registry = self.services.registry
        for sid in session_ids:
            actor = registry.live(sid)
            n = actor.negotiation if actor is not None else registry.record(sid)
            if n is None:
                removed.append(sid)
            else:
                rows.append(self.row(n, actor))
        return {"type": "lobby.update", "server_time": time.time(), "sessions": rows,
                "removed": removed}

    # ------------------------------------------------------------------ the socket

    async def serve(self, websocket: WebSocket) -> None:
        if not self.allowed(websocket):
            await websocket.accept()
            await websocket.close(code=CloseCode.UNAUTHORIZED, reason="admin key needed")
            return
        await websocket.accept()
        sock = _LobbySocket(self.services.settings.OUTBOUND_QUEUE)
        self.sockets.add(sock)
        close_code: int | None = None
        try:
            async with anyio.create_task_group() as tg:

                async def pump() -> None:
                    nonlocal close_code
                    try:
                        await self._pump(websocket, sock)
                    except TimeoutError:
                        close_code = CloseCode.SLOW_CONSUMER
                        log.warning("slow lobby consumer dropped")
                    except Exception as exc:  # the peer went away mid-send
                        log.debug("lobby socket send failed: %s", exc)
                    tg.cancel_scope.cancel()

                tg.start_soon(pump)
                await _drain(websocket)
                tg.cancel_scope.cancel()
        finally:
            self.sockets.discard(sock)
            if close_code is not None:
                with anyio.move_on_after(1.0, shield=True):
                    try:
                        await websocket.close(code=close_code, reason="slow consumer")
                    except Exception:  # the peer may be gone already
                        pass

    async def _pump(self, websocket: WebSocket, sock: _LobbySocket) -> None:
        async def send(message: dict[str, Any]) -> None:
            with anyio.fail_after(SEND_TIMEOUT_SECONDS):
                await websocket.send_text(orjson.dumps(message).decode())

        await send(self.full_message())
        last_full = time.monotonic()
        while True:
            with anyio.move_on_after(max(0.0, RESYNC_SECONDS - (time.monotonic() - last_full))):
                await sock.wake.wait()
            sock.wake = anyio.Event()  # before taking the set: a later mark wakes us again
            if sock.full or time.monotonic() - last_full >= RESYNC_SECONDS:
                sock.full = False
                sock.dirty.clear()
                await send(self.full_message())
                last_full = time.monotonic()
            elif sock.dirty:
                changed = list(sock.dirty)
                sock.dirty.clear()
                await send(self.update_message(changed))
            await anyio.sleep(COALESCE_SECONDS)


async def _drain(websocket: WebSocket) -> None:
    """Read and ignore what the client sends, until it goes away."""
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
    except WebSocketDisconnect:
        return


def _lobby_html() -> bytes:
    return resources.files(STATIC_PACKAGE[0]).joinpath(STATIC_PACKAGE[1], "lobby.html").read_bytes()


def spectator_routes(services: Services) -> list[BaseRoute]:
    """The spectator pages, lobby API and socket, and spectator-link endpoint, for `services`."""
    lobby = Lobby(services)
    page = _lobby_html()

    async def lobby_page(request: Request) -> Response:
        if not lobby.allowed(request):
            return HTMLResponse(_NEED_ADMIN_PAGE, status_code=401)
        return HTMLResponse(page, headers={"cache-control": "no-cache"})

    async def lobby_api(request: Request) -> JSONResponse:
        if not lobby.allowed(request):
            return error_response(401, "unauthorized", "the lobby needs the admin key")
        return JSONResponse(lobby.full_message())

    async def spectator_link(request: Request) -> JSONResponse:
        if not lobby.allowed(request):
            return error_response(401, "unauthorized", "spectator links need the admin key")
        sid = request.path_params["session_id"]
        if await services.registry.get(sid) is None:
            return error_response(404, "not_found", "no such session")
        ttl = services.settings.LINK_TTL_SECONDS
        token = services.tokens.issue(sid, Role.SPECTATOR, ttl=ttl)
        return JSONResponse({"url": lobby.watch_url(sid, token), "spectator_token": token, "expires_in": ttl})

    static = StaticFiles(packages=[STATIC_PACKAGE], html=True)
    return [
        Route("/view/", lobby_page, methods=["GET"]),
        Route("/view/lobby.html", lobby_page, methods=["GET"]),
        Mount("/view", app=static, name="view"),
        Route("/api/lobby", lobby_api, methods=["GET"]),
        Route("/api/sessions/{session_id}/spectator-link", spectator_link, methods=["GET"]),
        WebSocketRoute("/ws/lobby", lobby.serve),
    ]
