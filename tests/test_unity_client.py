"""The Unity C# client (clients/unity) against the real server, compiled and run with Mono.

`clients/unity/build.sh` compiles the library and the console harness; the harness then plays a
polite negotiation to DEAL against a `samvad serve` process, aborting its socket twice on the way,
and prints a JSON summary. Without Mono the test is skipped, except in CI where it must run.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unity

ROOT = Path(__file__).resolve().parents[1]
UNITY = ROOT / "clients" / "unity"
HARNESS = UNITY / "bin" / "Harness.exe"


def _newtonsoft_present() -> bool:
    if os.environ.get("NEWTONSOFT_JSON_DLL"):
        return Path(os.environ["NEWTONSOFT_JSON_DLL"]).is_file()
    return bool(glob.glob("/usr/lib/cli/Newtonsoft.Json*/Newtonsoft.Json.dll"))


def _require_mono() -> None:
    missing = [tool for tool in ("mcs", "mono") if shutil.which(tool) is None]
    if not _newtonsoft_present():
        missing.append("Newtonsoft.Json.dll")
    if not missing:
        return
    reason = (f"the Unity client needs Mono: {', '.join(missing)} not found "
              "(apt-get install mono-devel libnewtonsoft-json-cil-dev)")
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def harness() -> Path:
    _require_mono()
    built = subprocess.run(["bash", str(UNITY / "build.sh")], capture_output=True, text=True,
                           timeout=120, check=False)
    assert built.returncode == 0, f"build.sh failed:\n{built.stdout}\n{built.stderr}"
    assert HARNESS.is_file()
    return HARNESS


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    env = {
        **os.environ,
        "SAMVAD_SECRET": "unity-client-test-secret-" + "x" * 24,
        "BRAIN": "rules",
        "MIRROR": "none",
        "LOG_LEVEL": "WARNING",
        "SAMVAD_ENV": "development",
    }
    log_path = tmp_path_factory.mktemp("unity-server") / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the server did not answer /health in 20 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_harness_haggles_to_a_deal_through_forced_reconnects(harness: Path, server_url: str) -> None:
    run = subprocess.run(["mono", str(harness), "--url", server_url, "--timeout", "40"],
                         capture_output=True, text=True, timeout=55, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary line (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    summary = json.loads(lines[-1])
    assert run.returncode == 0, f"harness failed: {summary.get('failures')}\n{run.stderr}"
    assert summary["ok"] is True and summary["failures"] == []

    assert summary["outcome"] == "deal"
    assert 0 <= summary["report_score"] <= 100  # the learner report reached the game
    assert summary["final_price"] is not None and summary["final_price"] < summary["first_quote"]
    assert summary["reconnects"] >= 1
    assert summary["refused_bad_token"] == 4401

    # No turn missed or doubled, and the stream applied as one contiguous run of seqs.
    assert summary["missed_turns"] == [] and summary["doubled_turns"] == []
    assert [int(entry.split(":")[0]) for entry in summary["dialogue"]] == list(range(1, summary["turns"] + 1))
    seq = summary["seq"]
    assert seq["contiguous"] is True
    assert seq["applied"] == seq["last"] - seq["welcome"]

    # The transcript whose ack and reply were lost went out twice and was applied once.
    assert summary["drop2"]["attempts"] == 2 and summary["drop2"]["duplicate"] is True
    assert summary["duplicates"] >= 1
    assert summary["drop1"]["attempts"] in (1, 2)

    # The spectator (token in the query string) saw the same stream.
    assert summary["spectator"]["last_seq"] == seq["last"]
    assert summary["spectator"]["replies"] == summary["turns"]
    assert summary["spectator"]["outcome"] == "deal"


TOURS = {
    "jaipur-bazaar": ["Namaste bhaiya!", "Ye tamatar kitne ka hai?", "Bahut mehenga, 50 rupees?"],
    "kyoto-antiques": ["Konnichiwa, sumimasen.", "Kono chawan wa ikura desu ka?", "17000 yen, onegaishimasu?"],
    "marrakech-souk": ["Salam alaikum, my friend!", "Bshhal hada fanous?", "Ghali bezzaf! 300 dirhams?"],
}


@pytest.mark.parametrize("pack", sorted(TOURS))
def test_the_unity_client_plays_every_scenario_pack(harness: Path, server_url: str, pack: str) -> None:
    args = ["mono", str(harness), "--url", server_url, "--timeout", "30", "--scenario", pack]
    for line in TOURS[pack]:
        args += ["--say", line]
    run = subprocess.run(args, capture_output=True, text=True, timeout=45, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary line (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    summary = json.loads(lines[-1])
    assert run.returncode == 0 and summary["ok"] is True, summary.get("failures")
    assert summary["scenario"] == pack and len(summary["replies"]) == len(TOURS[pack])
    assert summary["tips"] == len(TOURS[pack])
    currency = {"jaipur-bazaar": "rupees", "kyoto-antiques": "yen", "marrakech-souk": "dirhams"}[pack]
    assert any(currency in reply for reply in summary["replies"]), summary["replies"]
    assert summary["stopped"] == "stopped"  # Repeat() and Stop() went through the C# client
    assert summary["clarify"]  # a transcript at confidence 0.4 was asked again
