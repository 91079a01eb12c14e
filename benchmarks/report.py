"""The performance report of issue #33: every figure beside its target, the baselines in the same run.

    python -m benchmarks.report [--quick] [--only rule,life,llm,memory,pauses,voice]
                                [--baseline 3ba1848] [--baseline-dir DIR] [--remove-baseline]
                                [--neo4j-uri URI | --no-neo4j] [--docs]

One sitting, one JSON (artifacts/performance-report.json) and one Markdown table
(artifacts/performance-report.md); with --docs the table also replaces the marked block in
docs/performance.md and README.md, which quote it. Every figure names the runs it came from, and
each run records what it was (scale, settings, start and end), so a figure is never read apart
from its run. The machine is shared: the rule ratio is taken within pairs of runs alternated in
this sitting, and a p99 target is judged on the median of its runs.

The runs (--quick scales each down, and says so in the report; its verdicts are a smoke test,
not the issue's):

* rule: scenario b's Samvad half (`samvad bots --sessions 1000 --think 1000 --paced --duration
  60` against `samvad serve` with benchmarks/load.py's environment, LOG_LEVEL=INFO), three pairs,
  the baseline commit and this checkout alternating. The baseline is checked out into a git
  worktree of its own (--baseline-dir, kept for the next report unless --remove-baseline) with its
  own virtualenv (its scripts/setup.sh), and plays its own bots (the current bots speak protocol
  details the baseline does not know). Server CPU per turn, its ratio, p99, errors.
* life: the fixed cost of a session on its own: a named learner's session created over HTTP,
  its socket upgraded, the welcome, a `stop` command, the `session.ended` and `session.report`
  frames (the report and the learner's profile are made then), the socket closed; server CPU per
  session. The same server's RSS before and after gives the memory of an ended session kept for
  its report. The server keeps an ended session as a compact record after a grace of
  LIFE_GRACE_S (SESSION_ENDED_GRACE_SECONDS, 2 s by default), and both figures wait for it: at
  churn, nearly every ended session a server holds is past its grace, and each is swapped once.
* llm: `python -m benchmarks.capacity` at N=1,000 three times streamed, once at N=2,000, and once
  at N=1,000 with --no-stream: first-words overhead p99, errors, and server CPU per turn against
  the fake model's in the same step.
* memory: benchmarks/load.py's scenario d (5,000 sessions, each with an idle player socket) and
  the RSS of `samvad serve` just started, with what each dependency adds when imported.
* pauses: benchmarks/gc_pauses.py's `gc.callbacks` timer in the server through scenario b's load
  for 20 minutes with the planned full collection at its default period, so that it is included.
* voice: `python -m benchmarks.voice_turn` (by sentence): server CPU per spoken turn, overhead p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import (  # noqa: E402
    PY,
    Proc,
    env_for,
    free_port,
    idle_rss,
    raise_fd_limit,
    wait_http,
)
from benchmarks.report_figures import Runs, figures, markdown, quote_in  # noqa: E402

ARTIFACTS = ROOT / "artifacts"
BASELINE = "3ba1848"
# Reference values of figures whose target is "it must fall": what they were when the issue was
# written (docs/performance.md, "A non-streamed turn at the same load": 3.44 ms of server CPU per
# non-streamed turn against the fake model's 0.32 ms, 2026-11-26).
DEFAULT_ONLY = "rule,life,llm,memory,pauses,voice"

# Each dependency `samvad serve` imports, in the order measured: the RSS a fresh interpreter
# gains when it imports it (and whatever it pulls in that is not in yet). What `server.app`
# imports first; then what the LLM brain imports when it is built (not with USE_MOCKS).
DEPENDENCIES = ("orjson", "msgpack", "anyio", "pydantic", "starlette", "uvicorn", "websockets", "uvloop",
                "httptools", "jwt", "numpy", "bm25s", "neo4j", "psutil", "schemas", "session", "brain", "voice",
                "server.app", "httpx2", "aiohttp", "openai", "tiktoken")


@dataclass(frozen=True)
class Build:
    """A checkout that a server is started from: this one, or the baseline's worktree."""

    name: str
    commit: str
    root: Path
    python: str


@dataclass(frozen=True)
class Scale:
    """How big each run is: the issue's sizes, or --quick's."""

    rule_sessions: int
    rule_duration: float
    rule_pairs: int
    life_sessions: int
    llm_sessions: int
    llm_large: int
    llm_duration: float
    llm_runs: int
    idle_sessions: int
    pause_sessions: int
    pause_duration: float
    pause_full_every: float
    voice_turns: int


FULL = Scale(rule_sessions=1000, rule_duration=60, rule_pairs=3, life_sessions=2000,
             llm_sessions=1000, llm_large=2000, llm_duration=60, llm_runs=3, idle_sessions=5000,
             pause_sessions=1000, pause_duration=1200, pause_full_every=600, voice_turns=30)
QUICK = Scale(rule_sessions=200, rule_duration=15, rule_pairs=1, life_sessions=300,
              llm_sessions=100, llm_large=200, llm_duration=15, llm_runs=1, idle_sessions=500,
              pause_sessions=1000, pause_duration=60, pause_full_every=25, voice_turns=6)


# ---------------------------------------------------------------------------- builds


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def current_build() -> Build:
    return Build("current", git("rev-parse", "--short", "HEAD"), ROOT, PY)


def baseline_build(commit: str, directory: Path | None) -> Build:
    """The baseline commit in a worktree of its own, with its own virtualenv (made once, then reused)."""
    full = git("rev-parse", commit)
    where = directory or Path(tempfile.gettempdir()) / f"samvad-baseline-{full[:7]}"
    if not (where / ".git").exists():
        print(f"== checking out {full[:7]} into {where}", flush=True)
        git("worktree", "add", "--detach", str(where), full)
    elif git("rev-parse", "HEAD", cwd=where) != full:
        raise RuntimeError(f"{where} holds another commit than {full[:7]}; name another --baseline-dir")
    if not (where / ".venv" / "bin" / "python").exists() or not list((where / ".venv").glob(".installed*")):
        print(f"== making the baseline's virtualenv ({where}/.venv)", flush=True)
        subprocess.run(["bash", "scripts/setup.sh"], cwd=where, check=True, stdout=subprocess.DEVNULL)
    return Build("baseline", full[:7], where, str(where / ".venv" / "bin" / "python"))


def remove_baseline(build: Build) -> None:
    git("worktree", "remove", "--force", str(build.root))


# ---------------------------------------------------------------------------- runs


def server_env(build: Build, extra: dict[str, str]) -> dict[str, str]:
    env = env_for({"LOG_LEVEL": "INFO", **extra})
    env["PYTHONPATH"] = str(build.root)
    return env


def start(build: Build, tag: str, extra: dict[str, str] | None = None) -> tuple[Proc, str]:
    port = free_port()
    proc = Proc([build.python, "-m", "server.cli", "serve", "--port", str(port)], server_env(build, extra or {}),
                ARTIFACTS / "report-logs" / f"server-{tag}.log", cwd=build.root)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health", proc, timeout=60)
    except Exception:
        proc.stop()
        raise
    return proc, base


def rule_run(build: Build, tag: str, scale: Scale) -> dict[str, Any]:
    """Scenario b's Samvad half: the build's own server and bots, paced at ~1 turn/s per session."""
    server, base = start(build, tag)
    out = ARTIFACTS / "report-logs" / f"bots-{tag}.json"
    out.unlink(missing_ok=True)
    try:
        cpu0 = server.cpu()
        subprocess.run([build.python, "-m", "server.cli", "bots", "--url", base, "--sessions",
                        str(scale.rule_sessions), "--think", "1000", "--paced", "--duration",
                        str(scale.rule_duration), "--quiet", "--json", str(out)],
                       cwd=build.root, env=server_env(build, {}), timeout=scale.rule_duration + 180,
                       capture_output=True, text=True)
        cpu = server.cpu() - cpu0
    finally:
        server.stop()
    played = json.loads(out.read_text())["samvad"]
    turns = max(1, int(played["turns"]))
    return {"commit": build.commit, "turns": turns, "turns_per_s": played["turns_per_s"],
            "latency_ms": {k: played["latency_ms"][k] for k in ("p50", "p95", "p99", "max")},
            "errors": played["errors"]["count"], "violations": played["violations"]["count"],
            "server_cpu_s": round(cpu, 2), "server_cpu_us_per_turn": round(cpu * 1e6 / turns, 1)}


LINES = ("Namaste bhaiya", "How much for the tomatoes?", "That is too much, I can pay 20 rupees",
         "Make it 25 rupees", "30 rupees, my final offer")


async def _lives(base: str, sessions: int, concurrency: int, turns: int = 0) -> dict[str, Any]:
    import orjson
    import websockets

    from clients.bots.transport import create_session, ws_base

    sem = asyncio.Semaphore(concurrency)
    failures: list[str] = []

    async def life(index: int) -> None:
        async with sem:
            try:
                created = await create_session(base, limit_s=30, learner_id=f"report-life-{index}")
                url = f"{ws_base(base)}{created['ws_url']}?token={created['player_token']}"
                async with websockets.connect(url, subprotocols=["samvad.v1.json"],  # type: ignore[list-item]
                                              max_size=None, open_timeout=30) as ws:
                    await asyncio.wait_for(ws.recv(), 30)  # the welcome
                    for n in range(turns):
                        tid = f"t{n}"
                        await ws.send(orjson.dumps({"type": "transcript", "id": tid, "text": LINES[n % len(LINES)]}))
                        while True:
                            frame = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
                            if frame["type"] == "reply" and frame.get("in_reply_to") == tid:
                                break
                            if frame["type"] == "session.ended":
                                raise RuntimeError("the session ended before its turns")
                    await ws.send(orjson.dumps({"type": "command", "id": "stop-1", "name": "stop"}))
                    seen: set[str] = set()
                    while not {"session.ended", "session.report"} <= seen:
                        seen.add(orjson.loads(await asyncio.wait_for(ws.recv(), 30))["type"])
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}"[:200])

    await asyncio.gather(*(life(i) for i in range(sessions)))
    return {"failures": len(failures), "first_failures": failures[:3]}


LIFE_GRACE_S = 2.0  # the life run's SESSION_ENDED_GRACE_SECONDS: its sessions are swapped within the run


def life_run(build: Build, scale: Scale) -> dict[str, Any]:
    """Sessions created, joined and ended with no turn: server CPU per session. Then as many that
    play five turns each before they stop: RSS per ended session, kept for its report."""
    server, base = start(build, "life", {"SESSION_ENDED_GRACE_SECONDS": str(LIFE_GRACE_S)})
    settle = 2 * LIFE_GRACE_S + 1.0  # the grace, then a sweep (every grace) to swap the last ended
    try:
        time.sleep(1.0)
        rss0 = server.rss_kib()
        asyncio.run(_lives(base, 50, 25, turns=len(LINES)))  # warm-up: every path once, not counted
        time.sleep(settle)
        cpu0 = server.cpu()
        bare = asyncio.run(_lives(base, scale.life_sessions, 25))
        time.sleep(settle)  # their swaps are part of their lives' cost
        cpu = server.cpu() - cpu0
        rss1 = server.rss_kib()
        played = asyncio.run(_lives(base, scale.life_sessions, 25, turns=len(LINES)))
        time.sleep(settle)
        rss2 = server.rss_kib()
        # What the server holds as the RSS is read: whether any ended session still waits as an
        # actor or keeps its replay ring (none should, past the settle), read after the RSS.
        held = httpx.get(f"{base}/health", timeout=10).json()["sessions"]
    finally:
        server.stop()
    n = scale.life_sessions
    return {"sessions": n, "failures": bare["failures"] + played["failures"],
            "first_failures": bare["first_failures"] + played["first_failures"],
            "server_cpu_us_per_session": round(cpu * 1e6 / n, 1), "base_rss_mib": round(rss0 / 1024, 1),
            "rss_before_played_mib": round(rss1 / 1024, 1), "rss_after_played_mib": round(rss2 / 1024, 1),
            "turns_per_played_session": len(LINES), "kib_per_ended_session": round((rss2 - rss1) / n, 2),
            "ended_grace_s": LIFE_GRACE_S,
            "held_at_rss": {k: held.get(k) for k in ("live", "ended_records", "ended_actors", "replays_in_grace")}}


def capacity_run(args: argparse.Namespace, sessions: int, duration: float, stream: bool) -> dict[str, Any]:
    cmd = [PY, "-m", "benchmarks.capacity", "--steps", str(sessions), "--duration", str(duration)]
    cmd += ["--neo4j-uri", args.neo4j_uri] if args.neo4j_uri else ["--no-neo4j"]
    if not stream:
        cmd.append("--no-stream")
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=duration + 600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-500:])
    step = json.loads((ARTIFACTS / "capacity.json").read_text())["steps"][0]
    return {"command": " ".join(cmd[1:]), "neo4j": bool(args.neo4j_uri), "sessions": sessions,
            "turns": step["turns"], "overhead_ms": step["overhead_ms"],
            "overhead_from_first_char_ms": step.get("overhead_from_first_char_ms", {}), "errors": step["errors"],
            "server_cpu_ms_per_turn": step["server_cpu_ms_per_turn"],
            "fake_cpu_ms_per_turn": step["fake_cpu_ms_per_turn"],
            "ratio": round(step["server_cpu_ms_per_turn"] / max(1e-9, step["fake_cpu_ms_per_turn"]), 2),
            "steady_ratio": (step.get("steady_cpu") or {}).get("ratio")}  # without the ramp (benchmarks.capacity)


def import_rss() -> dict[str, Any]:
    """RSS that each dependency adds when a fresh interpreter imports them one after another."""
    script = ("import importlib, json, sys, psutil\n"
              "p = psutil.Process()\n"
              "rss = lambda: p.memory_info().rss / 1048576\n"
              "out = {'interpreter': round(rss(), 1)}\n"
              "for name in sys.argv[1:]:\n"
              "    before = rss()\n"
              "    try:\n"
              "        importlib.import_module(name)\n"
              "    except ImportError:\n"
              "        continue\n"
              "    out[name] = round(rss() - before, 1)\n"
              "out['total'] = round(rss(), 1)\n"
              "print(json.dumps(out))\n")
    done = subprocess.run([PY, "-c", script, *DEPENDENCIES], cwd=ROOT, env=env_for(), capture_output=True,
                          text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def serve_rss(args: argparse.Namespace) -> dict[str, Any]:
    """RSS of `samvad serve` just started (2 s after /health), as the benchmarks run it (the rule
    brain, no mirror) and production-shaped (the LLM brain, the Neo4j mirror when --neo4j-uri)."""
    shapes = {"mocks": {"USE_MOCKS": "true"},
              "llm": {"USE_MOCKS": "false", "BRAIN": "openai", "OPENAI_API_KEY": "x",
                      "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # never called: nothing plays
                      **({"MIRROR": "neo4j", "NEO4J_URI": args.neo4j_uri} if args.neo4j_uri else {"MIRROR": "none"})}}
    out: dict[str, Any] = {"neo4j": bool(args.neo4j_uri)}
    for name, extra in shapes.items():
        server, _ = start(current_build(), f"rss-{name}", {"LOG_LEVEL": "WARNING", **extra})
        try:
            time.sleep(2.0)
            out[f"{name}_mib"] = round(server.rss_kib() / 1024, 1)
        finally:
            server.stop()
    return out


def memory_run(scale: Scale) -> dict[str, Any]:
    ns = argparse.Namespace(log_level="WARNING", uvicorn_ws=None, uvicorn_loop=None,
                            logs=str(ARTIFACTS / "report-logs"))
    return idle_rss(ns, scale.idle_sessions)


def pauses_run(scale: Scale) -> dict[str, Any]:
    from benchmarks.gc_pauses import one_run

    ns = argparse.Namespace(sessions=scale.pause_sessions, duration=scale.pause_duration,
                            logs=str(ARTIFACTS / "report-logs"))
    result = one_run(ns, "pauses", {"GC_FULL_EVERY_SECONDS": str(scale.pause_full_every)})
    result["full_every_s"] = scale.pause_full_every
    serving = [g for key, g in result["gc"].items() if key != "start-up"]
    result["max_pause_ms"] = max(g["max_ms"] for g in serving)
    result["max_pause_cpu_ms"] = max(g.get("cpu_max_ms", 0.0) for g in serving)
    return result


def voice_run(scale: Scale) -> dict[str, Any]:
    done = subprocess.run([PY, "-m", "benchmarks.voice_turn", "--turns", str(scale.voice_turns)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-500:])
    by_sentence = json.loads((ARTIFACTS / "voice_turn.json").read_text())["by_sentence"]
    return {"turns": scale.voice_turns, "server_cpu_ms_per_turn": by_sentence["server_cpu_ms_per_turn"],
            "overhead_ms": by_sentence["overhead_ms"], "first_audio_ms": by_sentence["first_audio_ms"]}


# ---------------------------------------------------------------------------- main


def write(args: argparse.Namespace, current: Build, scale: Scale, runs: Runs, *, finished: bool) -> str:
    """The JSON and the Markdown table of the runs so far (and the documents' quotes with --docs)."""
    command = "python -m benchmarks.report" + (" --quick" if args.quick else "") + \
        (f" --only {args.only}" if args.only != DEFAULT_ONLY else "") + (" --merge" if args.merge else "")
    report = {"sitting": {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                          "commit": current.commit, "baseline": args.baseline, "quick": args.quick,
                          "finished": finished, "merged_from": args.merged_from,
                          "cpus": os.cpu_count(), "python": sys.version.split()[0],
                          "scale": scale.__dict__},
              "figures": figures(runs), "runs": runs.runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    args.markdown.write_text(table)
    if args.docs:
        for doc in (ROOT / "docs" / "performance.md", ROOT / "README.md"):
            quote_in(doc, table)
    return table



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="every run scaled down: a smoke test")
    parser.add_argument("--only", default=DEFAULT_ONLY)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--baseline-dir", type=Path, default=None,
                        help="the baseline's worktree (default: <tmp>/samvad-baseline-<commit>, reused)")
    parser.add_argument("--remove-baseline", action="store_true", help="remove the baseline's worktree after")
    parser.add_argument("--neo4j-uri", default="", help="the capacity runs' Neo4j (default: none)")
    parser.add_argument("--docs", action="store_true", help="also quote the table in docs/performance.md and README.md")
    parser.add_argument("--merge", type=Path, default=None,
                        help="start from the runs of an earlier report (its JSON); runs made now replace theirs")
    parser.add_argument("--out", type=Path, default=ARTIFACTS / "performance-report.json")
    parser.add_argument("--markdown", type=Path, default=ARTIFACTS / "performance-report.md")
    args = parser.parse_args(argv)
    raise_fd_limit()
    only = set(args.only.split(","))
    scale = QUICK if args.quick else FULL
    ARTIFACTS.mkdir(exist_ok=True)
    current = current_build()
    runs = Runs(lambda: write(args, current, scale, runs, finished=False))
    merged: dict[str, Any] = {}
    if args.merge is not None:
        merged = json.loads(args.merge.read_text())
        for run_id, run in merged["runs"].items():  # each keeps the sitting it came from
            runs.runs[run_id] = {**run, "what": run["what"] if "from" in run else
                                 f"{run['what']} [from {merged['sitting']['command']}, {merged['sitting']['date']}]",
                                 "from": run.get("from", merged["sitting"]["date"])}
    args.merged_from = merged.get("sitting")
    baseline: Build | None = None
    try:
        if "rule" in only:
            baseline = baseline_build(args.baseline, args.baseline_dir)
            for pair in range(1, scale.rule_pairs + 1):
                # alternate which goes first, so that neither always follows the other
                order = (baseline, current) if pair % 2 else (current, baseline)
                for build in order:
                    runs.record(f"rule-{build.name}-{pair}",
                                f"{build.commit}: scenario b's Samvad half, {scale.rule_sessions} sessions, "
                                f"{scale.rule_duration:g} s, its own bots",
                                partial(rule_run, build, f"rule-{build.name}-{pair}", scale))
        if "life" in only:
            runs.record("life", f"{current.commit}: {scale.life_sessions} sessions created, joined and stopped "
                        "with no turn (CPU), then as many after five turns each (RSS)",
                        lambda: life_run(current, scale))
        if "llm" in only:
            neo4j = "with Neo4j" if args.neo4j_uri else "without Neo4j"
            for n in range(1, scale.llm_runs + 1):
                runs.record(f"llm-stream-{n}", f"benchmarks.capacity N={scale.llm_sessions} streamed, "
                            f"{scale.llm_duration:g} s, {neo4j}",
                            lambda: capacity_run(args, scale.llm_sessions, scale.llm_duration, True))
            runs.record("llm-large", f"benchmarks.capacity N={scale.llm_large} streamed, {scale.llm_duration:g} s, "
                        f"{neo4j}", lambda: capacity_run(args, scale.llm_large, scale.llm_duration, True))
            runs.record("llm-nostream", f"benchmarks.capacity N={scale.llm_sessions} --no-stream, "
                        f"{scale.llm_duration:g} s, {neo4j}",
                        lambda: capacity_run(args, scale.llm_sessions, scale.llm_duration, False))
        if "memory" in only:
            runs.record("memory-idle", f"benchmarks/load.py scenario d, {scale.idle_sessions} sessions each "
                        "with an idle player socket", lambda: memory_run(scale))
            runs.record("memory-imports", "RSS each dependency adds, imported in a fresh interpreter", import_rss)
            runs.record("memory-base", "RSS of `samvad serve` just started: the rule brain without a mirror, and "
                        f"the LLM brain {'with the Neo4j mirror' if args.neo4j_uri else 'without a mirror'}",
                        partial(serve_rss, args))
        if "pauses" in only:
            runs.record("pauses", f"gc_pauses: {scale.pause_sessions} sessions ~1 turn/s, "
                        f"{scale.pause_duration:g} s, planned full pass every {scale.pause_full_every:g} s",
                        lambda: pauses_run(scale))
        if "voice" in only:
            runs.record("voice", f"benchmarks.voice_turn --turns {scale.voice_turns}, by sentence",
                        lambda: voice_run(scale))
    finally:
        if baseline is not None and args.remove_baseline:
            remove_baseline(baseline)
    table = write(args, current, scale, runs, finished=True)
    print("\n" + table)
    print(f"written to {args.out} and {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
