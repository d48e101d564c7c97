"""Where a command's work is done: the services over the local ledger (embedded mode, the
default) or a control plane's API (remote mode: ``anycloud api use URL``). Both answer with
the same models and raise the same errors, so a command prints the same ``--json`` and exits
with the same code in both modes. Remote mode imports neither the services nor SQLAlchemy."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from automation.client.remote import Remote

if TYPE_CHECKING:
    from pathlib import Path

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
        MovedToOrg,
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
        RuntimeSigningKey,
        RuntimeToken,
        SecretMaterial,
        SecretsKeyRotation,
        SecretsKeyStatus,
        Workload,
    )
    from automation.sealing import SealingKey

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
        from automation.services.pool_drift import check_pool_drift

        app = self._app()
        return check_pool_drift(app, _runner_of(app, engine, simulate), ref)

    def create_token(self, name: str, role: str, pool: str | None,
                     expires_in: timedelta | None, bootstrap: bool, *, org: str | None = None,
                     project: str | None = None) -> IssuedToken:
        from automation.services.tokens import create_token

        return create_token(self._app(), name, role, by=_local_user(), expires_in=expires_in,
                            pool=pool, bootstrap=bootstrap, org=org, project=project)

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

    def secrets_key_status(self) -> SecretsKeyStatus:
        from automation.services import secrets_key

        return secrets_key.status(self._app())

    def rotate_secrets_key(self, new_key: SealingKey, batch_size: int,
                           settle: float) -> SecretsKeyRotation:
        from automation.services import secrets_key

        return secrets_key.rotate_key_file(self._app(), new_key, batch_size, settle)

    def signing_keys(self) -> list[RuntimeSigningKey]:
        from automation.services import runtime_tokens

        return runtime_tokens.signing_keys(self._app())

    def rotate_signing_key(self) -> list[RuntimeSigningKey]:
        from automation.services import runtime_tokens

        return runtime_tokens.rotate_signing_key(self._app())

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

    def update_kubeconfig(self, ref: str, kubeconfig: Path, context: str | None) -> Cluster:
        from automation.services.clusters import NewKubeconfig, update_kubeconfig

        return update_kubeconfig(self._app(), ref, NewKubeconfig(kubeconfig=kubeconfig,
                                                                 context=context))

    def move_cluster(self, ref: str, org: str) -> MovedToOrg:
        from automation.services.org_moves import move_cluster

        return move_cluster(self._app(), ref, org)

    def move_credential(self, ref: str, org: str) -> MovedToOrg:
        from automation.services.org_moves import move_credential

        return move_credential(self._app(), ref, org)

    def refresh_cluster(self, ref: str) -> Cluster:
        from automation.services.clusters import refresh_cluster

        return refresh_cluster(self._app(), ref)

    def delete_cluster(self, ref: str) -> Cluster:
        from automation.services.clusters import delete_cluster

        return delete_cluster(self._app(), ref)

    def new_credential(self, body: NewCredentialRequest) -> Credential:
        from automation.services import credentials

        return credentials.new_credential(self._app(), credentials.NewCredential(
            body.name, body.provider, body.options(), body.secret, org=body.org))

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
        from automation.services.pool_adopt import adopt_pool

        app = self._app()
        return adopt_pool(app, _runner_of(app, engine, simulate), ref)

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


Backend = Embedded | Remote


def backend_from(ctx: click.Context) -> Backend:
    root = ctx.find_root()
    if "backend" not in root.obj:
        from automation.cli.context import endpoint_from

        endpoint = endpoint_from(ctx)
        if endpoint.url is None:
            root.obj["backend"] = Embedded(ctx)
        else:
            from automation.cli.inputs import read_local_text

            root.obj["backend"] = Remote(api_client(endpoint), read_local_text)
    found: Backend = root.obj["backend"]
    return found


def api_client(endpoint: Any) -> ApiClient:
    from automation.client.http import ApiClient

    return ApiClient(endpoint.url, remote_token(endpoint), ca_file=endpoint.ca_file)


def remote_token(endpoint: Any) -> str:
    """Remote mode's token (``anycloud login`` or ANYCLOUD_TOKEN), or Unauthenticated; refused
    before anything is sent when it would cross a network in the clear (no --insecure)."""
    from automation.client.config import TOKEN_ENV
    from automation.errors import Unauthenticated

    endpoint.check_transport()
    if not endpoint.token:
        raise Unauthenticated(f"no token for {endpoint.url}: run anycloud login (or set "
                              f"{TOKEN_ENV})", field="token",
                              rule="remote mode sends an API token (anycloud token create)")
    token: str = endpoint.token
    return token


def _local_user() -> str:
    from automation.provisioners.superusers import current_user

    return f"local:{current_user()[0]}"


def _runner_of(app: Any, engine: str | None, simulate: bool) -> Callable[[], Any]:
    """The StackRunner a pool command asks for, made when the service needs it: ``engine``'s,
    or with ``simulate`` the simulated cloud kept in $ANYCLOUD_HOME/sim under the mock engine
    or, named, the real one (an unknown engine or a missing tool refused at once, before
    anything is read)."""
    from automation.engine.select import make_runner

    if simulate:
        from automation.cli.simulation import check_engine

        check_engine(engine)

    def runner() -> Any:
        if not simulate:
            return make_runner(app.home, engine)
        from automation.cli.simulation import simulated_runner
        from automation.simulators.world import SimWorld

        world = SimWorld(app.home / "sim")
        app.clock = world.clock
        return simulated_runner(app, world, engine)

    return runner
