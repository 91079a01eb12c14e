"""Load bots: many learners playing personas against a Samvad server over real sockets.

Each bot loops until the run's duration is over: create a session over HTTP, connect with the
player token, send a `scene` holding its item, then play its persona move by move (`play.py`: a
transcript waits for the `reply` that answers it, then the bot thinks; the coaching personas'
commands, silences and barge-ins wait for their ack and event), until the session ends and its
report has come. After the end it sends one more transcript, which must get a closing reply, and
starts a new session if time remains. Every server frame goes through a `SessionChecker`, and the
runner's own checks (play.py) add to its violations; what the coaching personas exercised is
counted per persona (`coaching` in the summary).

Echo mode runs the same client machinery against a bare WebSocket echo server (`echo.py`): each
bot sends a small JSON frame and waits for it to come back. It is the baseline the Samvad figures
are compared with, measured by the same tool in the same run.

Everything is bounded: the run stops by itself after its duration (plus a short grace period for
turns in flight), and every wait has a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.exceptions import ConnectionClosed

from clients.bots.checker import SessionChecker
from clients.bots.coach_personas import ALL_PERSONAS, COACH_PERSONAS
from clients.bots.personas import LearnerView, scene_items
from clients.bots.play import SessionPlay
from clients.bots.steady import release, watch_loop_lag
from clients.bots.transport import BotError, Wire, close_kind, create_session, open_socket, ws_base
from clients.bots.transport import http_request as http_request  # re-exported (benchmarks/load.py)

DEFAULT_PERSONAS = ("polite", "lowballer", "walker", "rude")
COACHING_PERSONAS = tuple(COACH_PERSONAS)  # hinter, undoer, mumbler, silent, barger, sleeper, quitter
GRACE_SECONDS = 15.0  # after the duration, turns in flight get this long before being cancelled
KEPT_VIOLATIONS = 20


@dataclass
class RunConfig:
    url: str = "http://127.0.0.1:8000"  # the Samvad server (http) or the echo server (ws)
    sessions: int = 10
    personas: tuple[str, ...] = DEFAULT_PERSONAS
    think_ms: float = 500.0
    paced: bool = False  # think is the interval between turns (think minus the turn's latency)
    jitter: float = 0.1  # think time varies by ± this fraction
    duration_s: float = 10.0
    msgpack: bool = False
    items: tuple[str, ...] = ()  # empty: each persona's own choice from the scene's items
    scenario: str = "jaipur-bazaar"  # the scenario pack every session plays
    reply_timeout_s: float = 10.0
    connect_timeout_s: float = 10.0
    ramp_s: float | None = None  # None: min(5, sessions / 200)
    closing_check: bool = True  # after the end, one transcript must get a closing reply
    state_checks: bool = True  # after a hint or repeat, GET the session's state: it must be unchanged
    echo: bool = False
    seed: int = 1
    # Vouches for the bots' learner ids as a trusted backend does (Authorization: Bearer); a
    # development server without ADMIN_KEY needs none. Never written to the results.
    admin_key: str = field(default="", repr=False)
    learner_prefix: str = "bot-"  # bot n plays as learner `<prefix>n` (a class's learners, for one)


@dataclass
class RunStats:
    mode: str = "samvad"
    started: float = field(default_factory=time.perf_counter)
    elapsed_s: float = 0.0
    turns: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)  # the replies' timings.total_ms
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    violation_count: int = 0
    violations: list[str] = field(default_factory=list)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    coaching: dict[str, Counter[str]] = field(default_factory=dict)  # what each persona exercised
    sessions_started: int = 0
    sessions_completed: int = 0  # reached session.ended
    sessions_cut: int = 0  # still going when the duration ended
    closing_replies: int = 0
    live: int = 0
    frames: int = 0
    loop_late_ms: list[float] = field(default_factory=list)  # this process's own lateness (steady.py)

    def error(self, kind: str, detail: str = "") -> None:
        self.errors[kind] += 1
        if len(self.error_samples) < KEPT_VIOLATIONS:
            self.error_samples.append(f"{kind}: {detail}"[:300] if detail else kind)

    def absorb(self, checker: SessionChecker, *, complete: bool) -> None:
        if complete:  # after an error the turn's missing events are that error, not a violation
            checker.finish()
        self.frames += checker.frames
        if checker.count:
            self.violation_count += checker.count
            room = KEPT_VIOLATIONS - len(self.violations)
            self.violations.extend(checker.violations[:max(0, room)])

    def outcome(self, persona: str, outcome: str) -> None:
        self.outcomes.setdefault(persona, Counter())[outcome] += 1

    def exercised(self, persona: str, counts: Counter[str]) -> None:
        if counts:
            self.coaching.setdefault(persona, Counter()).update(counts)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        elapsed = self.elapsed_s or (time.perf_counter() - self.started)
        out: dict[str, Any] = {
            "mode": self.mode,
            "elapsed_s": round(elapsed, 3),
            "latency_ms": {
                "count": len(lat),
                "p50": percentile(lat, 50),
                "p95": percentile(lat, 95),
                "p99": percentile(lat, 99),
                "max": round(lat[-1], 3) if lat else None,
                "mean": round(sum(lat) / len(lat), 3) if lat else None,
            },
            "errors": {"count": self.error_count, "by_kind": dict(self.errors),
                       "samples": self.error_samples},
            "generator_loop_late_ms": lateness(self.loop_late_ms),
        }
        if self.mode == "echo":
            out["round_trips"] = self.turns
            out["round_trips_per_s"] = round(self.turns / elapsed, 2) if elapsed else 0.0
            return out
        server = sorted(self.server_ms)
        out.update({
            "server_total_ms": {"p50": percentile(server, 50), "p95": percentile(server, 95),
                                "p99": percentile(server, 99),
                                "max": round(server[-1], 3) if server else None},
            "turns": self.turns,
            "turns_per_s": round(self.turns / elapsed, 2) if elapsed else 0.0,
            "violations": {"count": self.violation_count, "first": self.violations},
            "outcomes": {p: dict(c) for p, c in sorted(self.outcomes.items())},
            "coaching": {p: dict(sorted(c.items())) for p, c in sorted(self.coaching.items())},
            "sessions_started": self.sessions_started,
            "sessions_completed": self.sessions_completed,
            "sessions_cut_by_duration": self.sessions_cut,
            "closing_replies": self.closing_replies,
            "frames": self.frames,
        })
        return out


def lateness(late_ms: list[float]) -> dict[str, Any]:
    ordered = sorted(late_ms)
    return {"count": len(ordered), "p50": percentile(ordered, 50), "p99": percentile(ordered, 99),
            "max": round(ordered[-1], 3) if ordered else None}


def percentile(ordered: list[float], pct: float) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    if not ordered:
        return None
    rank = max(0, min(len(ordered) - 1, int(-(-pct * len(ordered) // 100)) - 1))
    return round(ordered[rank], 3)


# ---------------------------------------------------------------------------- a bot


class Bot:
    def __init__(self, index: int, config: RunConfig, stats: RunStats, deadline: float) -> None:
        self.index = index
        self.config = config
        self.stats = stats
        self.deadline = deadline  # perf_counter time after which no new turn starts
        self.persona_name = config.personas[index % len(config.personas)]
        self.rng = random.Random(config.seed * 1_000_003 + index)
        self.wire = Wire(config.msgpack)
        self.ids = itertools.count(1)

    def time_left(self) -> bool:
        return time.perf_counter() < self.deadline

    async def think(self, latency_s: float) -> None:
        think = self.config.think_ms / 1000
        if think <= 0:
            return
        if self.config.jitter:
            think *= 1 + self.rng.uniform(-self.config.jitter, self.config.jitter)
        if self.config.paced:
            think -= latency_s
        think = min(think, self.deadline - time.perf_counter())
        if think > 0:
            await asyncio.sleep(think)

    async def run(self) -> None:
        while self.time_left():
            try:
                if self.config.echo:
                    await self.echo_loop()
                else:
                    await self.session()
            except BotError as exc:
                self.stats.error(exc.kind, exc.detail)
                await asyncio.sleep(min(0.5, max(0.0, self.deadline - time.perf_counter())))
            except ConnectionClosed as exc:
                self.stats.error(close_kind(exc), str(exc))
                await asyncio.sleep(min(0.5, max(0.0, self.deadline - time.perf_counter())))

    # ------------------------------------------------------------------ samvad

    async def session(self) -> None:
        config = self.config
        items = config.items or scene_items(config.scenario)
        spin = self.index // len(config.personas) + self.stats.sessions_started
        item = items[spin % len(items)]
        persona = ALL_PERSONAS[self.persona_name](item, config.scenario)
        created = await create_session(config.url, limit_s=config.reply_timeout_s,
                                       learner_id=f"{config.learner_prefix}{self.index}", scenario=config.scenario,
                                       credential=config.admin_key)
        self.stats.sessions_started += 1
        sid = created["session_id"]
        url = f"{ws_base(config.url)}{created['ws_url']}?token={created['player_token']}"
        checker = SessionChecker(session_id=sid)
        ws = await open_socket(url, self.wire.subprotocol, limit_s=config.connect_timeout_s)
        play = SessionPlay(ws=ws, wire=self.wire, checker=checker, persona=persona, view=LearnerView(),
                           ids=self.ids, base_url=config.url, created=created,
                           reply_timeout_s=config.reply_timeout_s, state_checks=config.state_checks,
                           think=self.think, time_left=self.time_left, on_turn=self.turned)
        self.stats.live += 1
        complete = False
        try:
            welcome = await play.wait(lambda f: f["type"] == "welcome", "welcome")
            if ws.subprotocol != self.wire.subprotocol:
                raise BotError("subprotocol", f"server chose {ws.subprotocol!r}")
            play.view = LearnerView.from_state(welcome["state"])
            scene_id = f"s{next(self.ids)}"
            await self.wire.send(ws, {"type": "scene", "id": scene_id, "object_grabbed": item})
            await play.ack(scene_id, "scene ack")
            if await play.run():
                self.stats.sessions_completed += 1
                self.stats.outcome(self.persona_name, checker.outcome or "?")
                if config.closing_check:
                    closing, _ = await play.turn("Ek aur baat, bhaiya?")
                    if closing["is_terminal"] is not True:
                        raise BotError("closing_reply", "a reply after the end is not terminal")
                    self.stats.closing_replies += 1
            else:
                # Cut by the duration: the last reply's mood/stage events may still be on their
                # way. A pong goes through the same outbound queue after them, so it is a barrier.
                ping_id = f"p{next(self.ids)}"
                await self.wire.send(ws, {"type": "ping", "id": ping_id})
                await play.wait(lambda f: f["type"] == "pong" and f["id"] == ping_id, "pong")
                self.stats.sessions_cut += 1
                self.stats.outcome(self.persona_name, "unfinished")
            complete = True
            await ws.close()
        except ConnectionClosed as exc:
            # A close we did not ask for. (ws.close() above does not raise this.)
            raise BotError(close_kind(exc), str(exc)) from None
        finally:
            self.stats.live -= 1
            self.stats.absorb(checker, complete=complete)
            self.stats.exercised(self.persona_name, play.counts)
            if ws.state.name != "CLOSED":
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.close(), 2.0)
            release(ws)

    def turned(self, reply: dict[str, Any], latency_s: float) -> None:
        """A turn was answered: its latency, and the server's own time for it."""
        self.stats.turns += 1
        self.stats.latencies_ms.append(latency_s * 1000)
        timings = reply.get("timings")
        if timings:
            self.stats.server_ms.append(timings["total_ms"])

    # ------------------------------------------------------------------ echo

    async def echo_loop(self) -> None:
        ws = await open_socket(self.config.url, None, limit_s=self.config.connect_timeout_s)
        self.stats.live += 1
        self.stats.sessions_started += 1
        try:
            while self.time_left():
                frame_id = f"e{next(self.ids)}"
                payload = {"type": "transcript", "id": frame_id, "text": "Bhaiya, ye kitne ka hai?"}
                sent = time.perf_counter()
                await self.wire.send(ws, payload)
                try:
                    async with asyncio.timeout(self.config.reply_timeout_s):
                        while True:
                            echoed = self.wire.decode(await ws.recv())
                            if echoed.get("id") == frame_id:
                                break
                except TimeoutError:
                    raise BotError("timeout_echo", "no echo") from None
                latency = time.perf_counter() - sent
                self.stats.turns += 1
                self.stats.latencies_ms.append(latency * 1000)
                await self.think(latency)
            await ws.close()
        finally:
            self.stats.live -= 1
            release(ws)


# ---------------------------------------------------------------------------- a run


async def run(config: RunConfig, *, progress: Callable[[RunStats], None] | None = None,
              progress_every: float = 1.0) -> RunStats:
    """Run the bots for `config.duration_s` (plus grace for turns in flight), then stop."""
    stats = RunStats(mode="echo" if config.echo else "samvad")
    if config.sessions <= 0:
        return stats
    start = time.perf_counter()
    stats.started = start
    deadline = start + config.duration_s
    ramp = config.ramp_s if config.ramp_s is not None else min(5.0, config.sessions / 200)

    async def launch(bot: Bot, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        await bot.run()

    bots = [Bot(i, config, stats, deadline) for i in range(config.sessions)]
    tasks = [asyncio.ensure_future(launch(b, ramp * i / config.sessions))
             for i, b in enumerate(bots)]
    reporter = None
    if progress is not None:
        async def report() -> None:
            while True:
                await asyncio.sleep(progress_every)
                progress(stats)

        reporter = asyncio.ensure_future(report())
    lag = asyncio.ensure_future(watch_loop_lag(stats.loop_late_ms))
    try:
        done, pending = await asyncio.wait(tasks, timeout=config.duration_s + GRACE_SECONDS)
        for task in pending:
            task.cancel()
        if pending:
            stats.error("cancelled_after_grace", f"{len(pending)} bots still busy")
            await asyncio.wait(pending, timeout=5.0)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                exc = task.exception()
                stats.error("bot_crashed", f"{type(exc).__name__}: {exc}")
    finally:
        lag.cancel()
        if reporter is not None:
            reporter.cancel()
    # Rates are over the run's duration: no turn starts after it, and the few still in flight
    # then are its own.
    stats.elapsed_s = min(time.perf_counter() - start, config.duration_s)
    return stats


def progress_line(stats: RunStats, *, stream: Any = None) -> None:
    elapsed = time.perf_counter() - stats.started
    rate = stats.turns / elapsed if elapsed > 0 else 0.0
    label = "rt" if stats.mode == "echo" else "turns"
    print(f"[{stats.mode}] {elapsed:6.1f}s live={stats.live:5d} {label}={stats.turns:7d} "
          f"{label}/s={rate:8.1f} errors={stats.error_count} violations={stats.violation_count}",
          file=stream or sys.stderr, flush=True)
