"""Stop and start the test Neo4j (scripts/neo4j.sh) for outage tests, with the running instance's port and data.

scripts/test.sh exports NEO4J_PORT and NEO4J_DATA_DIR; when they are missing (a developer exported only
SAMVAD_TEST_NEO4J_URI) the port comes from that URI and the data directory from the running launcher's
command line, so a restart never comes back on an empty database.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "neo4j.sh"
PID_FILE = ROOT / "var" / "neo4j.pid"


def _running_args() -> str:
    try:
        pid = PID_FILE.read_text().strip()
        # -ww: the whole line, whatever COLUMNS says (pytest sets it to the terminal's width)
        return subprocess.run(["ps", "-ww", "-p", pid, "-o", "args="], capture_output=True, text=True,
                              check=False).stdout
    except OSError:
        return ""


_known: dict[str, str] = {}


def instance_env() -> dict[str, str]:
    """NEO4J_PORT and NEO4J_DATA_DIR of the instance the tests use (remembered once found)."""
    if _known:
        return dict(_known)
    port = os.environ.get("NEO4J_PORT")
    if not port:
        uri = os.environ.get("SAMVAD_TEST_NEO4J_URI", "")
        port = str(urlparse(uri).port or 7687)
    data = os.environ.get("NEO4J_DATA_DIR")
    if not data:
        found = re.search(r"--data (\S+)", _running_args())
        if found is None:
            raise RuntimeError("set NEO4J_DATA_DIR (the running Neo4j's data directory) to stop and restart it")
        data = found.group(1)
    _known.update(NEO4J_PORT=port, NEO4J_DATA_DIR=data)
    return dict(_known)


def _run(command: str, timeout: float) -> None:
    env = {**os.environ, **instance_env()}
    done = subprocess.run(["bash", str(SCRIPT), command], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"neo4j.sh {command} failed ({done.returncode}): {done.stderr[-2000:]}")


def stop() -> None:
    """Stop Neo4j (SIGTERM, then SIGKILL as a last resort)."""
    _run("stop", 120)  # instance_env() reads the command line before the process is gone


def start() -> None:
    """Start Neo4j again on the same port and data directory; returns once Bolt answers."""
    _run("start", 240)


def running() -> bool:
    return subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, check=False).returncode == 0


def pid() -> int:
    """The running launcher's pid (from the pid file scripts/neo4j.sh writes)."""
    found = PID_FILE.read_text().strip()
    if not found.isdigit() or "neo4j-launcher" not in _running_args():
        raise RuntimeError(f"no running Neo4j launcher behind {PID_FILE}")
    return int(found)


def freeze() -> None:
    """SIGSTOP Neo4j: its sockets stay open and every request on them hangs (a stalled server, a VM pause)."""
    os.kill(pid(), signal.SIGSTOP)


def thaw() -> None:
    os.kill(pid(), signal.SIGCONT)
