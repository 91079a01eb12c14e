"""`samvad serve` on `privates.CalmServer`: a once-a-second tick that a stop signal cuts short."""

from __future__ import annotations

import email.utils
import os
import signal
import subprocess
import sys
import tempfile
import time

import httpx

from tests.servers import ROOT, SECRET, free_port

# The server as `samvad serve` runs it, but with a tick of an hour: only the stop signal waking
# the main loop can end it within the test's patience.
_SERVE_WITH_A_SLOW_TICK = (
    "import sys; import privates; privates.TICK_S = 3600.0; "
    "from server.cli import main; sys.exit(main(['serve', '--port', sys.argv[1]]))"
)


def test_a_stop_signal_ends_the_server_without_waiting_for_the_next_tick() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMVAD_SECRET": SECRET, "LOG_LEVEL": "WARNING",
           "KNOWLEDGE_DIR": tempfile.mkdtemp(prefix="samvad-knowledge-")}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-c", _SERVE_WITH_A_SLOW_TICK, str(port)], cwd=ROOT,
                                env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, "the server exited before it answered /health"
                try:
                    health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "no /health within 30 s"
                    time.sleep(0.1)
            assert health.status_code == 200
            # The first tick set uvicorn's `date` header, as its own main loop does.
            sent = email.utils.parsedate_to_datetime(health.headers["date"]).timestamp()
            assert abs(sent - time.time()) < 60
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)  # an hour's tick would outlast this: the signal woke the loop
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log.seek(0)
        assert b"Traceback" not in log.read()
