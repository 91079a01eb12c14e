"""`samvad bots`: play negotiations against a running server and report throughput and latency.

    samvad bots --url http://127.0.0.1:8000 --sessions 100 --think 1000 --duration 30 \\
        [--personas polite,lowballer,walker,rude] [--echo-url ws://127.0.0.1:8765] \\
        [--msgpack] [--json artifacts/bots.json]

Personas: polite, lowballer, walker and rude haggle (the default); the coaching personas hinter,
undoer, mumbler, silent, barger, sleeper and quitter also use hints, undo, repeat, stop, unclear
speech, silences and barge-in (clients/bots/coach_personas.py). `--personas coach` plays all of
those, `--personas all` every persona.

The run's own cyclic garbage collector is paused while it plays (`--collector on` leaves it
running): its passes would otherwise count as the server's latency (clients/bots/steady.py). Each
summary reports how late the generator's own event loop woke (`generator_loop_late_ms`).

Exit status: 0 when the run had no errors and no invariant violations, 1 otherwise, 2 for bad
arguments. Only loopback or explicitly given URLs are used; the run stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clients.bots.coach_personas import ALL_PERSONAS
from clients.bots.runner import COACHING_PERSONAS, DEFAULT_PERSONAS, RunConfig, RunStats, progress_line, run
from clients.bots.steady import collector_paused

GROUPS = {"default": DEFAULT_PERSONAS, "coach": COACHING_PERSONAS, "all": (*DEFAULT_PERSONAS, *COACHING_PERSONAS)}


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _personas(value: str) -> tuple[str, ...]:
    names = tuple(name for given in _csv(value) for name in GROUPS.get(given, (given,)))
    unknown = [name for name in names if name not in ALL_PERSONAS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown personas {unknown}; known: {', '.join(ALL_PERSONAS)}, "
                                         f"or the groups {', '.join(GROUPS)}")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="samvad bots", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the Samvad server's base URL")
    p.add_argument("--sessions", type=int, default=10, help="concurrent bots (one session each)")
    p.add_argument("--personas", type=_personas, default=DEFAULT_PERSONAS,
                   help="comma-separated personas (or the groups default, coach, all), assigned round-robin")
    p.add_argument("--think", type=float, default=500.0,
                   help="think time in ms between a reply and the next line (0 = saturated)")
    p.add_argument("--paced", action="store_true",
                   help="treat --think as the interval between turns (think minus latency)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds to run")
    p.add_argument("--echo-url", default=None,
                   help="also measure a bare echo server (ws://...) with the same N/think/duration")
    p.add_argument("--echo-only", action="store_true", help="measure only the echo server")
    p.add_argument("--json", dest="json_path", default=None, help="write the results here")
    p.add_argument("--msgpack", action="store_true", help="speak samvad.v1.msgpack")
    p.add_argument("--items", type=_csv, default=(),
                   help="comma-separated items to grab, cycled (default: the scene's items)")
    p.add_argument("--reply-timeout", type=float, default=10.0, help="seconds to wait for a reply")
    p.add_argument("--ramp", type=float, default=None,
                   help="seconds over which bots start (default min(5, sessions/200))")
    p.add_argument("--no-closing-check", action="store_true",
                   help="skip the transcript after the end that must get a closing reply")
    p.add_argument("--no-state-checks", action="store_true",
                   help="skip the GET of the session's state after each hint and repeat")
    p.add_argument("--scenario", default="jaipur-bazaar", help="the scenario pack to play (GET /api/scenarios)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--admin-key", default=None,
                   help="vouch for the bots' learner ids as a trusted backend (default: $SAMVAD_ADMIN_KEY; "
                        "a development server without ADMIN_KEY needs none)")
    p.add_argument("--no-uvloop", action="store_true")
    p.add_argument("--collector", choices=("paused", "on"), default="paused",
                   help="this process's cyclic garbage collector during the run (default paused)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if args.sessions < 1 or args.duration <= 0 or args.think < 0:
        p.error("--sessions must be >= 1, --duration > 0 and --think >= 0")
    if args.echo_only and not args.echo_url:
        p.error("--echo-only needs --echo-url")
    return args


def raise_fd_limit(wanted: int) -> int:
    """Raise the soft open-files limit towards `wanted` (bounded by the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


async def run_all(args: argparse.Namespace) -> dict[str, Any]:
    config = RunConfig(
        url=args.url, sessions=args.sessions, personas=args.personas, think_ms=args.think,
        paced=args.paced, duration_s=args.duration, msgpack=args.msgpack, items=args.items,
        reply_timeout_s=args.reply_timeout, ramp_s=args.ramp,
        closing_check=not args.no_closing_check, seed=args.seed, scenario=args.scenario,
        state_checks=not args.no_state_checks,
        admin_key=args.admin_key if args.admin_key is not None else os.environ.get("SAMVAD_ADMIN_KEY", ""),
    )
    progress = None if args.quiet else progress_line
    result: dict[str, Any] = {"config": {k: v for k, v in asdict(config).items() if k not in ("echo", "admin_key")}}
    samvad: RunStats | None = None
    if not args.echo_only:
        samvad = await run(config, progress=progress)
        result["samvad"] = samvad.summary()
    if args.echo_url:
        from clients.bots.echo import run_baseline

        echo = await run_baseline(config, args.echo_url, progress=progress)
        result["echo"] = echo.summary()
        result["echo"]["url"] = args.echo_url
        if samvad is not None and result["echo"]["round_trips_per_s"]:
            result["ratio_turns_per_echo_rt"] = round(
                result["samvad"]["turns_per_s"] / result["echo"]["round_trips_per_s"], 4)
    return result


def report(result: dict[str, Any]) -> str:
    lines = []
    s = result.get("samvad")
    if s:
        lat = s["latency_ms"]
        lines.append(f"samvad: {s['turns']} turns in {s['elapsed_s']:.1f}s = {s['turns_per_s']}"
                     f" turns/s; latency ms p50={lat['p50']} p95={lat['p95']} p99={lat['p99']}"
                     f" max={lat['max']}")
        lines.append(f"  sessions started={s['sessions_started']} completed="
                     f"{s['sessions_completed']} cut={s['sessions_cut_by_duration']} "
                     f"closing replies={s['closing_replies']}")
        lines.append(f"  errors={s['errors']['count']} {s['errors']['by_kind']} "
                     f"violations={s['violations']['count']}")
        for v in s["violations"]["first"][:5]:
            lines.append(f"    violation: {v}")
        for e in s["errors"]["samples"][:5]:
            lines.append(f"    error: {e}")
        for persona, outcomes in s["outcomes"].items():
            lines.append(f"  {persona:<10} {outcomes}")
        for persona, counts in s.get("coaching", {}).items():
            lines.append(f"  {persona:<10} exercised {counts}")
        lines.append(_lag_line(s))
    e = result.get("echo")
    if e:
        lat = e["latency_ms"]
        lines.append(f"echo:   {e['round_trips']} round trips = {e['round_trips_per_s']} rt/s; "
                     f"latency ms p50={lat['p50']} p95={lat['p95']} p99={lat['p99']} "
                     f"max={lat['max']} errors={e['errors']['count']}")
        lines.append(_lag_line(e))
    if "ratio_turns_per_echo_rt" in result:
        lines.append(f"ratio turns/s / echo rt/s = {result['ratio_turns_per_echo_rt']}")
    return "\n".join(lines)


def _lag_line(summary: dict[str, Any]) -> str:
    lag = summary["generator_loop_late_ms"]
    return f"  generator loop late ms p50={lag['p50']} p99={lag['p99']} max={lag['max']}"


def failed(result: dict[str, Any]) -> bool:
    s = result.get("samvad")
    e = result.get("echo")
    bad = False
    if s is not None:
        bad = bad or s["errors"]["count"] > 0 or s["violations"]["count"] > 0 or s["turns"] == 0
    if e is not None:
        bad = bad or e["errors"]["count"] > 0
    return bad


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    raise_fd_limit(max(4096, args.sessions * 2 + 256))
    runner: Any = asyncio.run
    if not args.no_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            runner = uvloop.run
    with collector_paused() if args.collector == "paused" else contextlib.nullcontext():
        result = runner(run_all(args))
    result["config"]["collector"] = args.collector
    print(report(result), flush=True)
    if args.json_path:
        path = Path(args.json_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 1 if failed(result) else 0


if __name__ == "__main__":
    sys.exit(main())
