"""The Helm chart (deploy/helm/anycloud): helm lint, what it renders, the command lines its
containers run (parsed by anycloud's own CLI), the API server's verdict on its objects, and
an install on the real control plane whose pods kwok runs (``control_plane``)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from automation.agentpools.operator import ControlPlaneConfig
from automation.devcluster.control_plane import KWOK_ANNOTATION, ControlPlane
from tests.automation.kube.objects import wait_for
from tests.conftest import missing
from tests.deploy.chart import (
    CHART,
    CRD,
    OPERATOR_ROLE,
    REQUIRED,
    Helm,
    containers,
    one,
    parse_command_line,
    set_args,
)

# Several watched namespaces, the state in a bucket (no claim), the ledger URL as a value.
CUSTOM = {
    "watchNamespaces": ["team-a", "team-b", "team-c"],
    "state.backendUrl": "s3://anycloud-state?region=eu-west-1",
    "state.passphrase.existingSecret": "anycloud-state-passphrase",
    "ledger.url": "postgresql+psycopg://anycloud:pw@db.example:5432/anycloud",
    "operator.replicas": 3,
}


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    from automation.devcluster import binaries

    try:
        binary = binaries.find("helm")
    except binaries.ToolMissing as exc:
        missing(exc.message)
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))


# -- lint and render ----------------------------------------------------------------------


@pytest.mark.parametrize("values", [REQUIRED, CUSTOM], ids=["defaults", "custom"])
def test_helm_lint_passes(helm: Helm, values: dict[str, Any]) -> None:
    done = helm.run("lint", "--strict", str(CHART), "--namespace", "anycloud",
                    *set_args(values))
    assert "0 chart(s) failed" in done.stdout, done.stdout


@pytest.mark.parametrize(("drop", "says"), [
    ("ledger.existingSecret", "set ledger.existingSecret"),
    ("state.passphrase.existingSecret", "set state.passphrase.existingSecret"),
])
def test_a_missing_secret_is_refused_by_name(helm: Helm, drop: str, says: str) -> None:
    values = {k: v for k, v in REQUIRED.items() if k != drop}
    done = helm.run("template", "anycloud", str(CHART), *set_args(values), check=False)
    assert done.returncode != 0
    assert says in done.stderr


def test_the_charts_crd_is_the_repositorys() -> None:
    assert (CHART / "crds" / CRD.name).read_bytes() == CRD.read_bytes()
    assert [p.name for p in (CHART / "crds").iterdir()] == [CRD.name]


def test_the_operator_role_is_the_repositorys_in_each_watched_namespace(helm: Helm) -> None:
    objects = helm.objects(CUSTOM, namespace="anycloud-system")
    (shipped,) = [d for d in yaml.safe_load_all(OPERATOR_ROLE.read_text())
                  if d and d["kind"] == "Role"]
    roles = {o["metadata"]["namespace"]: o for o in objects
             if o["kind"] == "Role" and o["metadata"]["name"].endswith("agentpool-operator")}
    assert set(roles) == set(CUSTOM["watchNamespaces"])
    for role in roles.values():
        assert role["rules"] == shipped["rules"]
    bindings = [o for o in objects if o["kind"] == "RoleBinding"
                and o["metadata"]["name"].endswith("agentpool-operator")]
    assert {b["metadata"]["namespace"] for b in bindings} == set(roles)
    account = one(objects, "ServiceAccount")["metadata"]
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                        "namespace": "anycloud-system"}]


def test_by_default_the_release_namespace_is_watched(helm: Helm) -> None:
    objects = helm.objects(REQUIRED, namespace="ops")
    roles = [o for o in objects if o["kind"] == "Role"]
    assert {r["metadata"]["namespace"] for r in roles} == {"ops"}
    config = yaml.safe_load(one(objects, "ConfigMap", "-operator")["data"]["config.yaml"])
    assert config["provisioners"] == [{"kubernetes": {"namespace": "ops"}}]
    # The agents are given the release's broker Service: no agent ConfigMap is needed.
    service = one(objects, "Service", "-broker")["metadata"]["name"]
    assert config["broker"] == {"address": f"http://{service}.ops.svc:50051"}
    ControlPlaneConfig.model_validate(config)  # what the operator will read


def test_the_leader_election_role_is_leases_in_the_release_namespace(helm: Helm) -> None:
    objects = helm.objects(CUSTOM, namespace="anycloud-system")
    role = one(objects, "Role", "-leader-election")
    assert role["metadata"]["namespace"] == "anycloud-system"
    assert {(g, r) for rule in role["rules"] for g in rule["apiGroups"]
            for r in rule["resources"]} == {("coordination.k8s.io", "leases")}
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert {"get", "create", "update"} <= verbs
    binding = one(objects, "RoleBinding", "-leader-election")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_the_operator_config_names_every_watched_namespace(helm: Helm) -> None:
    objects = helm.objects(CUSTOM)
    config = yaml.safe_load(one(objects, "ConfigMap", "-operator")["data"]["config.yaml"])
    assert [p["kubernetes"]["namespace"] for p in config["provisioners"]] == \
        CUSTOM["watchNamespaces"]
    operator = one(objects, "Deployment", "-operator")
    assert operator["spec"]["replicas"] == CUSTOM["operator.replicas"]
    env = {e["name"]: e for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def _env(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e for e in container["env"]}


def test_the_state_is_on_a_claim_with_its_passphrase_from_a_secret(helm: Helm) -> None:
    objects = helm.objects(REQUIRED)
    deployment = one(objects, "Deployment", "-control-plane")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    claim = one(objects, "PersistentVolumeClaim")
    assert volumes["home"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    env = _env(deployment)
    assert "PULUMI_BACKEND_URL" not in env and "PULUMI_CONFIG_PASSPHRASE" not in env
    passphrase = Path(env["PULUMI_CONFIG_PASSPHRASE_FILE"]["value"])
    mount = next(m for m in pod["containers"][0]["volumeMounts"]
                 if Path(m["mountPath"]) == passphrase.parent)
    assert volumes[mount["name"]]["secret"]["secretName"] == "anycloud-state-passphrase"
    assert env["ANYCLOUD_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "anycloud-ledger", "key": "url"}
    assert not [o for o in objects if o["kind"] == "Secret"]  # the user's, not the chart's
    # serve with ANYCLOUD_CONFIG would run a second operator beside the elected one.
    assert "ANYCLOUD_CONFIG" not in env


def test_a_backend_url_replaces_the_claim_and_a_ledger_url_makes_its_secret(
        helm: Helm) -> None:
    objects = helm.objects(CUSTOM)
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    deployment = one(objects, "Deployment", "-control-plane")
    env = _env(deployment)
    assert env["PULUMI_BACKEND_URL"]["value"] == CUSTOM["state.backendUrl"]
    secret = one(objects, "Secret")
    assert secret["stringData"] == {"url": CUSTOM["ledger.url"]}
    for d in (deployment, one(objects, "Deployment", "-operator")):
        ref = _env(d)["ANYCLOUD_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": secret["metadata"]["name"], "key": "url"}


def test_containers_are_locked_down(helm: Helm) -> None:
    objects = helm.objects(REQUIRED)
    for d in (o for o in objects if o["kind"] == "Deployment"):
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]


def test_the_probes_ask_the_apis_health_route(helm: Helm) -> None:
    from automation.api.routes import identity

    served = {getattr(r, "path", None) for r in identity.router.routes}
    (container,) = one(helm.objects(REQUIRED), "Deployment", "-control-plane")[
        "spec"]["template"]["spec"]["containers"]
    assert "api" in {p["name"] for p in container["ports"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] == "api"
        assert get["path"] in served


def test_the_network_policy_opens_only_the_two_ports(helm: Helm) -> None:
    values = {**REQUIRED, "networkPolicy.apiFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}]}
    policy = one(helm.objects(values), "NetworkPolicy", "-control-plane")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    ports = [p["port"] for rule in policy["ingress"] for p in rule["ports"]]
    assert sorted(ports) == ["api", "broker"]
    assert all(rule["from"] for rule in policy["ingress"])  # never an empty `from`
    # By default the API port has no rule: no peer at all, rather than everyone.
    policy = one(helm.objects(REQUIRED), "NetworkPolicy", "-control-plane")["spec"]
    assert [p["port"] for rule in policy["ingress"] for p in rule["ports"]] == ["broker"]


# -- the command lines --------------------------------------------------------------------


@pytest.mark.parametrize("values", [REQUIRED, CUSTOM], ids=["defaults", "custom"])
def test_the_containers_run_valid_anycloud_command_lines(
        helm: Helm, values: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANYCLOUD_CONFIG", raising=False)  # as in the pods: not set for serve
    seen = set()
    for container in containers(helm.objects(values)):
        assert container["command"] == ["anycloud"], container["name"]
        ctx = parse_command_line(list(container["args"]))
        seen.add(ctx.info_name)
        if ctx.info_name == "serve":
            assert ctx.params["api_listen"] and ctx.params["broker_listen"]
            assert ctx.params["operator_config"] is None  # the operator Deployment's job
            assert not ctx.params["no_loop"]  # the control loop runs here
        if ctx.info_name == "operator":
            assert str(ctx.params["config_path"]) == "/etc/anycloud/config.yaml"
            assert ctx.params["leader_elect"]  # two replicas: only the Lease holder acts
    assert seen == {"serve", "operator"}


def test_a_renamed_flag_fails_the_parse() -> None:
    with pytest.raises(click.UsageError):
        parse_command_line(["serve", "--api-listen-typo", "0.0.0.0:8443"])


# -- on the real control plane ------------------------------------------------------------


def _namespace(plane: ControlPlane, name: str) -> None:
    plane.kubectl("create", "namespace", name)


@pytest.fixture
def namespaces(control_plane: ControlPlane) -> Iterator[list[str]]:
    """A release namespace and two watched ones, removed after the test."""
    suffix = secrets.token_hex(3)
    made = [f"acy-{suffix}", f"acy-{suffix}-a", f"acy-{suffix}-b"]
    control_plane.kubectl("apply", "-f", str(CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                          "crd/agentpools.anycloud.sh")
    for name in made:
        _namespace(control_plane, name)
    yield made
    for name in made:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.mark.kube
def test_the_api_server_accepts_every_object(helm: Helm, control_plane: ControlPlane,
                                             namespaces: list[str]) -> None:
    release, *watched = namespaces
    for values in (REQUIRED, {**CUSTOM, "watchNamespaces": watched}):
        rendered = helm.template(values, release)
        done = control_plane.kubectl("apply", "--dry-run=server", "-f", "-",
                                     input=rendered, check=False)
        assert done.returncode == 0, done.stderr
        kinds = {line.split("/")[0] for line in done.stdout.splitlines()}
        assert "deployment.apps" in kinds and "role.rbac.authorization.k8s.io" in kinds, \
            done.stdout


def _kwok_nodes(plane: ControlPlane, label: str, count: int) -> list[str]:
    names = [f"helm-{label}-{i}" for i in range(count)]
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    for name in names:
        plane.apply({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "annotations": {KWOK_ANNOTATION: "fake"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "anycloud.test/helm": label}}})
        plane.patch_status("node", name, {"capacity": resources, "allocatable": resources})
    return names


def _pods(plane: ControlPlane, ns: str, release: str, component: str) -> list[dict[str, Any]]:
    selector = (f"app.kubernetes.io/instance={release},"
                f"app.kubernetes.io/component={component}")
    done = plane.kubectl("get", "pods", "-n", ns, "-l", selector, "-o", "json")
    items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


@pytest.mark.kube
@pytest.mark.slow
def test_helm_install_runs_both_deployments_on_kwok_nodes(
        helm: Helm, control_plane: ControlPlane, namespaces: list[str]) -> None:
    release_ns, *watched = namespaces
    label = release_ns
    nodes = _kwok_nodes(control_plane, label, 2)
    storage_class = f"helm-{label}"
    release = "anycloud"
    claim = f"{release}-state"
    # A volume for the state's claim, bound to it (no provisioner runs here).
    control_plane.apply({"apiVersion": "v1", "kind": "PersistentVolume",
                         "metadata": {"name": storage_class}, "spec": {
                             "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                             "storageClassName": storage_class,
                             "hostPath": {"path": f"/var/lib/{storage_class}"},
                             "claimRef": {"namespace": release_ns, "name": claim}}})
    control_plane.kubectl("create", "secret", "generic", "anycloud-state-passphrase", "-n",
                          release_ns, "--from-literal=passphrase=not-a-real-one")
    placement = {"anycloud.test/helm": label}
    values = {**REQUIRED, "watchNamespaces": watched,
              "ledger.existingSecret": "", "ledger.url": "postgresql+psycopg://a:b@db/anycloud",
              "state.persistence.storageClassName": storage_class,
              "controlPlane.nodeSelector": placement, "operator.nodeSelector": placement}
    try:
        helm.run("install", release, str(CHART), "--namespace", release_ns,
                 "--kubeconfig", str(control_plane.kubeconfig), *set_args(values))

        def running(component: str, replicas: int) -> list[dict[str, Any]] | None:
            pods = _pods(control_plane, release_ns, release, component)
            up = [p for p in pods if p["status"].get("phase") == "Running"]
            return up if len(up) == replicas == len(pods) else None

        for component, replicas in (("control-plane", 1), ("operator", 2)):
            pods = wait_for(f"{replicas} {component} pod(s) Running",
                            lambda c=component, r=replicas: running(c, r), timeout=120)
            assert {p["spec"]["nodeName"] for p in pods} <= set(nodes)
            (container,) = pods[0]["spec"]["containers"]
            assert container["command"] == ["anycloud"]
        _rbac_holds(control_plane, release_ns, watched, f"{release}")
        listed = json.loads(helm.run("list", "-n", release_ns, "--kubeconfig",
                                     str(control_plane.kubeconfig), "-o", "json").stdout)
        assert [(r["name"], r["status"]) for r in listed] == [(release, "deployed")]
    finally:
        helm.run("uninstall", release, "-n", release_ns, "--kubeconfig",
                 str(control_plane.kubeconfig), check=False)
        control_plane.kubectl("delete", "pvc", claim, "-n", release_ns, "--wait=false",
                              check=False)
        control_plane.kubectl("delete", "pv", storage_class, "--wait=false", check=False)
        control_plane.kubectl("delete", "node", *nodes, "--wait=false", check=False)


def _rbac_holds(plane: ControlPlane, release_ns: str, watched: list[str],
                account: str) -> None:
    """The installed ServiceAccount may do the operator's work in each watched namespace
    and elect a leader in its own, and nothing of the kind elsewhere."""
    who = f"--as=system:serviceaccount:{release_ns}:{account}"

    def can(*args: str) -> str:
        return str(plane.kubectl("auth", "can-i", *args, who, check=False).stdout.strip())

    for ns in watched:
        assert can("create", "pods", "-n", ns) == "yes", ns
        assert can("patch", "agentpools.anycloud.sh", "--subresource=status", "-n", ns) == "yes"
    assert can("create", "pods", "-n", release_ns) == "no"  # not a watched namespace here
    assert can("update", "leases.coordination.k8s.io/anycloud-operator", "-n",
               release_ns) == "yes"
    assert can("update", "leases.coordination.k8s.io/anycloud-operator", "-n",
               watched[0]) == "no"
    assert can("list", "secrets", "-n", watched[0]) == "no"
