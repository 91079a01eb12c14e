"""The HTTP API: health (and its liveness and readiness halves for an orchestrator), creating and reading
sessions, a session's graph, figures, and the dev endpoint.

`routes()` lists them with the session socket (`server/ws.py`); `server/app.py` mounts them.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from schemas.enums import LanguageCode, Level, Role
from schemas.scenario import DEFAULT_SCENARIO
from server.auth import TokenError
from server.cluster.routes import routed_session_id
from server.services import Services, bearer, error_response
from server.ws import session_socket
from session.actor import SessionActor
from session.protocols import MirrorUnavailable
from session.registry import CapacityError

MAX_BODY_BYTES = 16 * 1024


class CreateSession(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str = DEFAULT_SCENARIO
    input_language: LanguageCode = LanguageCode.EN_IN
    target_language: LanguageCode = LanguageCode.EN_IN
    learner_id: Annotated[str, StringConstraints(max_length=64)] | None = None
    # What it changes is the scenario's data (docs/coaching.md). None: a known learner's confirmed
    # level (docs/memory.md), else intermediate.
    level: Level | None = None


class DevGenerate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    transcribed_text: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    context_block: str = Field(default="", max_length=20_000)
    rag_context: str = Field(default="", max_length=20_000)
    scene_context: dict[str, Any] = Field(default_factory=dict)
    session_id: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[\w.\-:]+$")]


async def read_json(request: Request) -> Any:
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise ValueError(f"body over {MAX_BODY_BYTES} bytes")
    if not body.strip():
        return {}
    import orjson

    return orjson.loads(body)


def named_learner(services: Services, request: Request, named: str | None) -> str | JSONResponse | None:
    """The learner a new session is bound to, with proof of who it is (docs/security.md), or the error.

    A trusted backend's admin key may name any learner. A learner credential (Samvad's learner
    token, or a login server's assertion) names its own learner, and may not name another. No
    credential and no `learner_id`: an anonymous session. A `learner_id` without proof: 401.
    """
    if services.is_admin(request):
        return named
    credential = bearer(request)
    if credential is None:
        if named is not None:
            return error_response(401, "unauthorized", "naming a learner needs the admin key (a trusted "
                                  "backend) or a learner credential as Authorization: Bearer")
        return None
    try:
        proven = services.learner_of(credential)
    except TokenError as exc:
        if named is None:
            return None  # not a learner credential (a session token, say): an anonymous session
        return error_response(401, "unauthorized", f"bad learner credential: {exc}")
    if named is not None and named != proven:
        return error_response(403, "forbidden", "this learner credential is for another learner")
    return proven


async def health(request: Request) -> JSONResponse:
    services: Services = request.app.state.services
    mirror_stats = services.mirror.statistics()
    status = "ok"
    if mirror_stats.get("buffer_full"):
        status = "degraded"
    cluster = services.cluster
    if cluster is not None and cluster.draining:
        status = "draining"  # 503: HAProxy stops routing here (deploy/haproxy.cfg)
    return JSONResponse(status_code=503 if status == "draining" else 200, content={
        "status": status,
        "version": services.settings.APP_VERSION,
        "brain": services.brain.name,
        "uptime_s": round(time.time() - services.started_at, 1),
        "sessions": services.registry.statistics(),
        "connections": services.connections,
        "mirror": mirror_stats,
        "learners": services.learners.statistics(),
        "voice": services.voice.health(),
        **({"cluster": cluster.statistics()} if cluster is not None else {}),
    })


async def livez(request: Request) -> JSONResponse:
    """Liveness: the process answers HTTP. It stays 200 while the node drains, so that an orchestrator
    does not restart a node that is handing its sessions over (docs/deployment.md, Kubernetes)."""
    return JSONResponse({"status": "alive"})


async def readyz(request: Request) -> JSONResponse:
    """Readiness: 503 from the moment a drain starts, so that the Service and HAProxy send nothing new
    here; /health says the same with the node's figures."""
    services: Services = request.app.state.services
    if services.cluster is not None and services.cluster.draining:
        return JSONResponse({"status": "draining"}, status_code=503)
    return JSONResponse({"status": "ready"})


async def create_session(request: Request) -> Response:
    services: Services = request.app.state.services
    try:
        body = CreateSession.model_validate(await read_json(request))
    except (ValidationError, ValueError) as exc:
        return error_response(422, "invalid", str(exc)[:500])
    learner_id = named_learner(services, request, body.learner_id)
    if isinstance(learner_id, JSONResponse):
        return learner_id
    if not services.allow_create(services.client_address(request), learner=learner_id, credential=bearer(request),
                                 trusted=services.settings.ADMIN_KEY != "" and services.is_admin(request)):
        return error_response(429, "rate_limited", "too many sessions created; slow down")
    if not services.mirror.has_room():
        return error_response(503, "unavailable", "the session store is unreachable and its buffer is full")
    # The version new sessions play now (server/studio/catalog.py): one cheap check of the store.
    pack = await services.packs.current(body.scenario)
    if pack is None:
        return error_response(422, "invalid", f"unknown scenario {body.scenario!r}")
    # A known learner: the vendor remembers them, and their confirmed level is the default.
    profile = await services.learners.profile(learner_id) if learner_id else None
    due = await services.learners.practice(learner_id, body.scenario) if profile is not None and learner_id else ()
    session_id = None
    if services.cluster is not None:  # the id HAProxy hashed on, and this node's lease on it
        session_id = routed_session_id(services, request) or uuid.uuid4().hex
        try:
            await services.cluster.claim(session_id, wait_s=0)
        except MirrorUnavailable as exc:
            return error_response(503, "unavailable", str(exc))
    try:
        actor = services.registry.create(
            session_id=session_id,
            scenario=body.scenario, learner_id=learner_id,
            input_language=body.input_language, target_language=body.target_language,
            level=body.level or services.learners.default_level(profile),
            recall=services.learners.recall(profile, body.scenario, pack.version, due),
            scenario_version=pack.version,
        )
    except CapacityError as exc:
        return error_response(503, "capacity", str(exc))
    sid = actor.session_id
    # With a durable mirror, answer once the session is stored, so that a crash cannot lose a session
    # whose id the client already holds. While the store is down this waits NEO4J_TIMEOUT_MS at most
    # and says `"durable": false` (the session plays on and is stored when the store returns). The
    # in-memory mirror keeps nothing across a restart: `"durable": false` always.
    durable = await services.mirror.flushed(sid, services.settings.NEO4J_TIMEOUT_MS / 1000)
    answer: dict[str, Any] = {
        "session_id": sid,
        "durable": durable,
        "player_token": services.tokens.issue(sid, Role.PLAYER),
        "spectator_token": services.tokens.issue(sid, Role.SPECTATOR),
        "expires_in": services.tokens.ttl_seconds,
        "ws_url": f"/ws/sessions/{sid}",
    }
    if learner_id:
        answer["learner_id"] = learner_id
        answer["learner_token"] = services.tokens.issue_learner(learner_id)  # GET /api/learners/{id}
        answer["known_learner"] = actor.negotiation.recall is not None
    # orjson writes the same bytes as JSONResponse's `json.dumps` for these plain values, at a
    # tenth of the cost: one of these per session created.
    return Response(orjson.dumps(answer), status_code=201, media_type="application/json")


def refuse_unless_session_token(services: Services, request: Request, sid: str) -> JSONResponse | None:
    """None when the request carries a valid token (either role) of session `sid`."""
    try:
        claims = services.tokens.verify(bearer(request))
    except TokenError as exc:
        return error_response(401, "unauthorized", f"bad token: {exc}")
    if claims.session_id != sid:
        return error_response(403, "forbidden", "token is for another session")
    return None


async def session_actor(request: Request) -> SessionActor | JSONResponse:
    """The actor of the session in the path, for a request holding a token of it (either role);
    else the error to answer: 401/403 for the token, 404 for no such session, 503 for the store."""
    services: Services = request.app.state.services
    sid = request.path_params["session_id"]
    refused = refuse_unless_session_token(services, request, sid)
    if refused is not None:
        return refused
    return await find_actor(services, sid)


async def find_actor(services: Services, sid: str) -> SessionActor | JSONResponse:
    """The actor of session `sid`, once the caller's right to it is settled; else 404 or 503."""
    try:
        actor = await services.registry.get(sid)
    except MirrorUnavailable as exc:
        return error_response(503, "unavailable", str(exc))
    if actor is None:
        return error_response(404, "not_found", "no such session")
    return actor


async def get_session(request: Request) -> JSONResponse:
    actor = await session_actor(request)
    if isinstance(actor, JSONResponse):
        return actor
    return JSONResponse(actor.negotiation.snapshot().model_dump(mode="json"))


async def session_graph(request: Request) -> JSONResponse:
    """The session's subgraph in Neo4j: session, turns in FOLLOWED_BY order, items, transitions."""
    services: Services = request.app.state.services
    sid = request.path_params["session_id"]
    refused = refuse_unless_session_token(services, request, sid)
    if refused is not None:
        return refused
    try:
        data = await services.mirror.graph(sid)
    except MirrorUnavailable as exc:
        return error_response(503, "unavailable", str(exc))
    if data is None:
        return error_response(404, "not_found", "no such session in the graph")
    return JSONResponse(data)


async def stats(request: Request) -> JSONResponse:
    """Figures across sessions, computed in Neo4j. `?since=<unix s>&scenario=<name>&limit=<n>`."""
    services: Services = request.app.state.services
    if not services.is_admin(request):
        return error_response(401, "unauthorized", "the admin key is required")
    try:
        since = float(request.query_params.get("since", 0))
        limit = max(1, min(200, int(request.query_params.get("limit", 20))))
    except ValueError:
        return error_response(422, "invalid", "since must be a number and limit an integer")
    try:
        data = await services.mirror.stats(since=since, scenario=request.query_params.get("scenario"), limit=limit)
    except MirrorUnavailable as exc:
        return error_response(503, "unavailable", str(exc))
    return JSONResponse(data)


async def dev_generate(request: Request) -> Response:
    services: Services = request.app.state.services
    if not services.settings.dev_endpoints:
        return error_response(404, "not_found", "dev endpoints are off (set DEV_ENDPOINTS=true or LOG_LEVEL=DEBUG)")
    try:
        body = DevGenerate.model_validate(await read_json(request))
    except (ValidationError, ValueError) as exc:
        return error_response(422, "invalid", str(exc)[:500])
    from server.generate import GenerateError, generate_with

    try:
        result = await generate_with(
            services.registry, body.transcribed_text, body.context_block, body.rag_context,
            body.scene_context, body.session_id,
        )
    except GenerateError as exc:
        return error_response(422, "invalid", str(exc))
    except CapacityError as exc:
        return error_response(503, "capacity", str(exc))
    except (RuntimeError, TimeoutError) as exc:  # the session stopped, or did not answer in time
        return error_response(503, "unavailable", str(exc) or "no answer in time")
    return JSONResponse(result)


def routes() -> list[BaseRoute]:
    return [
        Route("/health", health, methods=["GET"]),
        Route("/livez", livez, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/api/sessions", create_session, methods=["POST"]),
        Route("/api/sessions/{session_id}", get_session, methods=["GET"]),
        Route("/api/sessions/{session_id}/graph", session_graph, methods=["GET"]),
        Route("/api/stats", stats, methods=["GET"]),
        Route("/api/dev/generate", dev_generate, methods=["POST"]),
        WebSocketRoute("/ws/sessions/{session_id}", session_socket),
    ]
