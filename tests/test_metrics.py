"""GET /metrics: what a turn adds, the names (Prometheus conventions), and the key that guards it."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import create, player, running_server

pytestmark = pytest.mark.anyio
KEY = "metrics-key-0123456789"



async def test_a_turn_shows_in_the_metrics_and_every_name_follows_prometheus_conventions() -> None:
    async with running_server(METRICS_KEY=KEY) as served, httpx.AsyncClient() as http:
        created = await create(served)
        async with await player(served, created) as c:
            await c.turn("t1", "Namaste, how much for tomatoes?")
            answer = await http.get(f"{served.base_url}/metrics", headers={"authorization": f"Bearer {KEY}"})
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(answer.text) for s in f.samples}
        assert samples[("samvad_turns_total", (("brain", "rules"),))] == 1
        for step in ("queue", "brain", "validation", "total"):
            assert samples[("samvad_turn_duration_seconds_count", (("brain", "rules"), ("step", step)))] == 1
        assert samples[("samvad_first_words_seconds_count", (("brain", "rules"),))] == 1
        assert samples[("samvad_connections", (("role", "player"),))] == 1
        assert sum(v for (name, _), v in samples.items() if name == "samvad_sessions") == 1
        assert samples[("samvad_sessions_created_total", ())] == 1
        assert ("samvad_mirror_queue_depth", ()) in samples
        for family in text_string_to_metric_families(answer.text):
            name = family.name
            if not name.startswith("samvad_"):
                continue  # prometheus-client's own (python_gc_*, process_*) are not registered here
            assert name == name.lower() and "__" not in name
            if family.type == "counter":
                assert all(s.name.endswith(("_total", "_created")) for s in family.samples), name
            if family.type == "histogram":
                assert name.endswith("_seconds"), name  # base unit in the name
            assert not name.endswith(("_ms", "_milliseconds")), name


async def test_metrics_need_their_key_else_the_admin_key_are_closed_in_production_and_can_be_off() -> None:
    async with running_server(METRICS_KEY=KEY, ADMIN_KEY="admin-" + "k" * 32) as served, httpx.AsyncClient() as http:
        assert (await http.get(f"{served.base_url}/metrics")).status_code == 401
        assert (await http.get(f"{served.base_url}/metrics",
                               headers={"authorization": "Bearer admin-" + "k" * 32})).status_code == 401
        assert (await http.get(f"{served.base_url}/metrics",
                               headers={"authorization": f"Bearer {KEY}"})).status_code == 200
    async with running_server(ADMIN_KEY="admin-" + "k" * 32) as served, httpx.AsyncClient() as http:
        assert (await http.get(f"{served.base_url}/metrics",
                               headers={"authorization": "Bearer admin-" + "k" * 32})).status_code == 200
    async with running_server(METRICS=False) as served, httpx.AsyncClient() as http:
        assert (await http.get(f"{served.base_url}/metrics")).status_code == 404
    async with running_server(SAMVAD_ENV="production", ADMIN_KEY="admin-" + "k" * 32) as served, \
            httpx.AsyncClient() as http:
        assert (await http.get(f"{served.base_url}/metrics")).status_code == 401  # no key: closed


def test_the_grafana_dashboard_queries_only_metrics_the_server_exports() -> None:
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    exported = set(re.findall(r'"(samvad_[a-z_]+)"', (root / "server/metrics.py").read_text()))
    dashboard = json.loads((root / "deploy/grafana-dashboard.json").read_text())
    queried = {re.sub(r"_(total|bucket|count|sum)$", "", name)
               for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"samvad_[a-z_]+", target["expr"])}
    assert queried and queried <= exported, queried - exported


async def test_drain_needs_a_cluster_and_metrics_need_their_key() -> None:
    """No cluster and no database needed: a single node refuses a drain, and /metrics wants its key."""
    async with running_server(ADMIN_KEY="k" * 32) as served, httpx.AsyncClient() as http:
        assert (await http.post(f"{served.base_url}/admin/drain")).status_code == 401
        drained = await http.post(f"{served.base_url}/admin/drain", headers={"authorization": f"Bearer {'k' * 32}"})
        assert drained.status_code == 409 and drained.json()["error"]["code"] == "not_clustered"
        assert (await http.get(f"{served.base_url}/metrics")).status_code == 401
        ok = await http.get(f"{served.base_url}/metrics", headers={"authorization": f"Bearer {'k' * 32}"})
        assert ok.status_code == 200 and "samvad_sessions" in ok.text
