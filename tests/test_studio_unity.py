"""The Unity C# client plays a culture authored in the studio (issue #35 item 3): published on one
`samvad serve` node, played by the console harness (clients/unity, compiled with Mono) on a second
node sharing Neo4j, which was running before the culture existed."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import anyio
import httpx
import pytest

from tests.neo4j_support import ServerProcess
from tests.test_browser_studio import AUTH, two_nodes
from tests.test_studio import shipped
from tests.test_unity_client import harness

__all__ = ["harness", "two_nodes"]  # fixtures: the harness built once by build.sh, two nodes on one Neo4j

pytestmark = [pytest.mark.neo4j, pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.unity
async def test_the_unity_harness_plays_a_culture_published_on_another_node(
        harness: Path, two_nodes: tuple[ServerProcess, ServerProcess]) -> None:
    """Published on the first node over the routes the studio page uses, played on the second."""
    first, second = two_nodes
    scenario = f"night-market-{uuid.uuid4().hex[:6]}"
    culture = {**shipped(), "scenario": scenario, "title": "The night market"}
    culture.pop("version", None)
    culture["vendor"] = {**culture["vendor"], "name": "Meena"}
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.post(f"{first.http}/api/scenarios", json=culture, headers=AUTH)).status_code == 201
        assert (await http.post(f"{first.http}/api/scenarios/{scenario}/publish", headers=AUTH)).status_code == 201
        token = (await http.post(f"{second.http}/api/learners/unity-night/token", headers=AUTH)).json()[
            "learner_token"]
    args = ["mono", str(harness), "--url", second.http, "--timeout", "30", "--scenario", scenario,
            "--learner-token", token]
    for line in ("Namaste bhaiya!", "Ye tamatar kitne ka hai?", "Bahut mehenga, 50 rupees?"):
        args += ["--say", line]
    run_ = await anyio.to_thread.run_sync(lambda: subprocess.run(args, capture_output=True, text=True, timeout=60,
                                                                 check=False))
    lines = [line for line in run_.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary line (exit {run_.returncode}):\n{run_.stdout}\n{run_.stderr}"
    summary = json.loads(lines[-1])
    assert run_.returncode == 0 and summary["ok"] is True, summary.get("failures")
    assert summary["scenario"] == scenario and len(summary["replies"]) == 3
    assert any("rupees" in reply for reply in summary["replies"]), summary["replies"]
