"""The Helm chart (deploy/helm/samvad), rendered without a cluster: `helm lint --strict`, `helm template`
over every value set in its ci/ folder, the manifests validated offline against Kubernetes' schemas
(kubernetes-validate, a pinned version), `haproxy -c` on the rendered HAProxy configuration, and the
rules an operator would otherwise rediscover: selectors match pods, the grace period covers the drain,
the ring covers maxReplicas with the hash the server expects, no secret sits in a ConfigMap, and HAProxy's
configuration is deploy/haproxy.cfg's but for the binds, the resolvers and the server lines.
tests/test_helm_loopback.py runs the rendered HAProxy configuration in front of real nodes."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from server.cluster.routes import SESSION_ID_HEADER
from server.config import load_settings
from server.routes_table import OPERATIONS
from tests.ci import need
from tests.cluster_support import need_haproxy
from tests.k8s_support import (
    CHART,
    KUBE_VERSION,
    ROOT,
    SECRET_SETTINGS,
    VALUE_SETS,
    RenderError,
    haproxy_config,
    helm,
    helm_env,
    one,
    pod_env,
    render,
    run_helm,
    server_container,
)

SETS = [pytest.param(path, id=path.name) for path in VALUE_SETS]
FAKE_SECRETS = {"SAMVAD_SECRET": "s" * 48, "ADMIN_KEY": "a" * 40, "NEO4J_PASSWORD": "p" * 12,
                "OPENAI_API_KEY": "sk-test"}


@pytest.fixture(scope="module")
def helm_bin() -> str:
    return helm()


@pytest.fixture(scope="module")
def rendered(helm_bin: str) -> dict[str, list[dict[str, Any]]]:
    return {path.name: render(helm_bin, path) for path in VALUE_SETS}


def values_of(path: Path) -> dict[str, Any]:
    """The chart's values.yaml with a ci value set over it (a shallow-enough merge for these files)."""
    merged: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    for key, value in (yaml.safe_load(path.read_text()) or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def sections(config: str) -> dict[str, list[str]]:
    """HAProxy's configuration as {section header: its directives}, comments and blank lines dropped."""
    out: dict[str, list[str]] = {}
    current = ""
    for raw in config.splitlines():
        line = raw.split("#", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        if not line[0].isspace():
            current = " ".join(line.split())
            out[current] = []
        else:
            out[current].append(" ".join(line.split()))
    return out


def test_the_value_sets_include_aura_and_an_in_cluster_neo4j(rendered: dict[str, list[dict[str, Any]]]) -> None:
    names = {path.name for path in VALUE_SETS}
    assert {"aura-values.yaml", "in-cluster-neo4j-values.yaml"} <= names
    # Between them every optional part renders: the HPA and the NetworkPolicy in the Aura set.
    assert {"HorizontalPodAutoscaler", "NetworkPolicy"} <= {d["kind"] for d in rendered["aura-values.yaml"]}


def test_the_chart_needs_nothing_fetched() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert "dependencies" not in chart and not (CHART / "charts").exists()


def test_helm_renders_with_no_network_at_all(helm_bin: str) -> None:
    """In a network namespace of its own (only a loopback, down): nothing to fetch, nothing fetched."""
    isolated = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=30).returncode == 0
    need(isolated, "unshare -rn is not permitted here", "run as root, or allow unprivileged user namespaces")
    for command in (["lint", "--strict"], ["template", "samvad", "--kube-version", KUBE_VERSION]):
        done = subprocess.run(["unshare", "-rn", helm_bin, *command, str(CHART), "-f", str(VALUE_SETS[0])],
                              env=helm_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("values", SETS)
def test_helm_lint_strict_passes_offline(helm_bin: str, values: Path) -> None:
    done = run_helm(helm_bin, "lint", "--strict", str(CHART), "-f", str(values))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("values", SETS)
def test_every_manifest_validates_against_the_pinned_kubernetes_schemas(
        rendered: dict[str, list[dict[str, Any]]], values: Path) -> None:
    docs = rendered[values.name]
    kinds = {d["kind"] for d in docs}
    assert {"StatefulSet", "Service", "Deployment", "ConfigMap", "PodDisruptionBudget"} <= kinds
    for doc in docs:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_the_validator_refuses_what_kubernetes_would_refuse(rendered: dict[str, list[dict[str, Any]]]) -> None:
    statefulset = one(rendered["aura-values.yaml"], "StatefulSet")
    typo = {**statefulset, "spec": {**statefulset["spec"], "replica": 3}}  # an unknown field (strict)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBE_VERSION, strict=True)
    wrong_type = {**statefulset, "spec": {**statefulset["spec"], "minReadySeconds": "five"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("values", SETS)
def test_every_selector_matches_the_pods_it_means(rendered: dict[str, list[dict[str, Any]]], values: Path) -> None:
    docs = rendered[values.name]
    workloads = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("StatefulSet", "Deployment")}
    pods = {name: w["spec"]["template"]["metadata"]["labels"] for name, w in workloads.items()}

    def selected(selector: dict[str, str]) -> set[str]:
        return {name for name, labels in pods.items() if selector.items() <= labels.items()}

    for name, workload in workloads.items():  # a workload's own selector picks its pods and no others
        assert selected(workload["spec"]["selector"]["matchLabels"]) == {name}
    statefulset = one(docs, "StatefulSet")
    headless = one(docs, "Service", statefulset["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert selected(headless["spec"]["selector"]) == {statefulset["metadata"]["name"]}
    front = next(d for d in docs if d["kind"] == "Service" and d is not headless)
    assert selected(front["spec"]["selector"]) == {f"{statefulset['metadata']['name']}-haproxy"}
    for service in (headless, front):  # each targets a port its pods declare
        target = service["spec"]["ports"][0]["targetPort"]
        (workload,) = [workloads[n] for n in selected(service["spec"]["selector"])]
        ports = [p["name"] for c in workload["spec"]["template"]["spec"]["containers"] for p in c["ports"]]
        assert target in ports
    budgets = {selected(d["spec"]["selector"]["matchLabels"]).pop() for d in docs if d["kind"] == "PodDisruptionBudget"}
    assert statefulset["metadata"]["name"] in budgets
    for policy in (d for d in docs if d["kind"] == "NetworkPolicy"):  # HAProxy's pods reach the nodes
        assert selected(policy["spec"]["podSelector"]["matchLabels"]) == {statefulset["metadata"]["name"]}
        peers = policy["spec"]["ingress"][0]["from"]
        assert selected(peers[0]["podSelector"]["matchLabels"]) == {f"{statefulset['metadata']['name']}-haproxy"}
    for hpa in (d for d in docs if d["kind"] == "HorizontalPodAutoscaler"):
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet",
                                                 "name": statefulset["metadata"]["name"]}


@pytest.mark.parametrize("values", SETS)
def test_the_grace_period_covers_the_prestop_drain_and_the_shutdown(
        rendered: dict[str, list[dict[str, Any]]], values: Path) -> None:
    docs = rendered[values.name]
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    container = server_container(docs)
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["samvad", "drain"]
    # The settings a pod reads, through the server's own parser: the bounds are the server's.
    settings = load_settings(**pod_env(container, "samvad-0", FAKE_SECRETS))
    assert settings.production and settings.CLUSTER_NODE_ID == "samvad-0"
    assert pod["terminationGracePeriodSeconds"] > settings.drain_bound_seconds + settings.shutdown_bound_seconds


def test_a_slower_drain_gets_a_longer_grace_period(helm_bin: str, tmp_path: Path) -> None:
    quick = one(render(helm_bin, VALUE_SETS[0]), "StatefulSet")["spec"]["template"]["spec"]
    slow = one(render(helm_bin, VALUE_SETS[0], values={"cluster": {"drainGraceSeconds": 20.5, "leaseSeconds": 30,
                                                                   "leaseRenewSeconds": 5}}, tmp=tmp_path),
               "StatefulSet")["spec"]["template"]["spec"]
    assert slow["terminationGracePeriodSeconds"] - quick["terminationGracePeriodSeconds"] >= (20.5 - 3) + 2 * (30 - 6)


@pytest.mark.parametrize("values", SETS)
def test_the_probes_split_liveness_from_readiness_on_routes_the_server_has(
        rendered: dict[str, list[dict[str, Any]]], values: Path) -> None:
    container = server_container(rendered[values.name])
    paths = {op.path for op in OPERATIONS if op.method == "GET"}
    probes = {kind: container[kind]["httpGet"]["path"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes == {"startupProbe": "/livez", "livenessProbe": "/livez", "readinessProbe": "/readyz"}
    assert set(probes.values()) <= paths
    env = {e["name"]: e for e in container["env"]}
    assert env["SAMVAD_ENV"]["value"] == "production"
    assert env["CLUSTER_NODE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert container["resources"]["requests"] and container["resources"]["limits"]


@pytest.mark.parametrize("values", SETS)
def test_the_haproxy_ring_has_a_line_per_ordinal_up_to_max_replicas(
        rendered: dict[str, list[dict[str, Any]]], values: Path) -> None:
    docs = rendered[values.name]
    settings = values_of(values)
    statefulset = one(docs, "StatefulSet")
    name, headless = statefulset["metadata"]["name"], statefulset["spec"]["serviceName"]
    port = server_container(docs)["ports"][0]["containerPort"]
    servers = [line.split() for line in sections(haproxy_config(docs))["backend nodes"] if line.startswith("server ")]
    # In ordinal order: HAProxy places server k (its id, 1-based in line order) on the ring, so pod N
    # keeps its arc whatever its IP; and the name is the pod's, as is its CLUSTER_NODE_ID.
    assert [s[1] for s in servers] == [f"{name}-{i}" for i in range(settings["maxReplicas"])]
    assert [s[2] for s in servers] == [f"{name}-{i}.{headless}.default.svc.cluster.local:{port}"
                                       for i in range(settings["maxReplicas"])]
    assert all({"check", "resolvers", "init-addr"} <= set(s) for s in servers)
    assert all("id" not in s for s in servers)  # ids are the line order, as in deploy/haproxy.cfg
    hpa = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    if settings["hpa"]["enabled"]:
        assert hpa[0]["spec"]["maxReplicas"] == len(servers) and "replicas" not in statefulset["spec"]
        assert hpa[0]["spec"]["metrics"][0]["pods"]["metric"]["name"] == settings["hpa"]["metric"]
    else:
        assert not hpa and statefulset["spec"]["replicas"] == settings["replicas"] <= len(servers)


@pytest.mark.parametrize(("values", "why"), [
    ({"replica": 3}, "additional properties 'replica' not allowed"),  # a typo: values.schema.json
    ({"neo4j": {"uri": "http://neo4j:7474"}}, "neo4j"),  # not a Bolt URI
    ({"haproxy": {"resolvers": {"nameservers": ["10.0.0.10"]}}}, "nameservers"),  # no port
])
def test_values_the_schema_refuses_stop_the_render(helm_bin: str, tmp_path: Path, values: dict[str, Any],
                                                   why: str) -> None:
    with pytest.raises(RenderError, match=why):
        render(helm_bin, VALUE_SETS[0], values=values, tmp=tmp_path)


def test_replicas_past_the_ring_are_refused(helm_bin: str, tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="over maxReplicas"):
        render(helm_bin, VALUE_SETS[0], values={"replicas": 5, "maxReplicas": 4}, tmp=tmp_path)


def test_the_hash_key_is_the_session_id_the_server_routes_on(rendered: dict[str, list[dict[str, Any]]]) -> None:
    config = sections(haproxy_config(rendered["aura-values.yaml"]))
    frontend, backend = config["frontend samvad"], config["backend nodes"]
    assert "balance hash var(txn.sid)" in backend and "hash-type consistent" in backend
    assert not any(line.startswith("hash-key") for line in backend)  # the ring is by id, not address
    session_paths = next(line for line in frontend if line.startswith("acl session_path ")).split()[3:]
    assert "http-request set-var(txn.sid) path,field(4,/) if session_path" in frontend
    # Every route with a session id has it in the 4th '/'-field, under a prefix the acl matches.
    routed = [op.path for op in OPERATIONS if "{session_id}" in op.path]
    assert len(routed) >= 5
    for path in routed:
        assert path.split("/")[3] == "{session_id}", path
        assert any(path.startswith(prefix) for prefix in session_paths), path
    headers = [line.split()[2] for line in frontend if line.startswith("http-request set-header")]
    assert [h.lower() for h in headers] == [SESSION_ID_HEADER]
    assert f"http-request del-header {headers[0]}" in frontend  # a client never picks the id


@pytest.mark.parametrize("values", SETS)
def test_the_rendered_haproxy_config_is_deploy_haproxy_cfg_but_for_binds_resolvers_and_servers(
        rendered: dict[str, list[dict[str, Any]]], values: Path) -> None:
    ours = sections((ROOT / "deploy/haproxy.cfg").read_text())
    chart = sections(haproxy_config(rendered[values.name]))
    assert "resolvers k8s" in chart
    assert set(chart) - {"resolvers k8s"} == set(ours)

    def same(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.startswith(("bind ", "server "))]

    for header in ours:
        assert same(chart[header]) == same(ours[header]), header
        assert [line.split()[0] for line in chart[header] if line.startswith("bind ")] == \
               [line.split()[0] for line in ours[header] if line.startswith("bind ")]


def test_a_packaged_chart_carries_deploy_haproxy_cfg_itself(helm_bin: str, tmp_path: Path) -> None:
    done = run_helm(helm_bin, "package", str(CHART), "--destination", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (package,) = tmp_path.glob("samvad-*.tgz")
    with tarfile.open(package) as tar:
        member = tar.getmember("samvad/files/haproxy.cfg")
        assert member.isfile()  # the link's target, not the link
        assert tar.extractfile(member).read() == (ROOT / "deploy/haproxy.cfg").read_bytes()  # type: ignore[union-attr]
        assert not [m for m in tar.getnames() if "/ci/" in m]
    docs = render(helm_bin, VALUE_SETS[0], chart=package)
    assert haproxy_config(docs) == haproxy_config(render(helm_bin, VALUE_SETS[0]))


@pytest.mark.parametrize(("cut", "why"), [
    ('    server n3 "${SAMVAD_NODE3}" check\n', None),  # fewer lines in the source: the same ring rendered
    ("hash-type consistent", None),  # whatever the file says is what the chart renders
    ('bind "${SAMVAD_LB_BIND}"', "has no bind on SAMVAD_LB_BIND"),
    ("    default-server", "has no default-server line"),
])
def test_the_chart_follows_deploy_haproxy_cfg_and_stops_if_it_cannot(
        helm_bin: str, tmp_path: Path, cut: str, why: str | None) -> None:
    copy = tmp_path / "samvad"
    shutil.copytree(CHART, copy, symlinks=False)  # the link's target copied in, as `helm package` does
    source = (copy / "files/haproxy.cfg").read_text()
    assert cut in source
    (copy / "files/haproxy.cfg").write_text(source.replace(cut, ""))
    if why is not None:
        with pytest.raises(RenderError, match=why):
            render(helm_bin, VALUE_SETS[0], chart=copy)
        return
    backend = sections(haproxy_config(render(helm_bin, VALUE_SETS[0], chart=copy)))["backend nodes"]
    assert len([line for line in backend if line.startswith("server ")]) == values_of(VALUE_SETS[0])["maxReplicas"]
    assert ("hash-type consistent" in backend) == (cut != "hash-type consistent")


@pytest.mark.parametrize("values", SETS)
def test_haproxy_accepts_the_rendered_configuration(rendered: dict[str, list[dict[str, Any]]], values: Path,
                                                    tmp_path: Path) -> None:
    need_haproxy()
    path = tmp_path / "haproxy.cfg"
    path.write_text(haproxy_config(rendered[values.name]))
    done = subprocess.run(["/usr/sbin/haproxy", "-c", "-f", str(path)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.cfg"  # and haproxy -c does refuse a broken one
    broken.write_text(path.read_text().replace("hash-type consistent", "hash-type consistently"))
    assert subprocess.run(["/usr/sbin/haproxy", "-c", "-f", str(broken)], capture_output=True,
                          timeout=30).returncode != 0


@pytest.mark.parametrize("values", SETS)
def test_secrets_come_from_the_secret_and_no_configmap_holds_one(
        rendered: dict[str, list[dict[str, Any]]], values: Path) -> None:
    docs = rendered[values.name]
    env = {e["name"]: e for e in server_container(docs)["env"]}
    for name in SECRET_SETTINGS:
        assert "value" not in env[name] and "secretKeyRef" in env[name]["valueFrom"], name
    assert not [d for d in docs if d["kind"] == "Secret"]  # the chart never carries one
    secret_words = re.compile("|".join([*SECRET_SETTINGS, "password", "secret", "token"]), re.IGNORECASE)
    for configmap in (d for d in docs if d["kind"] == "ConfigMap"):
        for key, text in configmap["data"].items():
            assert not secret_words.search(key) and not secret_words.search(text), (key, secret_words.search(text))


@pytest.mark.parametrize("values", [*SETS, pytest.param(CHART / "values.yaml", id="values.yaml")])
def test_no_value_file_holds_a_secret(values: Path) -> None:
    def leaves(node: Any, path: str = "") -> list[tuple[str, Any]]:
        if isinstance(node, dict):
            return [leaf for k, v in node.items() for leaf in leaves(v, f"{path}.{k}")]
        return [(path, node)]

    for path, value in leaves(yaml.safe_load(values.read_text())):
        if path.startswith((".secret.", ".imagePullSecrets")):  # names of Secrets and of their keys
            continue
        assert not re.search("password|secret|admin_?key|metrics_?key", path, re.IGNORECASE), (path, value)


@pytest.mark.parametrize("name", [*SECRET_SETTINGS, "SAMVAD_ENV", "CLUSTER_NODE_ID"])
def test_a_secret_or_a_chart_setting_in_env_is_refused(helm_bin: str, tmp_path: Path, name: str) -> None:
    with pytest.raises(RenderError, match=f"env.{name}"):
        render(helm_bin, VALUE_SETS[0], values={"env": {name: "x" * 40}}, tmp=tmp_path)
