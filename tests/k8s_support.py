"""The Helm chart (deploy/helm/samvad) without a Kubernetes cluster: helm built from its Go module
(scripts/tools.sh), the chart rendered to manifests, and a small DNS server that answers for the pods'
names on loopback, so that HAProxy runs the rendered configuration unchanged but for its nameserver.

On Kubernetes each server pod has a stable name under the headless Service,
`samvad-N.samvad-headless.<namespace>.svc.cluster.local`, and HAProxy resolves it through the cluster's
DNS. Here `PodDns` is that DNS: pod N is 127.0.0.(N+1), and every node listens on the same port at its
own loopback address, as pods do on their own IPs. No /etc/hosts line is written.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.ci import need

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy/helm/samvad"
VALUE_SETS = sorted((CHART / "ci").glob("*-values.yaml"))
KUBE_VERSION = "1.33.0"  # the Kubernetes version the manifests are validated against (kubernetes-validate)
SECRET_SETTINGS = ("SAMVAD_SECRET", "ADMIN_KEY", "NEO4J_PASSWORD", "METRICS_KEY", "OPENAI_API_KEY")


def helm() -> str:
    """The pinned helm, built once into var/tools/bin by scripts/tools.sh (which needs Go)."""
    done = subprocess.run(["bash", str(ROOT / "scripts/tools.sh")], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    need(done.returncode == 0, f"helm could not be built: {done.stderr[-800:]}",
         "install Go 1.26 (scripts/tools.sh builds helm from its Go module)")
    return str(Path(done.stdout.strip()) / "helm")


def helm_env() -> dict[str, str]:
    """Helm's folders under var/, and a proxy that refuses every connection: a render that tried to
    fetch anything (a repository index, a dependency) would fail instead of quietly reaching out."""
    base = ROOT / "var/tools/helm-home"
    return {**os.environ, "HELM_CACHE_HOME": str(base / "cache"), "HELM_CONFIG_HOME": str(base / "config"),
            "HELM_DATA_HOME": str(base / "data"), "HTTP_PROXY": "http://127.0.0.1:9",
            "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}


def run_helm(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary, *args], cwd=ROOT, env=helm_env(), capture_output=True, text=True, timeout=120)


def render(binary: str, *value_files: Path, values: Mapping[str, Any] | None = None, tmp: Path | None = None,
           release: str = "samvad", namespace: str = "default", chart: Path = CHART) -> list[dict[str, Any]]:
    """`helm template` of the chart: its manifests, parsed. `values` go through a file of their own."""
    args = ["template", release, str(chart), "--namespace", namespace, "--kube-version", KUBE_VERSION]
    for path in value_files:
        args += ["-f", str(path)]
    if values is not None:
        assert tmp is not None, "values need a folder for their file"
        extra = tmp / "override-values.yaml"
        extra.write_text(yaml.safe_dump(dict(values)))
        args += ["-f", str(extra)]
    done = run_helm(binary, *args)
    if done.returncode != 0:
        raise RenderError(done.stderr)
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


class RenderError(Exception):
    """helm template refused the values (its message is the exception's text)."""


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def haproxy_config(docs: list[dict[str, Any]]) -> str:
    return str(one(docs, "ConfigMap")["data"]["haproxy.cfg"])


def server_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "samvad")


def pod_env(container: Mapping[str, Any], pod: str, secrets: Mapping[str, str]) -> dict[str, str]:
    """A container's environment as the kubelet would make it for `pod`, with `secrets` as the Secret."""
    env: dict[str, str] = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif "fieldRef" in item.get("valueFrom", {}):
            assert item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name", item
            env[item["name"]] = pod
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            if ref["key"] in secrets:
                env[item["name"]] = secrets[ref["key"]]
            else:
                assert ref.get("optional"), f"{ref['key']} is not in the Secret and not optional"
    return env


def free_port_on(addresses: list[str]) -> int:
    """A TCP port free on every one of `addresses` (pods listen on one port at their own IPs)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = int(probe.getsockname()[1])
        try:
            held = []
            for address in addresses:
                s = socket.socket()
                held.append(s)
                s.bind((address, port))
            return port
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise AssertionError(f"no port free on all of {addresses}")


class PodDns:
    """A DNS server on 127.0.0.1 (UDP) that answers A queries for `names` and NXDOMAIN for the rest,
    as a cluster's DNS answers for the pods that exist and not for ordinals not scaled up yet."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = {k.lower().rstrip("."): v for k, v in names.items()}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.queries: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="pod-dns", daemon=True)

    def __enter__(self) -> PodDns:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                query, peer = self.sock.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            answer = self.answer(query)
            if answer is not None:
                self.sock.sendto(answer, peer)

    def answer(self, query: bytes) -> bytes | None:
        """The reply to one query: its question echoed, an A record if the name is known."""
        if len(query) < 12:
            return None
        qid, _flags, qdcount = struct.unpack("!HHH", query[:6])
        if qdcount != 1:
            return None
        labels, at = [], 12
        while at < len(query) and query[at] != 0:
            n = query[at]
            labels.append(query[at + 1:at + 1 + n].decode("ascii", "replace"))
            at += 1 + n
        if at + 5 > len(query):
            return None
        qtype, _qclass = struct.unpack("!HH", query[at + 1:at + 5])
        question = query[12:at + 5]
        name = ".".join(labels).lower()
        self.queries.append(name)
        address = self.names.get(name)
        if address is None:  # NXDOMAIN
            return struct.pack("!HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question
        if qtype != 1:  # the name exists but has no record of that type (AAAA): NOERROR, no answer
            return struct.pack("!HHHHHH", qid, 0x8180, 1, 0, 0, 0) + question
        record = struct.pack("!HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(address)
        return struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + record
