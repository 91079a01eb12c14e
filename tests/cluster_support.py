"""A real cluster for tests and benchmarks: `scripts/cluster.sh` with three nodes and HAProxy on
loopback, sharing the test Neo4j (SAMVAD_TEST_NEO4J_URI), and what the tests ask of it."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, LiteralString, Protocol

import httpx

from clients.bots.personas import Lowballer, Persona, Polite, Rude, Walker
from clients.bots.resuming import ResumingClient
from server.mirror import Neo4jMirror
from tests.ci import need
from tests.neo4j_support import COUNT_TURNS_BY_CLIENT_ID

ROOT = Path(__file__).resolve().parents[1]
SECRET = "cluster-test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"

# Who owns each session, under which epoch; and what the last write of a Session was.
LEASES: LiteralString = """
UNWIND $ids AS id
MATCH (l:Lease {session_id: id})
OPTIONAL MATCH (s:Session {session_id: id})
RETURN id, l.owner AS owner, l.epoch AS epoch, s.version AS version, s.written_by AS written_by,
       s.written_epoch AS written_epoch, COUNT { (s)-[:HAS_TURN]->(:Turn) } AS turns
"""


def need_haproxy() -> None:
    """HAProxy where scripts/cluster.sh looks for it (PATH, else /usr/sbin, which a user's PATH may lack)."""
    found = os.environ.get("HAPROXY") or shutil.which("haproxy") or "/usr/sbin/haproxy"
    need(os.path.exists(found), "haproxy not found", "apt-get install haproxy (scripts/test.sh does)")


class Cluster:
    """`scripts/cluster.sh` in a folder of its own; nodes n1..n3 on port+1..+3, HAProxy on port."""

    def __init__(self, folder: Path, neo4j_uri: str, port: int = 19400, **settings: object) -> None:
        self.folder, self.port, self.neo4j_uri = folder, port, neo4j_uri
        self.env = {**os.environ, "CLUSTER_DIR": str(folder), "CLUSTER_PORT": str(port), "NEO4J_URI": neo4j_uri,
                    "SAMVAD_SECRET": SECRET, "BRAIN": "rules", "LOG_LEVEL": "INFO", "OPENAI_API_KEY": "",
                    "SESSION_CREATE_PER_SECOND": "1000", "SESSION_CREATE_BURST": "1000",
                    **{k: str(v) for k, v in settings.items()}}
        self.env.pop("ADMIN_KEY", None)

    def sh(self, *args: str, timeout: float = 180.0) -> str:
        done = subprocess.run(["bash", str(ROOT / "scripts/cluster.sh"), *args], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"cluster.sh {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}\n{self.logs()}")
        return done.stdout

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def node_url(self, n: int) -> str:
        return f"http://127.0.0.1:{self.port + n}"

    def pid(self, n: int) -> int:
        return int((self.folder / f"n{n}.pid").read_text())

    def signal(self, n: int, sig: signal.Signals) -> None:
        os.kill(self.pid(n), sig)

    def health(self, n: int) -> dict[str, Any]:
        return dict(httpx.get(f"{self.node_url(n)}/health", timeout=5.0).json())

    def wait_lb(self, n: int, state: str, limit: float = 15.0) -> None:
        """Wait until HAProxy reports node n in `state` (UP, DOWN)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            csv = httpx.get(f"http://127.0.0.1:{self.port + 99}/stats;csv", timeout=2.0).text
            for line in csv.splitlines():
                f = line.split(",")
                if f[:2] == ["nodes", f"n{n}"] and f[17] == state:
                    return
            time.sleep(0.1)
        raise AssertionError(f"HAProxy did not see n{n} {state} within {limit} s")

    def logs(self) -> str:
        parts = []
        for name in ("n1.log", "n2.log", "n3.log", "haproxy.log"):
            path = self.folder / name
            if path.exists():
                parts.append(f"--- {name}\n" + path.read_text(errors="replace")[-2000:])
        return "\n".join(parts)

    def stop(self) -> None:
        for n in (1, 2, 3):
            try:
                self.signal(n, signal.SIGCONT)
            except (OSError, ValueError):
                pass
        self.sh("stop", timeout=120)
        shutil.rmtree(self.folder / "neo4j", ignore_errors=True)


def check_clients(clients: list[ResumingClient], counts: dict[str, dict[str, int]]) -> tuple[int, int]:
    """Every client finished with every frame acknowledged and a contiguous view, and the graph holds
    each of its transcripts exactly once. Returns (acknowledged turns lost, turns applied twice)."""
    lost = duplicated = 0
    for client in clients:
        assert client.finished and client.unacked() == [], (client.tag, client.unacked(), client.closes)
        assert client.gaps == 0 and client.contiguous(), (client.tag, client.applied)
        stored = counts[client.session_id]
        for fid in client.transcripts:
            n = stored.get(fid, 0)
            lost += n == 0 and client.sent[fid].acked
            duplicated += max(0, n - 1)
    return lost, duplicated


# The bots' personas and items, one of each kind of haggle, for the cluster tests' load.
PERSONAS: list[tuple[type[Persona], str]] = [(Polite, "Tomato"), (Walker, "Apple"), (Lowballer, "Orange"),
                                             (Rude, "Pumpkin")]


class Front(Protocol):
    """Where bots reach a cluster: its load balancer's HTTP and WebSocket bases."""

    http: str
    ws: str


def bots(front: Front, n: int, run: str, think: float = 0.08, credential: str = "") -> list[ResumingClient]:
    """`n` resuming bots through `front`, the personas in turn (`credential`: for production nodes)."""
    return [ResumingClient(front.http, front.ws, persona(item), tag=f"{run}-{i}", think=think, item=item,
                           credential=credential)
            for i, (persona, item) in zip(range(n), itertools.cycle(PERSONAS), strict=False)]


async def leases(uri: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The lease rows of these sessions, by session id."""
    async with Neo4jMirror(uri) as mirror:
        return {r["id"]: r for r in await mirror.read(LEASES, ids=ids)}


async def stored_counts(uri: str, clients: list[ResumingClient]) -> dict[str, dict[str, int]]:
    """For each client's session, how many Turn nodes each of its transcript ids has in the graph."""
    async with Neo4jMirror(uri) as mirror:
        return {c.session_id: {r["id"]: r["turns"] for r in await mirror.read(
            COUNT_TURNS_BY_CLIENT_ID, ids=c.transcripts, session_id=c.session_id)} for c in clients}
