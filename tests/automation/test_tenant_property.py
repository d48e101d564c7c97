"""Two orgs creating records in any order, with any names, the other org's ids and names
included (issue 52): no answer to one org holds an id, a name or a count of the other's, and
no look-up by one org ever fails because of something the other made. At the service layer,
as the API's routes call it (``services.tenancy`` first, then the service), on both ledgers.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.app import App
from automation.auth.roles import Principal
from automation.errors import AnycloudError, NotFound
from automation.ledger import schema
from automation.ledger.records import find_live
from automation.services import clusters, credentials, node_pools, pool_status, projects, tenancy
from automation.services.deployments import create_deployment, list_deployments
from tests.automation.conftest import DEMO_CA

KINDS = ("project", "cluster", "credential", "node pool", "deployment")
SIDES = ("a", "b")
_TABLES = {"project": schema.projects, "cluster": schema.clusters,
           "credential": schema.credentials, "node pool": schema.node_pools,
           "deployment": schema.deployments}
# A name: a plain one (every one holds a '-', so that no name is ever part of an id), or
# one of the other org's ids or names, picked by index among those made so far.
_NAME = st.one_of(st.sampled_from(["web", "gpu", "db"]).map(lambda s: ("plain", s)),
                  st.integers(0, 9).map(lambda i: ("their-id", i)),
                  st.integers(0, 9).map(lambda i: ("their-name", i)))
_STEPS = st.lists(st.tuples(st.sampled_from(SIDES), st.sampled_from(KINDS), _NAME),
                  min_size=1, max_size=10)
_RUNS = itertools.count()


@dataclass
class Org:
    who: Principal
    made: dict[str, dict[str, str]] = field(default_factory=lambda: {k: {} for k in KINDS})
    sent: set[str] = field(default_factory=set)  # every name and ref this org gave
    answers: list[str] = field(default_factory=list)  # every answer it was given

    def owned(self) -> set[str]:
        return {self.who.org_id or ""} | {s for ids in self.made.values()
                                          for pair in ids.items() for s in pair}

    def latest(self, kind: str) -> str:
        return list(self.made[kind])[-1] if self.made[kind] else "none-yet"


def _name(choice: tuple[str, Any], run: int, other: Org) -> str:
    how, value = choice
    if how == "plain":
        return f"{value}-{run}"
    theirs = [(i, n) for ids in other.made.values() for i, n in ids.items()]
    if not theirs:
        return f"early-{run}"
    record_id, name = theirs[value % len(theirs)]
    return record_id if how == "their-id" else name


def _create(app: App, org: Org, kind: str, name: str, kubeconfig: Path) -> Any:
    """What the API's route does for a caller of ``org``: its refs resolved in its scope,
    then the service; clusters and credentials are an admin's, made into the org."""
    who, resolve = org.who, tenancy.resolve
    if kind == "project":
        return projects.create_project(app, name, tenancy.org_of_new_project(
            app, who, who.org_id or "", field="org"))
    if kind == "cluster":
        return clusters.register_cluster(app, clusters.RegisterCluster(
            name=name, kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1",
            ca_file=DEMO_CA, offline=True, org=who.org_id))
    if kind == "credential":
        return credentials.new_credential(app, credentials.NewCredential(
            name, "aws", {"profile": "team"}, org=who.org_id))
    if kind == "node pool":
        cluster = org.latest("cluster")
        credential = org.made["credential"].get(org.latest("credential"), "none-yet")
        org.sent |= {cluster, credential}
        return node_pools.create_node_pool(app, node_pools.CreateNodePool(
            name=name, region="us-east-1", vm_type="m7i.large", min_vms=1, max_vms=1,
            cluster=resolve(app, who, "cluster", cluster, field="cluster"),
            credentials=resolve(app, who, "credential", credential, field="credentials")))
    project = org.latest("project")
    org.sent.add(project)
    return create_deployment(app, name, resolve(app, who, "project", project, field="project"))


def _lists(app: App, who: Principal) -> dict[str, set[str]]:
    """The ids of every list the org's caller is answered."""
    def seen(kind: tenancy.Kind, items: list[Any]) -> set[str]:
        return {i.id for i in tenancy.only_visible(items, tenancy.visible_ids(app, who, kind))}

    return {"project": seen("project", projects.list_projects(app)),
            "cluster": seen("cluster", clusters.list_clusters(app)),
            "credential": seen("credential", credentials.list_credentials(app)),
            "node pool": seen("node pool", pool_status.list_node_pools(app.ledger)),
            "deployment": seen("deployment", list_deployments(app)),
            "org": seen("org", projects.list_orgs(app))}


def _check_lookups(app: App, org: Org) -> None:
    """Each record of ``org`` found by its id (in its scope, and unscoped as an admin's
    look-up is) and by its name where the org holds that name once."""
    for kind, made in org.made.items():
        names = list(made.values())
        for record_id, name in made.items():
            assert tenancy.resolve(app, org.who, kind, record_id, field="ref") == record_id  # type: ignore[arg-type]
            if names.count(name) == 1:
                assert tenancy.resolve(app, org.who, kind, name, field="ref") == record_id  # type: ignore[arg-type]
            with app.ledger.read() as conn:
                found = find_live(conn, _TABLES[kind], record_id, live=sa.true(), kind=kind,
                                  field="ref")
            assert found["id"] == record_id


@pytest.fixture
def kubeconfig_file(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=_STEPS)
def test_no_org_sees_or_breaks_the_others_records(
        app: App, kubeconfig_file: Path, steps: list[tuple[str, str, tuple[str, Any]]]) -> None:
    run = next(_RUNS)
    orgs = {side: Org(Principal(token_id=f"tok-{side}", name=f"{side}-member", role="member",
                                org_id=projects.create_org(app, f"org-{side}-{run}").id))
            for side in SIDES}
    for side, kind, choice in steps:
        org, other = orgs[side], orgs["b" if side == "a" else "a"]
        name = _name(choice, run, other)
        org.sent.add(name)
        try:
            record = _create(app, org, kind, name, kubeconfig_file)
        except AnycloudError as refused:  # a broken rule, a taken name, a ref out of scope
            org.answers.append(f"{refused.message} {refused.to_dict()}")
        else:
            org.made[kind][record.id] = record.name
            org.answers.append(record.model_dump_json())
    for side, other_side in (("a", "b"), ("b", "a")):
        org, other = orgs[side], orgs[other_side]
        listed = _lists(app, org.who)
        for kind in KINDS:  # its own records, all of them, and no count of the other's
            assert listed[kind] == set(org.made[kind]), (side, kind)
        assert listed["org"] == {org.who.org_id}
        for kind, made in other.made.items():  # the other's records: not found, as missing
            for ref in (*made, *made.values()):
                with pytest.raises(AnycloudError) as err:
                    tenancy.resolve(app, org.who, kind, ref, field="ref")  # type: ignore[arg-type]
                missing = NotFound(kind, ref, field="ref")  # exactly as a missing one
                assert err.value.to_dict() == missing.to_dict(), (side, kind, ref, err.value)
        leaked = {s for s in other.owned() - org.owned() - org.sent
                  for text in org.answers if s in text}
        assert not leaked, (side, leaked, [t for t in org.answers
                                           if any(s in t for s in leaked)])
        _check_lookups(app, org)
