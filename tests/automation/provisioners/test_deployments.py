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


def test_a_failed_start_keeps_its_intent_and_a_retry_finishes_it(app: App) -> None:
    pset = the_set(b_slots=1)
    start(app, deps.create_deployment(app, "one", "web").id, pset)
    projects.set_project_provisioner(app, "web", "b", pset, by="root")
    start(app, deps.create_deployment(app, "two", "web").id, pset)  # takes b's only slot
    deps.stop_deployment(app, "one")
    with pytest.raises(Conflict, match="no runtime with 1 free slot"):
        start(app, "one", pset)
    stuck = deps.get_deployment(app, "one")
    assert stuck.move == {"from": "a", "to": "b", "step": "provision"}
    assert stuck.provisioner is None and "free slot" in (stuck.last_error or "")
    deps.delete_deployment(app, "two", provisioners(app, pset))
    done = start(app, "one", pset)
    assert (done.provisioner, done.move, done.last_error) == ("b", None, None)
    assert held(app) == [(done.provision_id, "b")]


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
