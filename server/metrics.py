"""Prometheus metrics at `GET /metrics` (prometheus-client), one registry per application.

Two kinds, chosen for their cost on the turn path:

- Figures the server already keeps (sessions by stage, connections by role, the mirror's queue, the
  leases) are read when Prometheus scrapes (`SamvadCollector`): nothing is done per turn for them.
- Per-turn figures are observed once per reply, on the player's connection (`Metrics.observe`):
  turns, the turn's pipeline steps (queue, brain, validation, total) per brain, first words, the LLM's
  calls, retries, fallbacks and tokens. A spoken turn's voice stages (docs/voice.md, "Per-stage
  timings") from its `speech` event (the end-of-turn wait; STT, per recogniser) and from the first
  `reply.audio` of its reply (TTS first byte and first audio, per voice). Closes and errors by code,
  and the event loop's lag. They are
  plain integers and lock-free bucket counts (`Tally`) on the event loop's thread, turned into
  Prometheus families only at scrape time (`TurnCollector`); benchmarks/metrics_cost.py measures it.

`/metrics` takes `METRICS_KEY` (else `ADMIN_KEY`) as a bearer; with neither set it is open in
development, as every admin route is, and closed (403) with `SAMVAD_ENV=production`. Names follow
Prometheus' conventions: base units in the name (`_seconds`), `_total` on counters;
`tests/test_metrics.py` checks every name.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from schemas.codec import Envelope
from schemas.frames import Reply, ReplyAudio, Speech
from server.config import Environment
from server.services import Services, bearer, error_response

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

TURN_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LAG_TICK_S = 1.0  # the loop-lag probe: how late a sleep of this long wakes up (each costs ~0.1 ms)
STEPS = ("queue", "brain", "validation", "total")
# The voice stages: a partial's text reused is a transcript in about a millisecond, an end-of-turn
# wait is 0.3-3.5 s (voice/turn_end.py), a first audio under a second is the target (issue #34).
VOICE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class Tally:
    """A histogram observed on the event loop's thread only: a bisect and two additions, no lock.

    prometheus-client's own Histogram takes a lock and walks its buckets on every observation (about
    0.5 us each, six per turn); this one is read by `TurnCollector` when Prometheus scrapes."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        out, running = [], 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, float(running)))
        return out


@dataclass(slots=True)
class BrainFigures:
    """One brain's per-turn figures (`Metrics.observe`)."""

    steps: dict[str, Tally]
    first_words: Tally
    turns: int = 0
    llm_calls: int = 0
    llm_retries: int = 0
    fallbacks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(slots=True)
class VoiceFigures:
    """The spoken turns' stages (`Metrics.observe`): the end-of-turn wait, and by backend the rest."""

    end_of_turn: Tally = field(default_factory=lambda: Tally(VOICE_BUCKETS))
    stt: dict[str, Tally] = field(default_factory=dict)
    tts_first_byte: dict[str, Tally] = field(default_factory=dict)
    first_audio: dict[str, Tally] = field(default_factory=dict)

    def heard(self, speech: Speech) -> None:
        if speech.end_of_turn_ms is not None:
            self.end_of_turn.observe(speech.end_of_turn_ms / 1000)
        if speech.stt_ms is not None:
            _tally(self.stt, speech.stt).observe(speech.stt_ms / 1000)

    def spoke(self, audio: ReplyAudio) -> None:
        timings = audio.timings
        assert timings is not None
        _tally(self.tts_first_byte, audio.tts).observe(timings.tts_first_byte_ms / 1000)
        _tally(self.first_audio, audio.tts).observe(timings.first_audio_ms / 1000)


def _tally(by: dict[str, Tally], backend: str) -> Tally:
    tally = by.get(backend)
    if tally is None:
        tally = by[backend] = Tally(VOICE_BUCKETS)
    return tally


class Metrics:
    """The per-turn figures, closes, errors and loop lag, and the registry that exports them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.brains: dict[str, BrainFigures] = {}
        self.voice = VoiceFigures()
        self.closes: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.loop_lag = Tally(LAG_BUCKETS)
        self.registry.register(TurnCollector(self))

    def _for(self, brain: str) -> BrainFigures:
        figures = self.brains.get(brain)
        if figures is None:
            figures = self.brains[brain] = BrainFigures({step: Tally(TURN_BUCKETS) for step in STEPS},
                                                        Tally(TURN_BUCKETS))
        return figures

    def observe(self, envelope: Envelope) -> None:
        """Called for every event sent to a player connection; counts replies (one per turn), and
        a spoken turn's `speech` and its reply's first audio."""
        reply = envelope.event
        if reply.__class__ is not Reply:
            if reply.__class__ is ReplyAudio:
                assert isinstance(reply, ReplyAudio)
                if reply.timings is not None:
                    self.voice.spoke(reply)
            elif reply.__class__ is Speech:
                assert isinstance(reply, Speech)
                self.voice.heard(reply)
            return
        assert isinstance(reply, Reply)
        timings = reply.timings
        if timings is None:
            return
        f = self._for(timings.brain)
        f.turns += 1
        steps = f.steps
        steps["queue"].observe(timings.queue_ms / 1000)
        steps["brain"].observe(timings.brain_ms / 1000)
        steps["validation"].observe(timings.validation_ms / 1000)
        steps["total"].observe(timings.total_ms / 1000)
        first_ms = timings.first_delta_ms if timings.first_delta_ms is not None else timings.total_ms
        f.first_words.observe(first_ms / 1000)
        if timings.llm_calls:
            f.llm_calls += timings.llm_calls
            f.llm_retries += timings.retries
            f.prompt_tokens += timings.prompt_tokens
            f.completion_tokens += timings.completion_tokens
        if reply.fallback:
            f.fallbacks += 1

    def closed(self, code: int) -> None:
        self.closes[str(code)] = self.closes.get(str(code), 0) + 1

    def error(self, code: str) -> None:
        self.errors[code] = self.errors.get(code, 0) + 1

    async def probe_loop_lag(self) -> None:
        """Sleep LAG_TICK_S again and again; how late each wake-up is, is the loop's lag."""
        while True:
            start = time.perf_counter()
            await anyio.sleep(LAG_TICK_S)
            self.loop_lag.observe(max(0.0, time.perf_counter() - start - LAG_TICK_S))


def _histogram(name: str, text: str, labels: list[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, text, labels=labels)


class TurnCollector(Collector):
    """`Metrics`' figures in the exposition format, built when Prometheus scrapes."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        turns = CounterMetricFamily("samvad_turns", "Vendor replies to learner turns", labels=["brain"])
        steps = _histogram("samvad_turn_duration_seconds", "Turn pipeline time per step", ["brain", "step"])
        first = _histogram("samvad_first_words_seconds", "From the learner's transcript to the vendor's first "
                           "words (the first delta, else the whole reply)", ["brain"])
        calls = CounterMetricFamily("samvad_llm_calls", "LLM calls made for turns", labels=["brain"])
        retries = CounterMetricFamily("samvad_llm_retries", "LLM call retries", labels=["brain"])
        fallbacks = CounterMetricFamily("samvad_brain_fallbacks", "Turns answered with a safe fallback line",
                                        labels=["brain"])
        tokens = CounterMetricFamily("samvad_llm_tokens", "LLM tokens", labels=["brain", "kind"])
        for brain, f in sorted(m.brains.items()):
            turns.add_metric([brain], f.turns)
            for step, tally in f.steps.items():
                steps.add_metric([brain, step], tally.buckets(), tally.total)
            first.add_metric([brain], f.first_words.buckets(), f.first_words.total)
            calls.add_metric([brain], f.llm_calls)
            retries.add_metric([brain], f.llm_retries)
            fallbacks.add_metric([brain], f.fallbacks)
            tokens.add_metric([brain, "prompt"], f.prompt_tokens)
            tokens.add_metric([brain, "completion"], f.completion_tokens)
        yield from (turns, steps, first, calls, retries, fallbacks, tokens)
        yield from _voice_families(m.voice)
        closes = CounterMetricFamily("samvad_ws_closes", "Session sockets closed by the server, by close code",
                                     labels=["code"])
        for code, n in sorted(m.closes.items()):
            closes.add_metric([code], n)
        yield closes
        errors = CounterMetricFamily("samvad_ws_errors", "error events sent to clients, by error code",
                                     labels=["code"])
        for code, n in sorted(m.errors.items()):
            errors.add_metric([code], n)
        yield errors
        lag = HistogramMetricFamily("samvad_event_loop_lag_seconds", "How late the event loop ran a timer")
        lag.add_metric([], m.loop_lag.buckets(), m.loop_lag.total)
        yield lag


def _voice_families(v: VoiceFigures) -> Iterator[Metric]:
    wait = _histogram("samvad_voice_end_of_turn_seconds", "Silence the server waited after the learner's "
                      "last speech before ending an open microphone's turn", [])
    wait.add_metric([], v.end_of_turn.buckets(), v.end_of_turn.total)
    yield wait
    for name, text, label, by in (
            ("samvad_voice_stt_seconds", "From the end of the learner's utterance to its transcript", "stt",
             v.stt),
            ("samvad_voice_tts_first_byte_seconds", "From asking the voice for the first sentence of a reply "
             "to a spoken turn to its first audio", "tts", v.tts_first_byte),
            ("samvad_voice_first_audio_seconds", "From the end of the learner's utterance to the vendor's first "
             "audio leaving for the player", "tts", v.first_audio)):
        family = _histogram(name, text, [label])
        for backend, tally in sorted(by.items()):
            family.add_metric([backend], tally.buckets(), tally.total)
        yield family


class SamvadCollector(Collector):
    """Figures the server keeps anyway, read at scrape time."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        services = self.services
        registry = services.registry
        by_stage = registry.by_stage()  # ended sessions kept as records included
        stages = GaugeMetricFamily("samvad_sessions", "Live sessions in memory, by stage", labels=["stage"])
        for stage, n in sorted((stage.value, n) for stage, n in by_stage.items()):
            stages.add_metric([stage], n)
        yield stages
        by_role = Counter(conn.role for conn in services.sockets)
        roles = GaugeMetricFamily("samvad_connections", "Open session sockets, by role", labels=["role"])
        for role in ("player", "spectator"):
            roles.add_metric([role], by_role.get(role, 0))
        yield roles
        stats = registry.statistics()
        for name, key, text in (("samvad_sessions_created", "created", "Sessions created"),
                                ("samvad_sessions_recovered", "recovered", "Sessions rebuilt from Neo4j"),
                                ("samvad_sessions_evicted", "evicted", "Sessions evicted from memory"),
                                ("samvad_sessions_evicted_for_room", "evicted_for_room",
                                 "Ended sessions evicted early to make room for new ones")):
            yield CounterMetricFamily(name, text, value=stats[key])
        mirror: dict[str, Any] = dict(services.mirror.statistics())
        yield GaugeMetricFamily("samvad_mirror_queue_depth", "Changes waiting to be written to Neo4j",
                                value=float(mirror.get("queue_depth", 0) or 0))
        yield GaugeMetricFamily("samvad_mirror_lag_seconds", "Submit-to-durable time of recent changes (p99)",
                                value=float(mirror.get("lag_p99_ms", mirror.get("lag_ms", 0)) or 0) / 1000)
        yield CounterMetricFamily("samvad_mirror_batches", "Mirror transactions committed",
                                  value=float(mirror.get("batches", 0) or 0))
        yield CounterMetricFamily("samvad_mirror_changes_written", "Changes written to Neo4j (batch sizes sum)",
                                  value=float(services.mirror.rows))
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
    metrics: Metrics | None = request.app.state.metrics  # set by create_app: None when METRICS=false
    if metrics is None:
        return error_response(404, "not_found", "metrics are off (METRICS=false)")
    settings = services.settings
    key = settings.METRICS_KEY or settings.ADMIN_KEY
    if not key and settings.SAMVAD_ENV is Environment.PRODUCTION:  # never open to the internet by default
        return error_response(403, "forbidden", "set METRICS_KEY (or ADMIN_KEY) to read /metrics in production")
    if key and not services.tokens.check_admin(bearer(request), key):  # no key at all: open, development only
        return error_response(401, "unauthorized", "the metrics key (METRICS_KEY, else ADMIN_KEY) is required")
    body = await anyio.to_thread.run_sync(generate_latest, metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def metrics_routes() -> list[BaseRoute]:
    return [Route("/metrics", metrics_endpoint, methods=["GET"])]
