"""What the Neo4j tests share: the test database's URI, a running mirror, and the server as a process.

The tests read SAMVAD_TEST_NEO4J_URI (scripts/test.sh starts Neo4j and exports it). Without it they
are skipped with the reason, except in CI, where a missing database fails them (tests/ci.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, LiteralString

import anyio
import httpx

from server.mirror import Neo4jMirror
from tests.ci import need

ROOT = Path(__file__).resolve().parents[1]
URI_ENV = "SAMVAD_TEST_NEO4J_URI"
SECRET = "test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"  # fixed, so tokens survive a restart

# Statements only the tests run (with `mirror.read`): counts that show what a run left in the graph.

COUNT_TURNS_BY_CLIENT_ID: LiteralString = """
MATCH (s:Session {session_id: $session_id})
UNWIND $ids AS id
RETURN id, COUNT { (s)-[:HAS_TURN]->(:Turn {client_id: id, role: 'user'}) } AS turns
"""

# Nodes and relationships of one session, counted: a replayed batch must leave every figure unchanged.
COUNT_SESSION_GRAPH: LiteralString = """
MATCH (s:Session {session_id: $session_id})
RETURN COUNT { (x:Session {session_id: $session_id}) } AS sessions,
       COUNT { (t:Turn {session_id: $session_id}) } AS turns,
       COUNT { (i:Item {session_id: $session_id}) } AS items,
       COUNT { (x:StageTransition {session_id: $session_id}) } AS transitions,
       COUNT { (s)-[:HAS_TURN]->() } AS has_turn,
       COUNT { (s)-[:HAS_TURN]->(:Turn)-[:FOLLOWED_BY]->() } AS followed_by,
       COUNT { (s)-[:HAS_TURN]->(:Turn)-[:ABOUT_ITEM]->() } AS about_item,
       COUNT { (s)-[:INVOLVES_ITEM]->() } AS involves_item,
       COUNT { (s)-[:STAGE_CHANGED]->() } AS stage_changed
"""


def neo4j_uri() -> str:
    uri = os.environ.get(URI_ENV, "")
    if uri:
        return uri
    need(False, f"{URI_ENV} is not set", "run scripts/test.sh, or start Neo4j with scripts/neo4j.sh and export "
         f"{URI_ENV}=bolt://127.0.0.1:<port>")
    raise AssertionError("unreachable: need() skips or fails")


@asynccontextmanager
async def running_mirror(uri: str, **options: Any) -> AsyncIterator[Neo4jMirror]:
    """A Neo4jMirror with its writer running; flushed and closed on the way out."""
    mirror = Neo4jMirror(uri, **options)
    async with anyio.create_task_group() as tg:
        await tg.start(mirror.run)
        try:
            yield mirror
        finally:
            tg.cancel_scope.cancel()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """`samvad serve` in a separate process on a loopback port, with the Neo4j mirror."""

    def __init__(self, log_path: Path, *, port: int | None = None, **settings: object) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.settings = {
            "HOST": "127.0.0.1", "BRAIN": "rules", "MIRROR": "neo4j", "SAMVAD_SECRET": SECRET,
            "LOG_LEVEL": "INFO", "OPENAI_API_KEY": "", "SAMVAD_ENV": "development",
            **{k: str(v) for k, v in settings.items()},
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        env = {**os.environ, **self.settings}
        if "ADMIN_KEY" not in self.settings:
            env.pop("ADMIN_KEY", None)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--port", str(self.port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()[-3000:]}")
            try:
                if httpx.get(f"{self.http}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server did not answer /health within {timeout} s:\n{self.log()[-3000:]}")

    def kill9(self) -> None:
        """Crash it: SIGKILL, no flush, no goodbye."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self, timeout: float = 30.0) -> None:
        """Shut down gracefully (SIGTERM: close sockets, flush the mirror)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def health(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.http}/health", timeout=5.0).json())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


async def wait_for(condition: Any, limit: float, what: str, every: float = 0.05) -> None:
    """Poll `condition()` (sync) until true; fail with `what` after `limit` seconds."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit} s waiting for {what}")
        await anyio.sleep(every)
