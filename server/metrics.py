"""Prometheus metrics at `GET /metrics` (prometheus-client), one registry per application.

Two kinds, chosen for their cost on the turn path:

- Figures the server already keeps (sessions by stage, connections by role, the mirror's queue, the
  leases) are read when Prometheus scrapes (`SamvadCollector`): nothing is done per turn for them.
- Per-turn figures are observed once per reply, on the player's connection (`Metrics.observe`):
  turns, the turn's pipeline steps (queue, brain, validation, total) per brain, first words, the LLM's
  calls, retries, fallbacks and tokens. Closes and errors by code, and the event loop's lag.

`/metrics` takes `METRICS_KEY` (else `ADMIN_KEY`) as a bearer; with neither set it is open, as every
admin route is in development. Names follow Prometheus' conventions: base units in the name
(`_seconds`), `_total` on counters; `tests/test_metrics.py` checks every name.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from schemas.codec import Envelope
from schemas.frames import Reply
from server.services import Services, admin_credential, error_response

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

TURN_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LAG_TICK_S = 0.25  # the loop-lag probe: how late a sleep of this long wakes up
STEPS = ("queue", "brain", "validation", "total")


class Metrics:
    """The per-turn instruments and the registry they live in (one per application)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter("samvad_turns", "Vendor replies to learner turns", ["brain"], registry=r)
        self.turn_seconds = Histogram("samvad_turn_duration_seconds", "Turn pipeline time per step",
                                      ["brain", "step"], buckets=TURN_BUCKETS, registry=r)
        self.first_words = Histogram("samvad_first_words_seconds",
                                     "From the learner's transcript to the vendor's first words (first delta, "
                                     "else the whole reply)", ["brain"], buckets=TURN_BUCKETS, registry=r)
        self.llm_calls = Counter("samvad_llm_calls", "LLM calls made for turns", ["brain"], registry=r)
        self.llm_retries = Counter("samvad_llm_retries", "LLM call retries", ["brain"], registry=r)
        self.fallbacks = Counter("samvad_brain_fallbacks", "Turns answered with a safe fallback line",
                                 ["brain"], registry=r)
        self.tokens = Counter("samvad_llm_tokens", "LLM tokens", ["brain", "kind"], registry=r)
        self.closes = Counter("samvad_ws_closes", "Session sockets closed by the server, by close code",
                              ["code"], registry=r)
        self.errors = Counter("samvad_ws_errors", "error events sent to clients, by error code", ["code"],
                              registry=r)
        self.loop_lag = Histogram("samvad_event_loop_lag_seconds", "How late the event loop ran a timer",
                                  buckets=LAG_BUCKETS, registry=r)
        self._children: dict[str, tuple[Any, ...]] = {}

    def _for(self, brain: str) -> tuple[Any, ...]:
        children = self._children.get(brain)
        if children is None:
            children = self._children[brain] = (
                self.turns.labels(brain), *(self.turn_seconds.labels(brain, step) for step in STEPS),
                self.first_words.labels(brain), self.llm_calls.labels(brain), self.llm_retries.labels(brain),
                self.fallbacks.labels(brain), self.tokens.labels(brain, "prompt"),
                self.tokens.labels(brain, "completion"),
            )
        return children

    def observe(self, envelope: Envelope) -> None:
        """Called for every event sent to a player connection; counts replies (one per turn)."""
        reply = envelope.event
        if reply.__class__ is not Reply:
            return
        assert isinstance(reply, Reply)
        timings = reply.timings
        if timings is None:
            return
        turns, queue, brain, validation, total, first, calls, retries, fallbacks, prompt, completion = \
            self._for(timings.brain)
        turns.inc()
        queue.observe(timings.queue_ms / 1000)
        brain.observe(timings.brain_ms / 1000)
        validation.observe(timings.validation_ms / 1000)
        total.observe(timings.total_ms / 1000)
        first_ms = timings.first_delta_ms if timings.first_delta_ms is not None else timings.total_ms
        first.observe(first_ms / 1000)
        if timings.llm_calls:
            calls.inc(timings.llm_calls)
            retries.inc(timings.retries)
            prompt.inc(timings.prompt_tokens)
            completion.inc(timings.completion_tokens)
        if reply.fallback:
            fallbacks.inc()

    def closed(self, code: int) -> None:
        self.closes.labels(str(code)).inc()

    def error(self, code: str) -> None:
        self.errors.labels(code).inc()

    async def probe_loop_lag(self) -> None:
        """Sleep LAG_TICK_S again and again; how late each wake-up is, is the loop's lag."""
        while True:
            start = time.perf_counter()
            await anyio.sleep(LAG_TICK_S)
            self.loop_lag.observe(max(0.0, time.perf_counter() - start - LAG_TICK_S))


class SamvadCollector(Collector):
    """Figures the server keeps anyway, read at scrape time."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        services = self.services
        registry = services.registry
        by_stage = Tally(actor.negotiation.stage.value for actor in registry.actors())
        stages = GaugeMetricFamily("samvad_sessions", "Live sessions in memory, by stage", labels=["stage"])
        for stage, n in sorted(by_stage.items()):
            stages.add_metric([stage], n)
        yield stages
        by_role = Tally(conn.role for conn in services.sockets)
        roles = GaugeMetricFamily("samvad_connections", "Open session sockets, by role", labels=["role"])
        for role in ("player", "spectator"):
            roles.add_metric([role], by_role.get(role, 0))
        yield roles
        stats = registry.statistics()
        for name, key, text in (("samvad_sessions_created", "created", "Sessions created"),
                                ("samvad_sessions_recovered", "recovered", "Sessions rebuilt from Neo4j"),
                                ("samvad_sessions_evicted", "evicted", "Sessions evicted from memory")):
            yield CounterMetricFamily(name, text, value=stats[key])
        mirror: dict[str, Any] = getattr(services.mirror, "statistics", dict)()
        yield GaugeMetricFamily("samvad_mirror_queue_depth", "Changes waiting to be written to Neo4j",
                                value=float(mirror.get("queue_depth", 0) or 0))
        yield GaugeMetricFamily("samvad_mirror_lag_seconds", "Submit-to-durable time of recent changes (p99)",
                                value=float(mirror.get("lag_p99_ms", mirror.get("lag_ms", 0)) or 0) / 1000)
        yield CounterMetricFamily("samvad_mirror_batches", "Mirror transactions committed",
                                  value=float(mirror.get("batches", 0) or 0))
        yield CounterMetricFamily("samvad_mirror_changes_written", "Changes written to Neo4j (batch sizes sum)",
                                  value=float(getattr(services.mirror, "rows", 0) or 0))
        yield CounterMetricFamily("samvad_mirror_failures", "Mirror transactions that failed (retried)",
                                  value=float(mirror.get("failures", 0) or 0))
        cluster = services.cluster
        if cluster is not None:
            c = cluster.statistics()
            yield GaugeMetricFamily("samvad_leases", "Session leases this node holds", value=c["leases"])
            yield GaugeMetricFamily("samvad_node_draining", "1 while this node drains", value=int(c["draining"]))
            for name, key, text in (
                    ("samvad_lease_acquisitions", "acquired", "Leases taken"),
                    ("samvad_lease_takeovers", "takeovers", "Leases taken from another node"),
                    ("samvad_leases_lost", "lost", "Leases found stolen or fenced (the session moved)"),
                    ("samvad_lease_handovers", "handed_over", "Leases handed to another node"),
                    ("samvad_lease_renewals", "renewals", "Batched lease renewal transactions"),
                    ("samvad_lease_renewal_failures", "renewal_failures", "Lease renewals that failed"),
                    ("samvad_fenced_changes", "fenced_changes", "Mirror changes Neo4j refused for a stale epoch")):
                yield CounterMetricFamily(name, text, value=c[key])


def install(services: Services) -> Metrics:
    metrics = Metrics()
    metrics.registry.register(SamvadCollector(services))
    return metrics


async def metrics_endpoint(request: Request) -> Response:
    services: Services = request.app.state.services
    metrics: Metrics | None = getattr(request.app.state, "metrics", None)
    if metrics is None:
        return error_response(404, "not_found", "metrics are off (METRICS=false)")
    key = services.settings.METRICS_KEY or services.settings.ADMIN_KEY
    if not services.tokens.check_admin(admin_credential(request), key):
        return error_response(401, "unauthorized", "the metrics key (METRICS_KEY, else ADMIN_KEY) is required")
    body = await anyio.to_thread.run_sync(generate_latest, metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def metrics_routes() -> list[BaseRoute]:
    return [Route("/metrics", metrics_endpoint, methods=["GET"])]
