"""Seed 002's rules over real static provisioners and the ledger (SQLite and PostgreSQL):
resolution at start, running deployments kept, moves that keep the id and release the old
slots exactly once, the global default moving nothing provisioned."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.clock import ManualClock
from automation.errors import Conflict, InvalidInput
from automation.ledger import open_ledger, schema
from automation.provisioners.provisioner_set import ProvisionerSet, StaticEntry
from automation.services import deployments as deps
from automation.services import projects
from automation.services.provisioner_factory import provisioners


def static(host: str, slots: int = 2) -> StaticEntry:
    return StaticEntry.model_validate({"type": "static", "spec": {"runtimes": [
        {"host": host, "slots": slots, "data_dir": "/data", "audience_url": host}]}})


def the_set(default: str = "a", b_slots: int = 2) -> ProvisionerSet:
    return ProvisionerSet(provisioners={"a": static("http://a:1"),
                                        "b": static("http://b:1", b_slots),
                                        "c": static("http://c:1")}, default=default)


@pytest.fixture
def app(ledger_url: str) -> Iterator[App]:
    ledger = open_ledger(ledger_url)
    app = App(ledger=ledger, clock=ManualClock())
    projects.create_org(app, "acme")
    projects.create_project(app, "web", "acme")
    yield app
    ledger.dispose()


def held(app: App) -> list[tuple[str, str]]:
    """(provision id, provisioner) of every static slot allocation."""
    with app.ledger.read() as conn:
        return sorted((r.provision_id, r.provisioner) for r in conn.execute(
            sa.select(schema.static_allocations)))


def start(app: App, ref: str, pset: ProvisionerSet) -> Any:
    return deps.start_deployment(app, ref, pset, provisioners(app, pset))


def test_created_stopped_then_started_with_the_global_default(app: App) -> None:
    d = deps.create_deployment(app, "api", "web")
    assert (d.state, d.provisioner, d.runtime_host) == ("stopped", None, None)
    assert held(app) == []
    up = start(app, "api", the_set())
    assert (up.state, up.provisioner, up.runtime_host) == ("running", "a", "http://a:1")
    assert up.provision_id == d.provision_id and held(app) == [(d.provision_id, "a")]


def test_a_project_change_applies_only_from_stopped_to_running(app: App) -> None:
    pset = the_set()
    d = start(app, deps.create_deployment(app, "api", "web").id, pset)
    projects.set_project_provisioner(app, "web", "b", pset, by="root")
    assert start(app, "api", pset).provisioner == "a"  # running: kept
    moved = deps.restart_deployment(app, "api", pset, provisioners(app, pset))
    assert (moved.provisioner, moved.runtime_host) == ("b", "http://b:1")
    assert moved.provision_id == d.provision_id and moved.move is None
    assert held(app) == [(d.provision_id, "b")]  # a's slot released, exactly once


def test_org_default_applies_when_the_project_chooses_none(app: App) -> None:
    pset = the_set()
    start(app, deps.create_deployment(app, "api", "web").id, pset)
    projects.set_org_default_provisioner(app, "acme", "c", pset, by="root")
    assert deps.restart_deployment(app, "api", pset, provisioners(app, pset)).provisioner == "c"
    projects.set_project_provisioner(app, "web", "b", pset, by="root")  # the project wins
    assert deps.restart_deployment(app, "api", pset, provisioners(app, pset)).provisioner == "b"


def test_the_global_default_and_unsetting_move_nothing_provisioned(app: App) -> None:
    pset = the_set()
    start(app, deps.create_deployment(app, "old", "web").id, pset)
    other = the_set(default="c")  # the global default changed
    kept = deps.restart_deployment(app, "old", other, provisioners(app, other))
    assert kept.provisioner == "a"
    assert start(app, deps.create_deployment(app, "new", "web").id, other).provisioner == "c"
    projects.set_project_provisioner(app, "web", "b", other, by="root")
    assert deps.restart_deployment(app, "old", other, provisioners(app, other)).provisioner == "b"
    projects.set_project_provisioner(app, "web", None, other, by="root")  # unset
    assert deps.restart_deployment(app, "old", other, provisioners(app, other)).provisioner == "b"
    status = deps.choice_for(app, deps.get_deployment(app, "old"), other)
    assert (status.name, status.level) == ("b", "current")


def test_a_move_the_new_provisioner_refuses_releases_nothing(app: App) -> None:
    pset = the_set(b_slots=1)
    start(app, deps.create_deployment(app, "one", "web").id, pset)
    projects.set_project_provisioner(app, "web", "b", pset, by="root")
    start(app, deps.create_deployment(app, "two", "web").id, pset)  # takes b's only slot
    with pytest.raises(Conflict, match="no runtime with 1 free slot"):
        deps.restart_deployment(app, "one", pset, provisioners(app, pset))
    kept = deps.get_deployment(app, "one")  # still running on a, its slot kept
    assert (kept.state, kept.provisioner, kept.move) == ("running", "a", None)
    assert "free slot" in (kept.last_error or "")
    assert (kept.provision_id, "a") in held(app)
    deps.stop_deployment(app, "one")  # a plain start is refused the same way
    with pytest.raises(Conflict, match="no runtime with 1 free slot"):
        start(app, "one", pset)
    assert deps.get_deployment(app, "one").move is None
    deps.delete_deployment(app, "two", provisioners(app, pset))
    done = start(app, "one", pset)
    assert (done.provisioner, done.move, done.last_error) == ("b", None, None)
    assert held(app) == [(done.provision_id, "b")]


def test_a_pending_move_follows_the_choice_in_force(app: App) -> None:
    pset = the_set()
    d = start(app, deps.create_deployment(app, "api", "web").id, pset)
    projects.set_project_provisioner(app, "web", "b", pset, by="root")
    deps.stop_deployment(app, "api")
    # Stopped mid-move after a's release (as a crash there leaves it): headed to b.
    with app.ledger.write() as conn:
        conn.execute(schema.deployments.update().where(schema.deployments.c.id == d.id)
                     .values(move={"from": "a", "to": "b", "step": "provision"},
                             provisioner=None))
        conn.execute(schema.static_allocations.delete())
    projects.set_project_provisioner(app, "web", "c", pset, by="root")  # redirected
    moved = start(app, "api", pset)
    assert (moved.provisioner, moved.move) == ("c", None)
    assert held(app) == [(d.provision_id, "c")]


def test_delete_needs_no_provisioner_back(app: App) -> None:
    pset = the_set()
    d = start(app, deps.create_deployment(app, "api", "web").id, pset)
    without_a = ProvisionerSet(provisioners={"b": static("http://b:1")}, default="b")
    gone = deps.delete_deployment(app, "api", provisioners(app, without_a))
    assert gone.state == "deleted" and held(app) == []  # the ledger's slots freed
    assert "not released: a:" in (gone.last_error or "")
    assert f"anycloud.sh/provision-id={d.provision_id}" in (gone.last_error or "")


def test_delete_releases_the_runtime(app: App) -> None:
    pset = the_set()
    d = start(app, deps.create_deployment(app, "api", "web").id, pset)
    gone = deps.delete_deployment(app, "api", provisioners(app, pset))
    assert gone.state == "deleted" and held(app) == []
    assert deps.create_deployment(app, "api", "web").provision_id != d.provision_id


def test_names_and_choices_are_checked(app: App) -> None:
    with pytest.raises(InvalidInput):
        deps.create_deployment(app, "Bad_Name", "web")
    deps.create_deployment(app, "api", "web")
    with pytest.raises(Conflict, match="already exists"):
        deps.create_deployment(app, "api", "web")
    with pytest.raises(InvalidInput, match="must name a provisioner of the set"):
        projects.set_project_provisioner(app, "web", "nope", the_set(), by="root")
    with pytest.raises(Conflict):
        projects.create_org(app, "acme")


def test_a_cluster_that_cannot_be_reached_is_a_domain_error_and_nothing_moves(
        app: App, tmp_path: Any) -> None:
    """The issue's case: a kubernetes provisioner whose kubeconfig does not exist. Before,
    a restart released the static slot, then failed INTERNAL with the deployment stranded."""
    from pathlib import Path

    from automation.errors import AnycloudError
    from automation.provisioners.provisioner_set import KubernetesEntry

    root = Path(__file__).resolve().parents[3]
    broken = KubernetesEntry.model_validate({"type": "kubernetes", "spec": {
        "timeout_seconds": 5, "data_dir": "/data", "host": "http://k-*.localhost",
        "namespace": "rt", "image": "example/runtime",
        "kubeconfig_path": str(tmp_path / "no-such-kubeconfig.yaml"),
        "template_paths": {"deployment": "k8s/runtime-templates/deployment.yaml",
                           "service": "k8s/runtime-templates/service.yaml"}}})
    pset = ProvisionerSet(provisioners={"a": static("http://a:1"), "k": broken}, default="a")
    built = provisioners(app, pset, root)
    d = deps.start_deployment(app, deps.create_deployment(app, "api", "web").id, pset, built)
    projects.set_project_provisioner(app, "web", "k", pset, by="root")
    with pytest.raises(AnycloudError) as err:
        deps.restart_project(app, "web", pset, built)
    assert err.value.code == "PROVISIONER_UNAVAILABLE" and "'k'" in err.value.message
    kept = deps.get_deployment(app, "api")
    assert (kept.state, kept.provisioner, kept.move) == ("running", "a", None)
    # Shown redacted (issue 23: no kubeconfig path in what users see); the ledger keeps it.
    assert "cannot load kubeconfig <file>" in (kept.last_error or "")
    assert "no-such-kubeconfig" not in (kept.last_error or "")
    with app.ledger.read() as conn:
        stored = conn.execute(schema.deployments.select().where(
            schema.deployments.c.id == kept.id)).mappings().one()["last_error"]
    assert "no-such-kubeconfig" in stored
    assert held(app) == [(d.provision_id, "a")]


def test_a_static_runtime_removed_from_the_set_is_left_by_a_restart(app: App) -> None:
    two = ProvisionerSet(provisioners={"a": StaticEntry.model_validate({
        "type": "static", "spec": {"runtimes": [
            {"host": h, "slots": 2, "data_dir": "/data", "audience_url": h}
            for h in ("http://a:1", "http://a:2")]}})}, default="a")
    d = start(app, deps.create_deployment(app, "api", "web").id, two)
    assert d.runtime_host == "http://a:1"
    one = ProvisionerSet(provisioners={"a": static("http://a:2")}, default="a")
    health = deps.deployment_health(deps.get_deployment(app, "api"), provisioners(app, one))
    assert health is not None and not health.ok and "deployment restart" in health.detail
    moved = deps.restart_deployment(app, "api", one, provisioners(app, one))
    assert (moved.state, moved.runtime_host) == ("running", "http://a:2")
    assert held(app) == [(d.provision_id, "a")]


def test_a_move_that_would_change_the_shared_data_is_refused_naming_both(app: App) -> None:
    def with_data(host: str, bucket: str) -> StaticEntry:
        entry = static(host).model_dump()
        entry["spec"].update(data_bucket=bucket, metastore_id="ms-1")
        return StaticEntry.model_validate(entry)

    pset = ProvisionerSet(provisioners={"a": with_data("http://a:1", "s3://acme-data"),
                                        "b": with_data("http://b:1", "s3://other-data"),
                                        "c": with_data("http://c:1", "s3://acme-data")},
                          default="a")
    d = start(app, deps.create_deployment(app, "api", "web").id, pset)
    projects.set_project_provisioner(app, "web", "b", pset, by="root")
    with pytest.raises(Conflict) as err:
        deps.restart_deployment(app, "api", pset, provisioners(app, pset))
    assert err.value.code == "SHARED_DATA_DIFFERS" and err.value.field == "data_bucket"
    assert "'s3://acme-data' to 's3://other-data'" in err.value.message
    kept = deps.get_deployment(app, "api")
    assert (kept.state, kept.provisioner) == ("running", "a") and kept.last_error
    assert held(app) == [(d.provision_id, "a")]
    projects.set_project_provisioner(app, "web", "c", pset, by="root")  # the same data
    assert deps.restart_deployment(app, "api", pset, provisioners(app, pset)).provisioner == "c"
