"""The Starlette application, assembled: the services, the routes, the middleware and the lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from functools import partial

import anyio
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute

from brain.policy import Brain, with_policy
from schemas.scenario import available_scenarios, check_scenarios
from server import gcpolicy
from server.auth import Tokens
from server.backends import MirrorBackend
from server.classes.api import class_routes
from server.cluster.routes import cluster_routes
from server.config import Settings, load_settings
from server.guard import RequestGuard
from server.http_api import routes
from server.knowledge_api import knowledge_routes
from server.learners import Learners
from server.learners.api import learner_routes
from server.metrics import install as install_metrics
from server.metrics import metrics_routes
from server.report_api import report_routes
from server.routes_table import openapi_routes
from server.services import Services
from server.signin import signin_routes
from server.spectate import spectator_routes
from server.studio.api import studio_routes
from server.studio.catalog import PackCatalog
from server.unity_compat import unity_routes
from server.voice import build_voice
from server.wiring import build_backends, build_brain, build_cluster, build_knowledge
from server.ws import SessionSocketApp, sweep_idle_sockets
from session.actor import ActorLimits
from session.registry import SessionRegistry
from session.rules import Limits

log = logging.getLogger("samvad.server")


def build_services(settings: Settings, *, brain: Brain | None = None, mirror: MirrorBackend | None = None) -> Services:
    backends = build_backends(settings)
    if mirror is not None:
        backends = replace(backends, mirror=mirror)
    knowledge = build_knowledge(settings, backends.playbooks)
    # Every brain answers behind the response policy (P0-P3, brain/policy.py), injected ones too.
    policy = with_policy(brain or build_brain(settings, knowledge), knowledge)
    loader = backends.loader
    registry = SessionRegistry(
        policy, backends.mirror,
        limits=Limits(max_mood_delta=settings.MAX_MOOD_DELTA, max_turns=settings.MAX_TURNS,
                      wrap_up_after=settings.WRAP_UP_AFTER_TURN),
        actor_limits=ActorLimits(replay_events=settings.REPLAY_EVENTS, inbox_frames=settings.SESSION_INBOX,
                                 brain_deadline_s=settings.AI_TIMEOUT_MS / 1000 * 4 + 5,
                                 clarify_below=settings.CONFIDENCE_CLARIFY_THRESHOLD,
                                 silence_s=settings.SILENCE_TIMEOUT_MS / 1000,
                                 silence_extended_s=settings.SILENCE_EXTENDED_TIMEOUT_MS / 1000,
                                 max_timeouts=settings.MAX_CONSECUTIVE_TIMEOUTS,
                                 restart_after_s=settings.SESSION_RESTART_SECONDS,
                                 speculate=settings.SPECULATE),
        idle_seconds=settings.SESSION_IDLE_SECONDS,
        ended_grace_seconds=settings.SESSION_ENDED_GRACE_SECONDS,
        sweep_seconds=min(30.0, settings.SESSION_ENDED_GRACE_SECONDS),  # a short grace is swept as often
        # Without a store to rebuild from, a live session stays in memory as long as a token can
        # reach it, so that a learner can come back to it (welcome back); an ended one goes sooner.
        live_idle_seconds=(settings.SESSION_IDLE_SECONDS if loader is not None
                           else max(settings.SESSION_IDLE_SECONDS, settings.TOKEN_TTL_SECONDS)),
        max_sessions=settings.MAX_SESSIONS,
        loader=loader,
        tips=knowledge if settings.TIP_CARDS else None,
    )
    learners = Learners(backends.learners, registry, backends.mirror, timeout_s=settings.NEO4J_TIMEOUT_MS / 1000,
                        invite=settings.REVIEWS_INVITE, due_ahead_s=settings.REVIEWS_DUE_AHEAD_SECONDS)
    return Services(settings=settings, tokens=Tokens(settings.signing_secret, settings.TOKEN_TTL_SECONDS),
                    brain=policy, mirror=backends.mirror, registry=registry, knowledge=knowledge, learners=learners,
                    voice=build_voice(settings), cluster=build_cluster(settings, backends.mirror, registry),
                    backends=backends, packs=PackCatalog(backends.packs))


async def shielded(close: Callable[[], Awaitable[object]]) -> None:
    """`close()`, finished even while the lifespan is being cancelled."""
    with anyio.CancelScope(shield=True):
        await close()


async def refresh_knowledge(services: Services, every_s: float = 30.0) -> None:
    """Re-read the playbooks of scenarios indexed while their store (Neo4j) was down."""
    while True:
        await anyio.sleep(every_s)
        await anyio.to_thread.run_sync(services.knowledge.refresh_stale)


async def full_collections(every_s: float) -> None:
    """The planned full garbage collection of `server.gcpolicy`, due every `every_s` seconds; while
    it would stop the world for too long it is put off and offered again (`FULL_RETRY_S`)."""
    while True:
        await anyio.sleep(every_s)
        waited = 0.0
        while True:
            counted = gcpolicy.count_old()  # a walk of its own: the sockets run before the pass
            await anyio.lowlevel.checkpoint()
            if gcpolicy.full_collection(waited, counted) is not None:
                break
            await anyio.sleep(gcpolicy.FULL_RETRY_S)
            waited += gcpolicy.FULL_RETRY_S


def open_in_development(settings: Settings) -> list[str]:
    """What a development server leaves open that production closes (docs/security.md)."""
    if settings.production:
        return []
    opened = []
    if not settings.ADMIN_KEY:
        opened.append("ADMIN_KEY is not set: the lobby, learners' profiles, stats, drain and spectator links "
                      "are open, and any caller may name a learner_id")
    if settings.cors_origins == ["*"]:
        opened.append("any origin may call the API from a browser (CORS_ORIGINS unset)")
    if settings.unity_route and not settings.UNITY_DEVICE_KEYS:
        opened.append("POST /api/test takes any caller, keyed by address or X-Samvad-Client (UNITY_DEVICE_KEYS unset)")
    if settings.dev_endpoints:
        opened.append("POST /api/dev/generate injects turns into any session")
    return opened


def create_app(settings: Settings | None = None, *, brain: Brain | None = None,
               mirror: MirrorBackend | None = None, extra_routes: list[BaseRoute] | None = None) -> Starlette:
    settings = settings or load_settings()
    check_scenarios()  # a broken scenario pack stops the server here, naming its file and field
    services = build_services(settings, brain=brain, mirror=mirror)
    opened = open_in_development(settings)
    if opened:  # once, at start-up: development is convenient, and says what that costs
        log.warning("development mode (SAMVAD_ENV=development) leaves open: %s; set SAMVAD_ENV=production "
                    "for a deployment", "; ".join(opened))

    metrics = install_metrics(services) if settings.METRICS else None

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Closed in reverse order of entry: the tasks first, then the learners, the playbook store,
        # voice and the brain, and last the Neo4j driver that the mirror, learners, playbooks and leases share.
        async with AsyncExitStack() as stack:
            graphdb = services.backends.graphdb
            if graphdb is not None:
                await stack.enter_async_context(graphdb)
            stack.push_async_callback(shielded, services.brain.aclose)
            stack.push_async_callback(shielded, services.voice.aclose)
            stack.push_async_callback(shielded, partial(anyio.to_thread.run_sync, services.knowledge.store.close))
            stack.push_async_callback(shielded, services.learners.aclose)
            tg = await stack.enter_async_context(anyio.create_task_group())
            await tg.start(services.mirror.run)
            # The knowledge indexes are built before the first learner turn can need one.
            await anyio.to_thread.run_sync(services.knowledge.warm, available_scenarios())
            await tg.start(services.registry.run)
            await tg.start(services.learners.run)
            if services.cluster is not None:
                await tg.start(services.cluster.run)
            tg.start_soon(sweep_idle_sockets, services)
            tg.start_soon(refresh_knowledge, services)
            if metrics is not None:
                tg.start_soon(metrics.probe_loop_lag)
            if gcpolicy.installed():
                tg.start_soon(full_collections, settings.GC_FULL_EVERY_SECONDS)
            log.info("server started", extra={"brain": services.brain.name, "mirror": services.mirror.name})
            try:
                yield
            finally:
                if services.cluster is not None:  # hand the sessions over rather than leave leases to expire
                    with anyio.CancelScope(shield=True), anyio.move_on_after(settings.LEASE_SECONDS):
                        await services.cluster.hand_over(sorted(services.cluster.epochs))
                services.registry.close_all()
                await anyio.sleep(0.05)  # let writers send their close frames
                tg.cancel_scope.cancel()

    app = SessionSocketApp(  # Starlette, which serves the session sockets before its middleware
        routes=[*(extra_routes or []), *routes(), *cluster_routes(), *metrics_routes(), *knowledge_routes(),
                *studio_routes(), *report_routes(), *learner_routes(), *unity_routes(), *signin_routes(),
                *class_routes(), *openapi_routes(), *spectator_routes(services)],
        middleware=[Middleware(RequestGuard, audio_clip_bytes=settings.MAX_AUDIO_CLIP_BYTES),
                    Middleware(CORSMiddleware, allow_origins=settings.cors_origins,
                               allow_methods=["GET", "POST", "DELETE"],
                               allow_headers=["authorization", "content-type"])],
        lifespan=lifespan,
    )
    app.state.services = services
    app.state.metrics = metrics
    return app
