"""``cluster update NAME --kubeconfig FILE``: a new kubeconfig replaces the old only once it
has reached the same cluster (CA hash and kube-system UID); anything else is refused by rule
and changes nothing. Through the API the new one is sealed in place of the old, under
If-Match, while readers of the old one keep working. (The real control plane:
test_clusters_real.py.)"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from automation.api.app import create_api
from automation.app import App
from automation.errors import Conflict
from automation.kube.probe import ClusterFacts
from automation.ledger import schema
from automation.sealing import SealingKey
from automation.services import clusters
from automation.services.tokens import create_token
from tests.automation.conftest import ScriptedProbe, snapshot

FACTS = ClusterFacts(kubernetes_version="v1.36.2+k3s1", kube_system_uid="uid-prod")
PUBLIC = "https://203.0.113.10:6443"


def _register(app: App, probe: ScriptedProbe, kubeconfig: Path) -> str:
    probe.facts = FACTS
    return clusters.register_cluster(app, clusters.RegisterCluster(
        name="prod", kubeconfig=kubeconfig)).id


def _new_file(tmp_path: Path, name: str = "new.kubeconfig") -> Path:
    path = tmp_path / name
    path.write_text("apiVersion: v1\nkind: Config\n# the new user\n")
    return path


def test_a_kubeconfig_of_the_same_cluster_replaces_the_old(
        app: App, probe: ScriptedProbe, kubeconfig: Path, tmp_path: Path) -> None:
    cluster_id = _register(app, probe, kubeconfig)
    new = _new_file(tmp_path)
    done = clusters.update_kubeconfig(app, "prod", clusters.NewKubeconfig(
        kubeconfig=new, context="admin@prod"))
    assert (done.id, done.kubeconfig_path, done.kube_context) == (
        cluster_id, str(new.resolve()), "admin@prod")
    assert (done.state, done.kube_system_uid, done.last_error) == ("ready", "uid-prod", None)
    with app.ledger.read() as conn:
        kinds = list(conn.execute(sa.select(schema.events.c.kind).where(
            schema.events.c.subject_id == cluster_id).order_by(schema.events.c.id)).scalars())
    assert kinds == ["registered", "kubeconfig-updated"]


@pytest.mark.parametrize(("change", "words"), [
    ({"ca_sha256": "f" * 64}, "the same CA hash"),
    ({"facts": ClusterFacts("v1.36.2+k3s1", "uid-staging")}, "the same kube-system UID"),
    ({"facts": None}, "must reach the cluster"),
])
def test_another_cluster_or_none_is_refused_and_nothing_changes(
        app: App, probe: ScriptedProbe, kubeconfig: Path, tmp_path: Path,
        change: dict[str, Any], words: str) -> None:
    _register(app, probe, kubeconfig)
    before = snapshot(app)
    for attr, value in change.items():
        setattr(probe, attr, value)
    new = _new_file(tmp_path)
    with pytest.raises(Conflict) as caught:
        clusters.update_kubeconfig(app, "prod", clusters.NewKubeconfig(kubeconfig=new))
    assert words in (caught.value.rule or "") and caught.value.field == "--kubeconfig"
    assert caught.value.value == str(new)
    assert snapshot(app) == before


def test_a_record_with_nothing_to_compare_is_refused(
        app: App, probe: ScriptedProbe, kubeconfig: Path, tmp_path: Path) -> None:
    probe.ca_sha256 = None  # registered offline, its CA never known: pending
    clusters.register_cluster(app, clusters.RegisterCluster(
        name="prod", kubeconfig=kubeconfig, offline=True))
    before = snapshot(app)
    probe.facts = FACTS
    with pytest.raises(Conflict, match="cluster refresh"):
        clusters.update_kubeconfig(app, "prod", clusters.NewKubeconfig(
            kubeconfig=_new_file(tmp_path)))
    assert snapshot(app) == before


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: prod, cluster: {server: "https://203.0.113.10:6443",
  certificate-authority-data: ""}}]
users: [{name: {user}, user: {token: "{token}"}}]
contexts: [{name: prod, context: {cluster: prod, user: {user}}}]
current-context: prod
"""


def _sent(user: str, token: str) -> str:
    return KUBECONFIG.replace("{user}", user).replace("{token}", token)


@pytest.mark.usefixtures("memory_runtime_dir")
def test_through_the_api_the_sealed_kubeconfig_is_replaced_under_if_match(
        app: App, probe: ScriptedProbe) -> None:
    app.sealing = SealingKey(bytes(range(32)))
    probe.facts = FACTS
    admin = {"Authorization": "Bearer " + create_token(app, "ops", "admin", by="t").token}
    with TestClient(create_api(app, limiter=None)) as http:
        made = http.post("/v1/clusters", headers=admin, json={
            "name": "prod", "kubeconfig": _sent("old", "old-token-0123456789")})
        assert made.status_code == 201, made.text
        row = clusters.cluster_row(app, "prod")
        before = http.get("/v1/clusters/prod", headers=admin)
        etag = before.headers["ETag"]
        opened: list[str] = []
        stop = threading.Event()

        def reading() -> None:  # a stack operation opening the kubeconfig meanwhile
            while not stop.is_set():
                opened.append(Path(app.kubeconfig_path(row) or "").read_text())

        reader = threading.Thread(target=reading)
        reader.start()
        try:
            new = {"kubeconfig": _sent("new", "new-token-0123456789"), "context": "prod"}
            stale = http.put("/v1/clusters/prod/kubeconfig", headers={
                **admin, "If-Match": '"0000"'}, json=new)
            assert stale.status_code == 412
            done = http.put("/v1/clusters/prod/kubeconfig", headers={
                **admin, "If-Match": etag}, json=new)
            assert done.status_code == 200, done.text
            while not any("new-token" in text for text in opened):
                pass
        finally:
            stop.set()
            reader.join(10)
        body = done.json()
        assert "new-token" not in done.text and body["kubeconfigPath"] is None
        assert body["sealedKubeconfig"]["rotatedAt"] is not None
        assert body["sealedKubeconfig"]["fingerprint"] != \
            made.json()["sealedKubeconfig"]["fingerprint"]
        assert done.headers["ETag"] != etag
        # Every read in flight saw the old kubeconfig or the new one, whole.
        assert set(opened) == {_sent("old", "old-token-0123456789"),
                               _sent("new", "new-token-0123456789")}
        # Another cluster's kubeconfig: 409, the sealed one unchanged.
        probe.facts = ClusterFacts("v1.36.2+k3s1", "uid-staging")
        other = http.put("/v1/clusters/prod/kubeconfig", headers=admin, json=new)
        assert other.status_code == 409 and "kube-system UID" in other.json()["rule"]
        assert http.get("/v1/clusters/prod", headers=admin).json() == body
