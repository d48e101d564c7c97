"""Where a command's work is done: the services over the local ledger (embedded mode, the
default) or a control plane's API (remote mode: ``anycloud api use URL``). Both answer with
the same models and raise the same errors, so a command prints the same ``--json`` and exits
with the same code in both modes. Remote mode imports neither the services nor SQLAlchemy."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from automation.client.http import ApiClient
    from automation.engine.runner import ProgressSink
    from automation.models import (
        ApiToken,
        CatalogEntry,
        CatalogRefresh,
        CatalogRefreshed,
        CatalogType,
        Cluster,
        CostReport,
        Credential,
        DailyCost,
        DeploymentStatus,
        DriftReport,
        EngineUnlock,
        IssuedToken,
        NewCredentialRequest,
        NewDeployment,
        NewNodePool,
        NodePool,
        NodePoolCreated,
        NodePoolStatus,
        Org,
        Plan,
        PolicyReport,
        PoolHistory,
        PoolUnlock,
        Project,
        ProjectDeployment,
        RunResult,
        RuntimeToken,
        SecretMaterial,
        Workload,
    )

PAGE = 1000  # the largest page the API gives: fewest round trips for a full list
# Progress of one stack's preview: a sink for its events, and what to call when it is done.
Progress = Callable[[str], "tuple[ProgressSink | None, Callable[[], None] | None]"]


class Embedded:
    """``local``: the control plane's own ledger even in remote mode (``--bootstrap``)."""

    def __init__(self, ctx: click.Context, *, local: bool = False) -> None:
        self.ctx = ctx
        self.local = local

    def _app(self) -> Any:
        from automation.cli.context import app_from

        return app_from(self.ctx, local=self.local)

    def _ledger(self) -> Any:
        from automation.cli.context import ledger_from

        return ledger_from(self.ctx, local=self.local)

    def create_node_pool(self, body: NewNodePool) -> NodePoolCreated:
        from automation.services.node_pools import create_node_pool_reported

        return create_node_pool_reported(self._app(), body)

    def list_node_pools(self, cluster: str | None) -> list[NodePoolStatus]:
        from automation.services.pool_status import list_node_pools

        return list_node_pools(self._ledger(), cluster)

    def node_pool_status(self, ref: str, *, ingress: bool = True) -> NodePoolStatus:
        from automation.services import ingress_status, pool_status

        if ingress:
            return ingress_status.pool_status_with_ingress(
                self._ledger(), ref, lambda row: self._app().kubeconfig_path(row))
        return pool_status.node_pool_status(self._ledger(), ref)

    def node_pool_history(self, ref: str, limit: int) -> PoolHistory:
        from automation.services.pool_history import read_pool_history

        return read_pool_history(self._ledger(), ref, limit)

    def delete_node_pool(self, ref: str) -> NodePool:
        from automation.services.node_pools import delete_node_pool

        return delete_node_pool(self._app(), ref)

    def check_pool_drift(self, ref: str, engine: str | None, simulate: bool) -> DriftReport:
        """``simulate``: the simulated cloud kept in $ANYCLOUD_HOME/sim (mock engine), the
        one ``reconcile --simulate`` runs the pools on."""
        from automation.engine.select import make_runner
        from automation.services.pool_drift import check_pool_drift

        app = self._app()

        def runner() -> Any:
            if not simulate:
                return make_runner(app.home, engine)
            from automation.simulators.world import SimWorld

            world = SimWorld(app.home / "sim")
            app.clock = world.clock
            return make_runner(app.home, "mock", cloud=world.cloud)

        return check_pool_drift(app, runner, ref)

    def create_token(self, name: str, role: str, pool: str | None,
                     expires_in: timedelta | None, bootstrap: bool) -> IssuedToken:
        from automation.services.tokens import create_token

        return create_token(self._app(), name, role, by=_local_user(), expires_in=expires_in,
                            pool=pool, bootstrap=bootstrap)

    def list_tokens(self, include_revoked: bool) -> list[ApiToken]:
        from automation.services.tokens import list_tokens

        return list_tokens(self._app(), include_revoked=include_revoked)

    def revoke_token(self, name: str) -> ApiToken:
        from automation.services.tokens import revoke_token

        return revoke_token(self._app(), name, by=_local_user())

    def list_clusters(self) -> list[Cluster]:
        from automation.services.clusters import list_clusters

        return list_clusters(self._app())

    def get_cluster(self, ref: str) -> Cluster:
        from automation.services.clusters import get_cluster

        return get_cluster(self._app(), ref)

    def list_credentials(self) -> list[Credential]:
        from automation.services.credentials import list_credentials

        return list_credentials(self._app())

    def _provisioning(self) -> Any:
        from automation.cli.context import provisioner_set_from
        from automation.services.deployment_ops import Provisioning

        return Provisioning(self._app(), lambda: provisioner_set_from(self.ctx))

    def create_deployment(self, body: NewDeployment) -> ProjectDeployment | Workload:
        from automation.services import deployment_ops

        with self._provisioning() as provisioning:
            return deployment_ops.create(self._app(), body, provisioning)

    def start_deployment(self, ref: str, *, restart: bool = False) -> ProjectDeployment:
        from automation.services import deployment_ops

        with self._provisioning() as provisioning:
            return deployment_ops.start(self._app(), ref, provisioning, restart=restart)

    def stop_deployment(self, ref: str) -> ProjectDeployment:
        from automation.services import deployment_ops

        return deployment_ops.stop(self._app(), ref)

    def deployment_status(self, ref: str) -> DeploymentStatus | Workload:
        from automation.services import deployment_ops

        with self._provisioning() as provisioning:
            return deployment_ops.status(self._app(), ref, provisioning)

    def list_deployments(self, project: str | None) -> list[ProjectDeployment | Workload]:
        from automation.services import deployment_ops

        return deployment_ops.list_all(self._app(), project)

    def delete_deployment(self, ref: str) -> ProjectDeployment | Workload:
        from automation.services import deployment_ops

        with self._provisioning() as provisioning:
            return deployment_ops.delete(self._app(), ref, provisioning)

    def deployment_token(self, ref: str, ttl_seconds: int | None) -> RuntimeToken:
        from automation.services import runtime_tokens

        return runtime_tokens.deployment_token(self._app(), ref, ttl_seconds)

    def jwks(self) -> dict[str, Any]:
        from automation.services import runtime_tokens

        return runtime_tokens.jwks(self._app())

    def _superuser(self) -> str:
        from automation.cli.context import config_path
        from automation.provisioners.superusers import require_superuser

        return require_superuser(config_path(self.ctx))

    def set_project_provisioner(self, project: str, provisioner: str | None) -> Project:
        from automation.cli.context import provisioner_set_from
        from automation.services.projects import set_project_provisioner

        who = self._superuser()
        return set_project_provisioner(self._app(), project, provisioner,
                                       provisioner_set_from(self.ctx), by=who)

    def restart_project(self, project: str) -> list[ProjectDeployment]:
        from automation.services.deployments import restart_project

        self._superuser()
        with self._provisioning() as found:
            return restart_project(self._app(), project, found.provisioner_set, found)

    def set_org_default_provisioner(self, org: str, provisioner: str | None) -> Org:
        from automation.cli.context import provisioner_set_from
        from automation.services.projects import set_org_default_provisioner

        who = self._superuser()
        return set_org_default_provisioner(self._app(), org, provisioner,
                                           provisioner_set_from(self.ctx), by=who)

    def create_org(self, name: str) -> Org:
        from automation.services.projects import create_org

        return create_org(self._app(), name)

    def list_orgs(self) -> list[Org]:
        from automation.services.projects import list_orgs

        return list_orgs(self._app())

    def create_project(self, name: str, org: str) -> Project:
        from automation.services.projects import create_project

        return create_project(self._app(), name, org)

    def list_projects(self, org: str | None) -> list[Project]:
        from automation.services.projects import list_projects

        return list_projects(self._app(), org)

    def register_cluster(self, options: dict[str, Any]) -> Cluster:
        """``options``: ``cluster register``'s (the kubeconfig referenced by its path)."""
        from automation.services.clusters import RegisterCluster, register_cluster

        return register_cluster(self._app(), RegisterCluster(**options))

    def refresh_cluster(self, ref: str) -> Cluster:
        from automation.services.clusters import refresh_cluster

        return refresh_cluster(self._app(), ref)

    def delete_cluster(self, ref: str) -> Cluster:
        from automation.services.clusters import delete_cluster

        return delete_cluster(self._app(), ref)

    def new_credential(self, body: NewCredentialRequest) -> Credential:
        from automation.services import credentials

        return credentials.new_credential(self._app(), credentials.NewCredential(
            body.name, body.provider, body.options(), body.secret))

    def rotate_credential(self, ref: str, secret: SecretMaterial) -> Credential:
        from automation.services.credentials import rotate_credential

        return rotate_credential(self._app(), ref, secret)

    def delete_credential(self, ref: str) -> Credential:
        from automation.services.credentials import delete_credential

        return delete_credential(self._app(), ref)

    def plan_pool(self, ref: str) -> Plan:
        from automation.services.rollout import plan_pool

        return plan_pool(self._app(), ref)

    def check_pool_policy(self, ref: str) -> PolicyReport:
        from automation.services.rollout import check_pool_policy

        return check_pool_policy(self._app(), ref)

    def unlock_pool(self, ref: str, engine: str | None) -> PoolUnlock:
        from automation.engine.select import make_runner
        from automation.services.rollout import unlock_pool

        app = self._app()
        return unlock_pool(app, lambda: make_runner(app.home, engine), ref)

    def unlock_addons(self, ref: str, engine: str | None) -> EngineUnlock:
        from automation.engine.select import make_runner
        from automation.services.rollout import unlock_addons

        app = self._app()
        return unlock_addons(app, lambda: make_runner(app.home, engine), ref)

    def preview(self, refs: list[str] | None, *, addons: bool, diff: bool,
                engine: str | None, progress: Progress) -> list[RunResult]:
        """Each ref's node-pool stack (None: every live pool), or with ``addons`` each
        cluster's add-on stack, previewed with this machine's engine."""
        from automation.engine.select import make_runner
        from automation.services.rollout import preview_addons, preview_pool
        from automation.stack_targets import live_pool_ids

        app = self._app()
        runner = make_runner(app.home, engine)
        run = preview_addons if addons else preview_pool
        results: list[RunResult] = []
        for ref in live_pool_ids(app) if refs is None else refs:
            sink, done = progress(ref)
            try:
                results.append(run(app, lambda: runner, ref, diff=diff, on_progress=sink))
            finally:
                if done:
                    done()
        return results

    def adopt_pool(self, ref: str, engine: str | None, simulate: bool) -> RunResult:
        """``simulate``: the simulated cloud kept in $ANYCLOUD_HOME/sim (mock engine)."""
        from automation.engine.select import make_runner
        from automation.services.pool_adopt import adopt_pool

        app = self._app()

        def runner() -> Any:
            if not simulate:
                return make_runner(app.home, engine)
            from automation.simulators.world import SimWorld

            world = SimWorld(app.home / "sim")
            app.clock = world.clock
            return make_runner(app.home, "mock", cloud=world.cloud)

        return adopt_pool(app, runner, ref)

    def check_all_policy(self) -> list[PolicyReport]:
        from automation.services.rollout import check_all

        return check_all(self._app())

    def _catalog(self) -> Any:
        """The shipped catalog under the ledger's refreshes; the bare shipped one when there
        is no ledger yet (no refresh can exist, and a read-only command creates none)."""
        import os

        from automation.catalog.overlay import LedgerOverlay
        from automation.catalog.store import load_catalog
        from automation.ledger.db import _sqlite_path
        from automation.settings import Settings

        url = Settings.from_env(self.ctx.find_root().obj.get("home")).database_url
        path = _sqlite_path(url) if url.startswith("sqlite") else None
        if url.startswith("sqlite") and (path is None or not os.path.exists(path)):
            return load_catalog()
        # App.catalog's overlay, without the App (its cluster probe costs ~15 ms to import).
        return load_catalog().with_overlay(LedgerOverlay(self._ledger()))

    def catalog_list(self, filters: dict[str, Any]) -> list[CatalogEntry]:
        """``filters``: ``automation.catalog.store.ListFilter``'s fields."""
        from automation.catalog.store import ListFilter
        from automation.services.catalog_view import list_types

        return list_types(self._catalog(), ListFilter(**filters))

    def catalog_show(self, vm_type: str, provider: str | None) -> CatalogType:
        from automation.services.catalog_view import show_type

        return show_type(self._catalog(), vm_type, provider)

    def catalog_refresh(self, credentials: str, regions: list[str]) -> CatalogRefreshed:
        from automation.services import catalog_refresh
        from automation.services.catalog_view import refreshed

        return refreshed(catalog_refresh.refresh(self._app(), credentials, tuple(regions)))

    def catalog_refreshes(self) -> list[CatalogRefresh]:
        from automation.services.catalog_view import refreshes

        return refreshes(self._app())

    def cost_report(self, by: str, since: str | None) -> CostReport:
        from automation.clock import SystemClock
        from automation.services import cost_report as costs

        return costs.cost_report(
            self._ledger(), SystemClock().now(), by=costs.group_by(by),
            since=costs.parse_since(since) if since is not None else None)

    def cost_daily(self, days: int) -> DailyCost:
        from automation.clock import SystemClock
        from automation.services.cost_report import cost_by_day

        return cost_by_day(self._ledger(), SystemClock().now(), days=days)


class Remote:
    def __init__(self, client: ApiClient) -> None:
        self.client = client

    def create_node_pool(self, body: NewNodePool) -> NodePoolCreated:
        from automation.client.http import dump
        from automation.models import NodePoolCreated

        return self.client.call("POST", "/node-pools", NodePoolCreated, json=dump(body))

    def _pages(self, path: str, params: dict[str, Any] | None = None
               ) -> list[dict[str, Any]]:
        """Every item of a list route, page after page (the largest pages the API gives)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            asked = {**(params or {}), "pageSize": PAGE}
            if token:
                asked["pageToken"] = token
            page: dict[str, Any] = self.client.call("GET", path, dict, params=asked)
            items += page["items"]
            token = page.get("nextPageToken")
            if not token:
                return items

    def list_node_pools(self, cluster: str | None) -> list[NodePoolStatus]:
        from automation.models import NodePoolStatus

        return [NodePoolStatus.model_validate(i) for i in self._pages(
            "/node-pools", {"cluster": cluster} if cluster is not None else {})]

    def node_pool_status(self, ref: str, *, ingress: bool = True) -> NodePoolStatus:
        from automation.models import NodePoolStatus

        return self.client.call("GET", f"/node-pools/{_segment(ref)}", NodePoolStatus)

    def node_pool_history(self, ref: str, limit: int) -> PoolHistory:
        from automation.models import PoolHistory

        return self.client.call("GET", f"/node-pools/{_segment(ref)}/history", PoolHistory,
                                params={"limit": limit})

    def delete_node_pool(self, ref: str) -> NodePool:
        from automation.models import NodePool

        return self.client.call("DELETE", f"/node-pools/{_segment(ref)}", NodePool)

    def check_pool_drift(self, ref: str, engine: str | None, simulate: bool) -> DriftReport:
        """With the server's engine (``ANYCLOUD_ENGINE``): ``--engine``/``--simulate`` choose
        this machine's engine, which remote mode does not run."""
        from automation.errors import InvalidInput
        from automation.models import DriftReport

        if engine is not None or simulate:
            raise InvalidInput("--engine" if engine is not None else "--simulate",
                               engine if engine is not None else True,
                               "remote mode checks drift with the server's engine")
        return self.client.call("POST", f"/node-pools/{_segment(ref)}/drift-check",
                                DriftReport)

    def create_token(self, name: str, role: str, pool: str | None,
                     expires_in: timedelta | None, bootstrap: bool) -> IssuedToken:
        from automation.client.http import dump
        from automation.models import IssuedToken, NewToken

        if bootstrap:
            from automation.errors import InvalidInput

            raise InvalidInput("--bootstrap", True, "writes the control plane's own ledger: "
                               "run it on the server's host in embedded mode "
                               "(anycloud --api local token create ... --bootstrap)")
        seconds = int(expires_in.total_seconds()) if expires_in else None
        body = NewToken(name=name, role=role, pool=pool, expires_in_seconds=seconds)
        return self.client.call("POST", "/tokens", IssuedToken, json=dump(body))

    def list_tokens(self, include_revoked: bool) -> list[ApiToken]:
        from automation.models import ApiToken

        return [ApiToken.model_validate(t) for t in self._pages(
            "/tokens", {"all": "true"} if include_revoked else {})]

    def revoke_token(self, name: str) -> ApiToken:
        from automation.models import ApiToken

        return self.client.call("DELETE", f"/tokens/{_segment(name)}", ApiToken)

    def list_clusters(self) -> list[Cluster]:
        from automation.models import Cluster

        return [Cluster.model_validate(c) for c in self._pages("/clusters")]

    def get_cluster(self, ref: str) -> Cluster:
        from automation.models import Cluster

        return self.client.call("GET", f"/clusters/{_segment(ref)}", Cluster)

    def list_credentials(self) -> list[Credential]:
        from automation.models import Credential

        return [Credential.model_validate(c) for c in self._pages("/credentials")]

    def create_deployment(self, body: NewDeployment) -> ProjectDeployment | Workload:
        from automation.client.http import dump

        return _deployment(self.client.call("POST", "/deployments", dict, json=dump(body)))

    def start_deployment(self, ref: str, *, restart: bool = False) -> ProjectDeployment:
        from automation.models import ProjectDeployment

        verb = "restart" if restart else "start"
        return self.client.call("POST", f"/deployments/{_segment(ref)}/{verb}",
                                ProjectDeployment)

    def stop_deployment(self, ref: str) -> ProjectDeployment:
        from automation.models import ProjectDeployment

        return self.client.call("POST", f"/deployments/{_segment(ref)}/stop", ProjectDeployment)

    def deployment_status(self, ref: str) -> DeploymentStatus | Workload:
        from automation.models import DeploymentStatus, Workload

        doc: dict[str, Any] = self.client.call("GET", f"/deployments/{_segment(ref)}", dict)
        return (DeploymentStatus if "projectId" in doc else Workload).model_validate(doc)

    def list_deployments(self, project: str | None) -> list[ProjectDeployment | Workload]:
        return [_deployment(d) for d in self._pages(
            "/deployments", {"project": project} if project else {})]

    def delete_deployment(self, ref: str) -> ProjectDeployment | Workload:
        return _deployment(self.client.call("DELETE", f"/deployments/{_segment(ref)}", dict))

    def deployment_token(self, ref: str, ttl_seconds: int | None) -> RuntimeToken:
        from automation.models import RuntimeToken

        return self.client.call("POST", f"/deployments/{_segment(ref)}/token", RuntimeToken,
                                json={"ttlSeconds": ttl_seconds})

    def jwks(self) -> dict[str, Any]:
        return self.client.call("GET", "/.well-known/jwks.json", dict)

    def set_project_provisioner(self, project: str, provisioner: str | None) -> Project:
        from automation.client.http import dump
        from automation.models import Project, SetProvisioner

        return self.client.call("POST", f"/sudo/projects/{_segment(project)}/provisioner",
                                Project, json=dump(SetProvisioner(provisioner=provisioner)))

    def restart_project(self, project: str) -> list[ProjectDeployment]:
        from automation.models import ProjectDeployment

        return self.client.call("POST", f"/sudo/projects/{_segment(project)}/restart",
                                list[ProjectDeployment])

    def set_org_default_provisioner(self, org: str, provisioner: str | None) -> Org:
        from automation.client.http import dump
        from automation.models import Org, SetProvisioner

        return self.client.call("POST", f"/sudo/orgs/{_segment(org)}/default-provisioner",
                                Org, json=dump(SetProvisioner(provisioner=provisioner)))

    def create_org(self, name: str) -> Org:
        from automation.client.http import dump
        from automation.models import NewOrg, Org

        return self.client.call("POST", "/orgs", Org, json=dump(NewOrg(name=name)))

    def list_orgs(self) -> list[Org]:
        from automation.models import Org

        return [Org.model_validate(o) for o in self._pages("/orgs")]

    def create_project(self, name: str, org: str) -> Project:
        from automation.client.http import dump
        from automation.models import NewProject, Project

        return self.client.call("POST", "/projects", Project,
                                json=dump(NewProject(name=name, org=org)))

    def list_projects(self, org: str | None) -> list[Project]:
        from automation.models import Project

        return [Project.model_validate(p) for p in self._pages(
            "/projects", {"org": org} if org else {})]

    def register_cluster(self, options: dict[str, Any]) -> Cluster:
        """``cluster register``'s options; the kubeconfig and CA files are read here and
        sent (the server seals the kubeconfig)."""
        from pydantic import SecretStr

        from automation.client.http import dump
        from automation.models import Cluster, RegisterClusterRequest

        self._secrets_may_go()
        from automation.cli.inputs import read_local_text

        ca_file = options.get("ca_file")
        body = RegisterClusterRequest(
            name=options["name"],
            kubeconfig=SecretStr(read_local_text("--kubeconfig", options["kubeconfig"])),
            context=options.get("context"), server_url=options.get("server_url"),
            kubernetes_version=options.get("kubernetes_version"),
            offline=options.get("offline", False),
            allow_private_address=options.get("allow_private_address", False),
            ca_pem=read_local_text("--ca-file", ca_file) if ca_file else None)
        return self.client.call("POST", "/clusters", Cluster, json=dump(body))

    def refresh_cluster(self, ref: str) -> Cluster:
        from automation.models import Cluster

        return self.client.call("POST", f"/clusters/{_segment(ref)}/refresh", Cluster)

    def delete_cluster(self, ref: str) -> Cluster:
        from automation.models import Cluster

        return self.client.call("DELETE", f"/clusters/{_segment(ref)}", Cluster)

    def _secrets_may_go(self) -> None:
        """A secret goes over TLS, or to this machine; never in the clear over a network."""
        from urllib.parse import urlsplit

        url = urlsplit(self.client.base_url)
        if url.scheme != "https" and url.hostname not in ("127.0.0.1", "::1", "localhost"):
            from automation.errors import InvalidInput

            raise InvalidInput("api", self.client.base_url, "is plain HTTP: a secret is sent "
                               "only over HTTPS (or to this machine's loopback)")

    def new_credential(self, body: NewCredentialRequest) -> Credential:
        from automation.client.http import dump
        from automation.models import Credential

        if body.secret is not None:
            self._secrets_may_go()
        return self.client.call("POST", "/credentials", Credential, json=dump(body))

    def rotate_credential(self, ref: str, secret: SecretMaterial) -> Credential:
        from automation.client.http import dump
        from automation.models import Credential, RotateCredentialRequest

        self._secrets_may_go()
        return self.client.call("POST", f"/credentials/{_segment(ref)}/rotate", Credential,
                                json=dump(RotateCredentialRequest(secret=secret)))

    def delete_credential(self, ref: str) -> Credential:
        from automation.models import Credential

        return self.client.call("DELETE", f"/credentials/{_segment(ref)}", Credential)

    def plan_pool(self, ref: str) -> Plan:
        from automation.models import Plan

        return self.client.call("GET", f"/node-pools/{_segment(ref)}/plan", Plan)

    def check_pool_policy(self, ref: str) -> PolicyReport:
        from automation.models import PolicyReport

        return self.client.call("GET", f"/node-pools/{_segment(ref)}/policy", PolicyReport)

    def unlock_pool(self, ref: str, engine: str | None) -> PoolUnlock:
        from automation.models import PoolUnlock

        _servers_engine(engine)
        return self.client.call("POST", f"/node-pools/{_segment(ref)}/unlock", PoolUnlock)

    def unlock_addons(self, ref: str, engine: str | None) -> EngineUnlock:
        from automation.models import EngineUnlock

        _servers_engine(engine)
        return self.client.call("POST", f"/clusters/{_segment(ref)}/addons/unlock",
                                EngineUnlock)

    def preview(self, refs: list[str] | None, *, addons: bool, diff: bool,
                engine: str | None, progress: Progress) -> list[RunResult]:
        """The server previews with its engine; its progress is not streamed here."""
        from automation.models import PoolPreview, RunResult

        _servers_engine(engine)
        params = {"diff": "true"} if diff else None
        if refs is None:
            found: list[RunResult] = self.client.call("GET", "/preview", list[PoolPreview],
                                                      params=params)
            return found
        path, model = (("/clusters/{}/addons/preview", RunResult) if addons
                       else ("/node-pools/{}/preview", PoolPreview))
        return [self.client.call("GET", path.format(_segment(ref)), model, params=params)
                for ref in refs]

    def adopt_pool(self, ref: str, engine: str | None, simulate: bool) -> RunResult:
        from automation.models import RunResult

        _servers_engine(engine)
        if simulate:
            from automation.errors import InvalidInput

            raise InvalidInput("--simulate", True, "adopts from a simulated cloud on this "
                               "machine: not in remote mode (the server's engine decides)")
        return self.client.call("POST", f"/node-pools/{_segment(ref)}/adopt", RunResult)

    def check_all_policy(self) -> list[PolicyReport]:
        from automation.models import PolicyReport

        return self.client.call("GET", "/policy", list[PolicyReport])

    def catalog_list(self, filters: dict[str, Any]) -> list[CatalogEntry]:
        from automation.models import CatalogEntry

        params = {_CATALOG_QUERY.get(k, k): v for k, v in filters.items() if v is not None}
        return self.client.call("GET", "/catalog", list[CatalogEntry], params=params)

    def catalog_show(self, vm_type: str, provider: str | None) -> CatalogType:
        from automation.models import CatalogType

        return self.client.call("GET", f"/catalog/{_segment(vm_type)}", CatalogType,
                                params={"provider": provider} if provider else None)

    def catalog_refresh(self, credentials: str, regions: list[str]) -> CatalogRefreshed:
        from automation.client.http import dump
        from automation.models import CatalogRefreshed, RefreshCatalog

        return self.client.call("POST", "/catalog/refreshes", CatalogRefreshed, json=dump(
            RefreshCatalog(credentials=credentials, regions=regions)))

    def catalog_refreshes(self) -> list[CatalogRefresh]:
        from automation.models import CatalogRefresh

        return self.client.call("GET", "/catalog/refreshes", list[CatalogRefresh])

    def cost_report(self, by: str, since: str | None) -> CostReport:
        from automation.models import CostReport

        params = {"by": by} | ({"since": since} if since is not None else {})
        return self.client.call("GET", "/cost", CostReport, params=params)

    def cost_daily(self, days: int) -> DailyCost:
        from automation.models import DailyCost

        return self.client.call("GET", "/cost/daily", DailyCost, params={"days": days})


Backend = Embedded | Remote


def backend_from(ctx: click.Context) -> Backend:
    root = ctx.find_root()
    if "backend" not in root.obj:
        from automation.cli.context import endpoint_from

        endpoint = endpoint_from(ctx)
        if endpoint.url is None:
            root.obj["backend"] = Embedded(ctx)
        else:
            root.obj["backend"] = Remote(api_client(endpoint))
    found: Backend = root.obj["backend"]
    return found


def api_client(endpoint: Any) -> ApiClient:
    from automation.client.http import ApiClient

    return ApiClient(endpoint.url, remote_token(endpoint), ca_file=endpoint.ca_file)


def remote_token(endpoint: Any) -> str:
    """Remote mode's token (``anycloud login`` or ANYCLOUD_TOKEN), or Unauthenticated."""
    from automation.client.config import TOKEN_ENV
    from automation.errors import Unauthenticated

    if not endpoint.token:
        raise Unauthenticated(f"no token for {endpoint.url}: run anycloud login (or set "
                              f"{TOKEN_ENV})", field="token",
                              rule="remote mode sends an API token (anycloud token create)")
    token: str = endpoint.token
    return token


def _deployment(doc: dict[str, Any]) -> ProjectDeployment | Workload:
    """A project deployment or a placement on a node pool, told apart by their fields."""
    from automation.models import ProjectDeployment, Workload

    return (ProjectDeployment if "projectId" in doc else Workload).model_validate(doc)


# ListFilter's fields as GET /v1/catalog names them.
_CATALOG_QUERY = {"min_gpus": "minGpus", "min_vcpus": "minVcpus",
                  "min_memory_gib": "minMemoryGib", "max_price": "maxPriceUsdHour"}


def _servers_engine(engine: str | None) -> None:
    if engine is not None:
        from automation.errors import InvalidInput

        raise InvalidInput("--engine", engine, "is the server's choice in remote mode "
                           "(its ANYCLOUD_ENGINE): leave it out")


def _segment(ref: str) -> str:
    from urllib.parse import quote

    return quote(ref, safe="")


def _local_user() -> str:
    from automation.provisioners.superusers import current_user

    return f"local:{current_user()[0]}"
