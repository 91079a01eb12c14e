"""Load benchmarks: the Samvad server, a bare echo server and the bots, each its own process.

    python benchmarks/load.py [--only a,b,c,d] [--quick] [--log-level INFO|WARNING]
                              [--uvicorn-ws auto|websockets|websockets-sansio]
                              [--uvicorn-loop auto|uvloop|asyncio] [--out artifacts/load.json]

Scenarios (every load goes to 127.0.0.1 only, and every run stops by itself):

  a  100 sessions at ~1 turn/s each (paced think 1000 ms) for 30 s
  b  1,000 sessions at ~1 turn/s each for 60 s, then the bare echo with the same N/think/duration
  c  saturated: think 0 with 64 sessions for 20 s, and the echo the same way (turns/s / rt/s)
  d  server RSS per idle session: a fresh server, 5,000 sessions created (RSS), then a
     WebSocket connected for each and left idle (RSS again)

Targets (from the issue): at 1,000 sessions zero errors, zero violations, p99 < 15 ms; saturated
turns/s >= 1/4 of the echo's round trips/s; < 30 KiB per idle session.
Results go to artifacts/load.json (or --out) and a table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PY = sys.executable
SECRET = "benchmark-secret-" + "s" * 40
FD_LIMIT = 65_536


def raise_fd_limit() -> None:
    """Children inherit this: 5,000 sockets each side need more than the default 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = FD_LIMIT if hard == resource.RLIM_INFINITY else min(FD_LIMIT, hard)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env_for(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMVAD_SECRET": SECRET, "USE_MOCKS": "true",
           "SESSION_CREATE_PER_SECOND": "100000", "SESSION_CREATE_BURST": "100000",
           "MAX_SESSIONS": "50000"}
    env.update(extra or {})
    return env


class Proc:
    """A child process that is always stopped, and whose CPU time can be read."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, cwd: Path = ROOT) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = log.open("wb")
        self.popen = subprocess.Popen(args, cwd=cwd, env=env, stdout=self.log,
                                      stderr=subprocess.STDOUT)
        self.ps = psutil.Process(self.popen.pid)

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def rss_kib(self) -> float:
        return float(self.ps.memory_info().rss) / 1024

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        self.log.close()


def wait_http(url: str, proc: Proc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"process exited early; see {proc.log.name}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def wait_port(port: int, proc: Proc, timeout: float = 15.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"process exited early; see {proc.log.name}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open within {timeout} s")


def start_server(args: argparse.Namespace, tag: str, extra: dict[str, str] | None = None
                 ) -> tuple[Proc, str]:
    port = free_port()
    env = env_for({"LOG_LEVEL": args.log_level, **(extra or {})})
    if args.uvicorn_ws:
        env["UVICORN_WS"] = args.uvicorn_ws
    if args.uvicorn_loop:
        env["UVICORN_LOOP"] = args.uvicorn_loop
    proc = Proc([PY, "-m", "server.cli", "serve", "--port", str(port)], env,
                Path(args.logs) / f"server-{tag}.log")
    base = f"http://127.0.0.1:{port}"
    wait_http(f"{base}/health", proc)
    return proc, base


def start_echo(args: argparse.Namespace) -> tuple[Proc, str]:
    port = free_port()
    proc = Proc([PY, "-m", "clients.bots.echo", "--port", str(port), "--duration", "900"],
                env_for(), Path(args.logs) / "echo.log")
    wait_port(port, proc)
    return proc, f"ws://127.0.0.1:{port}"


def run_bots(args: argparse.Namespace, tag: str, bot_args: list[str],
             watch: list[Proc], timeout: float) -> dict[str, Any]:
    """`samvad bots ...` as a process; returns its JSON plus CPU seconds of each watched proc."""
    out = Path(args.logs) / f"bots-{tag}.json"
    before = [p.cpu() for p in watch]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    machine = psutil.cpu_times()
    started = time.perf_counter()
    bots = subprocess.run([PY, "-m", "server.cli", "bots", *bot_args, "--quiet",
                           "--json", str(out)], cwd=ROOT, env=env_for(), timeout=timeout,
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if not out.exists():
        raise RuntimeError(f"bots wrote no results: {bots.stdout}\n{bots.stderr}")
    result: dict[str, Any] = json.loads(out.read_text())
    result["exit_code"] = bots.returncode
    result["cpu_s"] = {name: round(p.cpu() - b, 2)
                       for name, p, b in zip(("server", "echo"), watch, before, strict=False)}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu_s"]["bots"] = round(after.ru_utime + after.ru_stime - children.ru_utime
                                    - children.ru_stime, 2)
    result["wall_s"] = round(wall, 1)
    # This machine is shared: CPU that none of our processes used was someone else's.
    now = psutil.cpu_times()
    busy = (now.user + now.system + now.nice) - (machine.user + machine.system + machine.nice)
    ours = sum(v for v in result["cpu_s"].values())
    result["cpu_s"]["machine_busy"] = round(busy, 2)
    result["cpu_s"]["others"] = round(max(0.0, busy - ours), 2)
    result["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    print(bots.stdout.rstrip(), flush=True)
    return result


# ---------------------------------------------------------------------------- scenarios


def paced(args: argparse.Namespace, tag: str, sessions: int, duration: float,
          with_echo: bool) -> dict[str, Any]:
    print(f"== {tag}: {sessions} sessions at ~1 turn/s for {duration:g} s "
          f"(LOG_LEVEL={args.log_level})", flush=True)
    server, base = start_server(args, tag)
    echo = None
    try:
        bot_args = ["--url", base, "--sessions", str(sessions), "--think", "1000", "--paced",
                    "--duration", str(duration)]
        watch = [server]
        if with_echo:
            echo, echo_url = start_echo(args)
            bot_args += ["--echo-url", echo_url]
            watch.append(echo)
        timeout = duration * (2 if with_echo else 1) + 120
        return run_bots(args, tag, bot_args, watch, timeout)
    finally:
        server.stop()
        if echo is not None:
            echo.stop()


def saturated(args: argparse.Namespace, sessions: int, duration: float) -> dict[str, Any]:
    print(f"== c: saturated, {sessions} sessions, think 0, {duration:g} s", flush=True)
    server, base = start_server(args, "c", {"RATE_LIMIT_PER_SECOND": "100000",
                                            "RATE_LIMIT_BURST": "100000"})
    echo, echo_url = start_echo(args)
    try:
        bot_args = ["--url", base, "--sessions", str(sessions), "--think", "0",
                    "--duration", str(duration), "--echo-url", echo_url]
        return run_bots(args, "c", bot_args, [server, echo], duration * 2 + 120)
    finally:
        server.stop()
        echo.stop()


async def _idle_sessions(base: str, n: int, server: Proc) -> dict[str, Any]:
    from clients.bots.runner import create_session, open_socket, ws_base

    sem = asyncio.Semaphore(64)
    created: list[dict[str, Any]] = []

    async def make() -> None:
        async with sem:
            created.append(await create_session(base, limit_s=30))

    rss0 = server.rss_kib()
    t0 = time.perf_counter()
    await asyncio.gather(*(make() for _ in range(n)))
    create_s = time.perf_counter() - t0
    await asyncio.sleep(1.0)
    rss1 = server.rss_kib()
    sockets = []

    async def attach(c: dict[str, Any]) -> None:
        async with sem:
            url = f"{ws_base(base)}{c['ws_url']}?token={c['player_token']}"
            ws = await open_socket(url, "samvad.v1.json", limit_s=30)
            await asyncio.wait_for(ws.recv(), 30)  # the welcome
            sockets.append(ws)

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(attach(c) for c in created))
        connect_s = time.perf_counter() - t0
        await asyncio.sleep(2.0)
        rss2 = server.rss_kib()
        from clients.bots.runner import http_request

        status, body = await http_request(base, "GET", "/health")
        health = json.loads(body) if status == 200 else {}
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    return {
        "sessions": n,
        "rss_before_kib": round(rss0), "rss_sessions_kib": round(rss1),
        "rss_sessions_and_sockets_kib": round(rss2),
        "kib_per_session_no_socket": round((rss1 - rss0) / n, 2),
        "kib_per_idle_session_with_socket": round((rss2 - rss0) / n, 2),
        "kib_per_socket": round((rss2 - rss1) / n, 2),
        "create_s": round(create_s, 2), "connect_s": round(connect_s, 2),
        "connections_reported": health.get("connections"),
    }


def idle_rss(args: argparse.Namespace, n: int) -> dict[str, Any]:
    print(f"== d: RSS per idle session ({n} sessions, then {n} sockets)", flush=True)
    server, base = start_server(args, "d", {"LOG_LEVEL": "WARNING"})
    try:
        time.sleep(1.0)
        try:
            import uvloop

            return uvloop.run(_idle_sessions(base, n, server))
        except ImportError:
            return asyncio.run(_idle_sessions(base, n, server))
    finally:
        server.stop()


# ---------------------------------------------------------------------------- report


def row(name: str, r: dict[str, Any]) -> str:
    s = r.get("samvad", {})
    e = r.get("echo", {})
    lat = s.get("latency_ms", {})
    cpu = r.get("cpu_s", {})
    parts = [f"{name:<22}", f"turns/s {s.get('turns_per_s', 0):>8}",
             f"p50 {lat.get('p50')} p95 {lat.get('p95')} p99 {lat.get('p99')} "
             f"max {lat.get('max')} ms",
             f"errors {s.get('errors', {}).get('count')}",
             f"violations {s.get('violations', {}).get('count')}",
             f"cpu s: server {cpu.get('server')} bots {cpu.get('bots')} "
             f"other processes {cpu.get('others')}"]
    late = s.get("generator_loop_late_ms")
    if late:  # the bots' own loop: a p99 here near the latency p99 means the bots were the limit
        parts.append(f"bots' loop late p99 {late['p99']} ms")
    if e:
        el = e["latency_ms"]
        parts.append(f"| echo rt/s {e['round_trips_per_s']} p50 {el['p50']} p95 {el['p95']} "
                     f"p99 {el['p99']} ms")
    if "ratio_turns_per_echo_rt" in r:
        parts.append(f"| ratio {r['ratio_turns_per_echo_rt']}")
    return "  ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="a,b,c,d")
    parser.add_argument("--quick", action="store_true", help="scaled down: a smoke run")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--uvicorn-ws", default=None)
    parser.add_argument("--uvicorn-loop", default=None)
    parser.add_argument("--sessions-c", type=int, default=64)
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "load.json"))
    parser.add_argument("--logs", default=str(ROOT / "artifacts" / "load-logs"))
    args = parser.parse_args()
    raise_fd_limit()
    only = set(args.only.split(","))
    q = args.quick
    results: dict[str, Any] = {
        "machine": {"cpus": psutil.cpu_count(), "python": sys.version.split()[0]},
        "settings": {"log_level": args.log_level, "uvicorn_ws": args.uvicorn_ws or "auto",
                     "uvicorn_loop": args.uvicorn_loop or "auto"},
    }
    if "a" in only:
        results["a_100_sessions"] = paced(args, "a", 20 if q else 100, 5 if q else 30, False)
    if "b" in only:
        results["b_1000_sessions"] = paced(args, "b", 100 if q else 1000, 8 if q else 60, True)
    if "c" in only:
        results["c_saturated"] = saturated(args, 16 if q else args.sessions_c, 5 if q else 20)
    if "d" in only:
        results["d_idle_rss"] = idle_rss(args, 500 if q else 5000)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print("\n== summary", flush=True)
    for key in ("a_100_sessions", "b_1000_sessions", "c_saturated"):
        if key in results:
            print(row(key, results[key]))
    if "d_idle_rss" in results:
        d = results["d_idle_rss"]
        print(f"{'d_idle_rss':<22}  {d['kib_per_idle_session_with_socket']} KiB per idle session "
              f"with socket, {d['kib_per_session_no_socket']} KiB without "
              f"(RSS {d['rss_before_kib']} -> {d['rss_sessions_kib']} -> "
              f"{d['rss_sessions_and_sockets_kib']} KiB)")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
