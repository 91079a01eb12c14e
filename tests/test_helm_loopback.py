"""The chart's HAProxy configuration in front of real nodes, on loopback: what a pod drain does on
Kubernetes, without Kubernetes.

`helm template` renders ci/aura-values.yaml (three nodes, a ring of maxReplicas lines) with a few
overrides: the test Neo4j, short leases, loopback binds, and `haproxy.resolvers.nameservers` pointed
at `PodDns` (tests/k8s_support.py), which answers for the pods' names as the cluster's DNS would:
pod N is 127.0.0.(N+1). Debian's HAProxy runs the rendered configuration; each node is `samvad serve`
with the environment its pod would get from the rendered StatefulSet (the Secret's values made here).
Bots play through HAProxy; pod 1 runs its rendered preStop command, then gets SIGTERM and comes back,
as in a rolling update. Nothing acknowledged is lost, nothing is applied twice, its clients got 4307."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.cluster_support import bots, check_clients, leases, need_haproxy, stored_counts
from tests.k8s_support import (
    CHART,
    ROOT,
    PodDns,
    free_port_on,
    haproxy_config,
    helm,
    one,
    pod_env,
    render,
    server_container,
)
from tests.neo4j_support import wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.neo4j, pytest.mark.slow]

NODES = 3
MAX_REPLICAS = 4  # one line of the ring has no pod: its name does not resolve
SECRETS = {"SAMVAD_SECRET": "loopback-secret-0123456789-abcdefghijklmnopqrstuvwxyz",
           "ADMIN_KEY": "loopback-admin-key-0123456789-abcdefghij", "NEO4J_PASSWORD": "unused"}
SESSIONS = 15


class LoopbackCluster:
    """The rendered chart's pods as processes: node N on 127.0.0.(N+1), HAProxy on 127.0.0.1."""

    def __init__(self, folder: Path, docs: list[dict[str, Any]], port: int, lb_port: int, stats_port: int) -> None:
        self.folder, self.docs, self.port = folder, docs, port
        self.http, self.ws = f"http://127.0.0.1:{lb_port}", f"ws://127.0.0.1:{lb_port}"
        self.stats = f"http://127.0.0.1:{stats_port}/stats;csv"
        self.container = server_container(docs)
        self.name = one(docs, "StatefulSet")["metadata"]["name"]
        self.nodes: dict[int, subprocess.Popen[bytes]] = {}
        self.haproxy: subprocess.Popen[bytes] | None = None

    def pod(self, n: int) -> str:
        return f"{self.name}-{n}"

    def address(self, n: int) -> str:
        return f"127.0.0.{n + 1}"

    def env(self, n: int) -> dict[str, str]:
        """The pod's environment from the rendered StatefulSet; HOST is the pod's IP here (on
        Kubernetes 0.0.0.0 in the pod's own network), and the tools' PATH comes first."""
        keep = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
        env = {**keep, **pod_env(self.container, self.pod(n), SECRETS), "HOST": self.address(n)}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        return env

    def start_node(self, n: int) -> None:
        with (self.folder / f"{self.pod(n)}.log").open("ab") as log:  # the child keeps its own copy
            self.nodes[n] = subprocess.Popen(self.container["command"], env=self.env(n), cwd=ROOT, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)

    def start_haproxy(self) -> None:
        config = self.folder / "haproxy.cfg"
        config.write_text(haproxy_config(self.docs))
        with (self.folder / "haproxy.log").open("ab") as log:
            self.haproxy = subprocess.Popen(["/usr/sbin/haproxy", "-db", "-f", str(config)], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def pre_stop(self, n: int) -> subprocess.Popen[bytes]:
        """The pod's preStop hook, as the kubelet runs it: the rendered command in the pod's environment."""
        command = self.container["lifecycle"]["preStop"]["exec"]["command"]
        return subprocess.Popen(command, env=self.env(n), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def lb_state(self) -> dict[str, str]:
        csv = httpx.get(self.stats, timeout=2.0).text
        return {f[1]: f[17] for f in (line.split(",") for line in csv.splitlines()) if f[0] == "nodes"}

    def wait_lb(self, n: int, state: str, limit: float = 30.0) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                if self.lb_state().get(self.pod(n)) == state:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"HAProxy did not see {self.pod(n)} {state} within {limit} s:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-2000:]
                         for p in sorted(self.folder.glob("*.log")))

    def stop(self) -> None:
        for proc in [*self.nodes.values(), *([self.haproxy] if self.haproxy else [])]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.nodes.values(), *([self.haproxy] if self.haproxy else [])]:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def loopback(neo4j_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    need_haproxy()
    folder = tmp_path_factory.mktemp("helm-loopback")
    port = free_port_on([f"127.0.0.{n + 1}" for n in range(NODES)])
    lb_port = stats_port = port
    while len({port, lb_port, stats_port}) < 3:  # three distinct ports (each probe frees its port)
        lb_port, stats_port = free_port_on(["127.0.0.1"]), free_port_on(["127.0.0.1"])
    names = {f"samvad-{n}.samvad-headless.default.svc.cluster.local": f"127.0.0.{n + 1}" for n in range(NODES)}
    with PodDns(names) as dns:
        docs = render(helm(), CHART / "ci/aura-values.yaml", tmp=folder, values={
            "port": port, "maxReplicas": MAX_REPLICAS, "neo4j": {"uri": neo4j_uri},
            "trustedProxies": "127.0.0.1/32",
            "cluster": {"leaseSeconds": 3, "leaseRenewSeconds": 1, "leaseWaitSeconds": 12,
                        "drainGraceSeconds": 2.5},
            "env": {"BRAIN": "rules", "LOG_LEVEL": "INFO", "MIRROR_FLUSH_MS": "100",
                    "SESSION_CREATE_PER_SECOND": "1000", "SESSION_CREATE_BURST": "1000"},
            "haproxy": {"listen": {"address": "127.0.0.1", "port": lb_port},
                        "stats": {"address": "127.0.0.1", "port": stats_port},
                        "resolvers": {"nameservers": [dns.address]}}})
        cluster = LoopbackCluster(folder, docs, port, lb_port, stats_port)
        try:
            for n in range(NODES):
                cluster.start_node(n)
            cluster.start_haproxy()
            for n in range(NODES):
                cluster.wait_lb(n, "UP", limit=90)
            yield cluster
        finally:
            cluster.stop()





def test_the_rendered_ring_resolves_the_pods_and_leaves_the_missing_ordinal_out(loopback: LoopbackCluster) -> None:
    states = loopback.lb_state()
    assert [states[loopback.pod(n)] for n in range(NODES)] == ["UP"] * NODES
    assert states[loopback.pod(NODES)].startswith("MAINT")  # no pod behind that name: off the ring
    answers = {httpx.get(f"{loopback.http}/readyz", timeout=5).status_code for _ in range(6)}
    assert answers == {200}


async def test_a_pod_drained_by_its_prestop_hook_loses_no_acknowledged_turn(
        loopback: LoopbackCluster, neo4j_uri: str) -> None:
    victim = 1
    # Bots that think a second between lines: the drain grace (2.5 s) must find them mid-game.
    clients = bots(loopback, SESSIONS, uuid.uuid4().hex[:8], think=1.0, credential=SECRETS["ADMIN_KEY"])
    for client in clients:
        await client.create()
    owners = await leases(neo4j_uri, [c.session_id for c in clients])
    assert {o["owner"] for o in owners.values()} <= {loopback.pod(n) for n in range(NODES)}
    victims = [c for c in clients if owners[c.session_id]["owner"] == loopback.pod(victim)]
    assert victims, f"some sessions live on {loopback.pod(victim)}"
    node = f"http://{loopback.address(victim)}:{loopback.port}"
    readiness: list[int] = []
    with anyio.fail_after(150):
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(client.run, 120.0)

            def mid_load() -> bool:
                return sum(1 for c in victims for fid in c.transcripts if c.sent[fid].acked) >= len(victims) and \
                    any(not c.finished for c in victims)

            await wait_for(mid_load, 60, "the load to be under way on the victim", every=0.005)
            hook = loopback.pre_stop(victim)
            async with httpx.AsyncClient(timeout=5) as http:  # while it drains: not ready, still alive
                while hook.poll() is None and 503 not in readiness:
                    readiness.append((await http.get(f"{node}/readyz")).status_code)
                    await anyio.sleep(0.05)
                assert (await http.get(f"{node}/livez")).status_code == 200
            out, err = await anyio.to_thread.run_sync(hook.communicate)
            assert hook.returncode == 0, err
            assert b'"draining": true' in out
            # Then the kubelet's SIGTERM: the node exits within its own shutdown bound.
            loopback.nodes[victim].send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(lambda: loopback.nodes[victim].wait(30))
    assert 503 in readiness
    lost, duplicated = check_clients(clients, await stored_counts(neo4j_uri, clients))
    assert (lost, duplicated) == (0, 0)
    moved = [c for c in victims if 4307 in c.closes]
    assert moved, f"the victim's clients were told to move: {Counter(x for c in victims for x in c.closes)}"
    print(f"{len(victims)} sessions on the drained pod, {len(moved)} moved mid-game; closes:",
          Counter(x for c in clients for x in c.closes))
    after = await leases(neo4j_uri, [c.session_id for c in moved])
    assert all(after[c.session_id]["owner"] != loopback.pod(victim) for c in moved)
    # The StatefulSet brings the pod back under the same name and address: HAProxy puts it on its arc.
    loopback.start_node(victim)
    await anyio.to_thread.run_sync(loopback.wait_lb, victim, "UP", 90.0)
    # Its arc is its own again: new sessions hash to it. (Ids are random: a third of them land there,
    # so sixty miss it with a chance of 3e-11.)
    run, owners = uuid.uuid4().hex[:8], {}
    for i in range(60):
        (client,) = bots(loopback, 1, f"{run}-{i}", think=0.0, credential=SECRETS["ADMIN_KEY"])
        await client.create()
        owners |= await leases(neo4j_uri, [client.session_id])
        if loopback.pod(victim) in {o["owner"] for o in owners.values()}:
            break
    assert loopback.pod(victim) in {o["owner"] for o in owners.values()}
    assert {o["owner"] for o in owners.values()} <= {loopback.pod(n) for n in range(NODES)}
