"""Cluster records through the service, with a scripted probe whose answers each test sets
(unsupported versions, an unreachable cluster turning reachable). The same commands against
the real control plane, with the real probe, are in test_clusters_real.py."""

from pathlib import Path

import pytest

from automation.app import App
from automation.errors import Conflict, InvalidInput, NotFound
from automation.kube.probe import ClusterFacts
from automation.models import ClusterState
from automation.services import clusters
from tests.automation.conftest import CA_SHA, DEMO_CA, ScriptedProbe, snapshot

FACTS = ClusterFacts(kubernetes_version="v1.36.2+k3s1", kube_system_uid="uid-123")


def _register(app: App, kubeconfig: Path, **kw: object) -> clusters.Cluster:
    return clusters.register_cluster(app, clusters.RegisterCluster(
        name=str(kw.pop("name", "prod")), kubeconfig=kubeconfig, **kw  # type: ignore[arg-type]
    ))


def test_register_reads_the_cluster(app: App, probe: ScriptedProbe, kubeconfig: Path) -> None:
    probe.facts = FACTS
    c = _register(app, kubeconfig)
    assert c.id.startswith("cl-") and c.state is ClusterState.READY
    assert (c.kubernetes_version, c.kube_system_uid, c.facts_source) == (
        "v1.36.2+k3s1", "uid-123", "cluster"
    )
    assert c.ca_sha256 == CA_SHA and c.server_url == "https://203.0.113.10:6443"
    assert c.kubeconfig_path == str(kubeconfig.resolve())
    assert clusters.get_cluster(app, "prod") == c == clusters.get_cluster(app, c.id)


def test_unreachable_without_offline_values_stays_pending(
    app: App, probe: ScriptedProbe, kubeconfig: Path
) -> None:
    c = _register(app, kubeconfig)
    assert c.state is ClusterState.PENDING and c.facts_source is None
    assert "connection refused" in (c.last_error or "")
    probe.facts = FACTS
    refreshed = clusters.refresh_cluster(app, "prod")
    assert refreshed.state is ClusterState.READY and refreshed.facts_source == "cluster"
    assert refreshed.last_error is None


def test_unreachable_with_offline_values_is_ready_and_marked(
    app: App, probe: ScriptedProbe, kubeconfig: Path
) -> None:
    c = _register(app, kubeconfig, kubernetes_version="v1.35.1+k3s1", ca_file=DEMO_CA)
    assert c.state is ClusterState.READY and c.facts_source == "offline"
    assert probe.reads == 1  # it did try the cluster first


def test_offline_flag_skips_the_cluster(app: App, probe: ScriptedProbe, kubeconfig: Path) -> None:
    probe.facts = FACTS
    c = _register(app, kubeconfig, offline=True)
    assert probe.reads == 0 and c.state is ClusterState.PENDING


def test_version_only_stays_pending_without_ca(
    app: App, probe: ScriptedProbe, kubeconfig: Path
) -> None:
    probe.ca_sha256 = None
    c = _register(app, kubeconfig, kubernetes_version="v1.36.0", offline=True)
    assert c.state is ClusterState.PENDING


@pytest.mark.parametrize("version", ["v1.34.3+k3s1", "v1.39.0+k3s1"])
def test_cluster_outside_window_refused_nothing_written(
    app: App, probe: ScriptedProbe, kubeconfig: Path, version: str
) -> None:
    before = snapshot(app)
    probe.facts = ClusterFacts(version, "uid")
    with pytest.raises(InvalidInput, match=r"v1\.35 through v1\.38"):
        _register(app, kubeconfig)
    probe.facts = None
    with pytest.raises(InvalidInput, match=r"v1\.35 through v1\.38"):
        _register(app, kubeconfig, kubernetes_version=version, ca_file=DEMO_CA, offline=True)
    assert snapshot(app) == before


def test_refresh_to_unsupported_version_makes_pending(
    app: App, probe: ScriptedProbe, kubeconfig: Path
) -> None:
    probe.facts = FACTS
    _register(app, kubeconfig)
    probe.facts = ClusterFacts("v1.39.1+k3s1", "uid-123")
    c = clusters.refresh_cluster(app, "prod")
    assert c.state is ClusterState.PENDING and "v1.39.1" in (c.last_error or "")


@pytest.mark.parametrize(("kw", "field"), [
    ({"name": "Prod"}, "name"),
    ({"server_url": "http://203.0.113.10:6443"}, "--server-url"),
    ({"server_url": "https://127.0.0.1:6443"}, "--server-url"),
    ({"ca_file": Path("/nonexistent/ca.pem")}, "--ca-file"),
    ({"kubernetes_version": "banana"}, "--kubernetes-version"),
])
def test_bad_register_input_refused(
    app: App, kubeconfig: Path, kw: dict[str, object], field: str
) -> None:
    before = snapshot(app)
    with pytest.raises(InvalidInput) as err:
        _register(app, kubeconfig, **kw)
    assert err.value.field == field
    assert snapshot(app) == before


def test_loopback_kubeconfig_server_needs_server_url(
    app: App, probe: ScriptedProbe, kubeconfig: Path
) -> None:
    probe.server_url = "https://127.0.0.1:6443"
    with pytest.raises(InvalidInput) as err:
        _register(app, kubeconfig)
    assert err.value.field == "--kubeconfig" and "--server-url" in err.value.message
    c = _register(app, kubeconfig, server_url="https://k3s.example.com:6443")
    assert c.server_url == "https://k3s.example.com:6443"


def test_missing_kubeconfig_refused(app: App, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        _register(app, tmp_path / "nope.yaml")
    assert err.value.field == "--kubeconfig"


def test_names_unique_among_live_clusters(app: App, kubeconfig: Path) -> None:
    c = _register(app, kubeconfig)
    with pytest.raises(Conflict) as err:
        _register(app, kubeconfig)
    assert err.value.code == "ALREADY_EXISTS"
    clusters.delete_cluster(app, c.id)
    assert _register(app, kubeconfig).id != c.id  # a deleted name is free again
    with pytest.raises(NotFound):
        clusters.get_cluster(app, c.id)
