"""Remote mode's backend: every command's work as a call to the control plane's API
(``anycloud api use URL``), answering as the embedded backend does (``automation.cli.backend``)
and raising the same errors. Reads that a command only prints or tabulates answer the server's
JSON as it came; the rest are read into the same models. It imports none of the server's code
(an import-linter contract keeps ``automation.client`` so)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import timedelta
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
        Org,
        Plan,
        PolicyReport,
        PoolUnlock,
        Project,
        ProjectDeployment,
        RunResult,
        RuntimeToken,
        SecretMaterial,
        SecretsKeyRotation,
        Workload,
    )
    from automation.sealing import SealingKey

    # Progress of one stack's preview: a sink for its events, and what to call when done.
    Progress = Callable[[str], "tuple[ProgressSink | None, Callable[[], None] | None]"]

PAGE = 1000  # the largest page the API gives: fewest round trips for a full list


class Remote:
    """The commands' work as calls to the API. ``read_local_file(option, path)``: the text
    of a file a command names (a kubeconfig, a CA), sent in the request body."""

    def __init__(self, client: ApiClient, read_local_file: Callable[[str, str], str]) -> None:
        self.client = client
        self.read_local_file = read_local_file

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
            page: dict[str, Any] = self.client.get_json(path, asked)
            items += page["items"]
            token = page.get("nextPageToken")
            if not token:
                return items

    # Reads answer the server's JSON as it came (the contract): a command prints it or
    # builds its table from it, and never loads the models to do so.
    def list_node_pools(self, cluster: str | None) -> list[dict[str, Any]]:
        return self._pages("/node-pools", {"cluster": cluster} if cluster is not None else {})

    def node_pool_status(self, ref: str, *, ingress: bool = True) -> dict[str, Any]:
        found: dict[str, Any] = self.client.get_json(f"/node-pools/{_segment(ref)}")
        return found

    def node_pool_history(self, ref: str, limit: int) -> dict[str, Any]:
        found: dict[str, Any] = self.client.get_json(
            f"/node-pools/{_segment(ref)}/history", {"limit": limit})
        return found

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
                     expires_in: timedelta | None, bootstrap: bool, *, org: str | None = None,
                     project: str | None = None) -> IssuedToken:
        from automation.client.http import dump
        from automation.models import IssuedToken, NewToken

        if bootstrap:
            from automation.errors import InvalidInput

            raise InvalidInput("--bootstrap", True, "writes the control plane's own ledger: "
                               "run it on the server's host in embedded mode "
                               "(anycloud --api local token create ... --bootstrap)")
        seconds = int(expires_in.total_seconds()) if expires_in else None
        body = NewToken(name=name, role=role, pool=pool, expires_in_seconds=seconds, org=org,
                        project=project)
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

    def secrets_key_status(self) -> dict[str, Any]:
        found: dict[str, Any] = self.client.get_json("/secrets-key")
        return found

    def rotate_secrets_key(self, new_key: SealingKey, batch_size: int,
                           settle: float) -> SecretsKeyRotation:
        """The server seals under its own key file's first key: only the new key's id is
        sent, for the server to confirm it is that key."""
        from automation.models import SecretsKeyRotation

        return self.client.call("POST", "/secrets-key/rotate", SecretsKeyRotation,
                                json={"keyId": new_key.key_id.hex(), "batchSize": batch_size,
                                      "settleSeconds": settle})

    def signing_keys(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.client.get_json("/runtime-keys")
        return found

    def rotate_signing_key(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.client.call("POST", "/runtime-keys/rotate", list)
        return found

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
        ca_file = options.get("ca_file")
        body = RegisterClusterRequest(
            name=options["name"],
            kubeconfig=SecretStr(self.read_local_file("--kubeconfig", options["kubeconfig"])),
            context=options.get("context"), server_url=options.get("server_url"),
            kubernetes_version=options.get("kubernetes_version"),
            offline=options.get("offline", False),
            allow_private_address=options.get("allow_private_address", False),
            org=options.get("org"),
            ca_pem=self.read_local_file("--ca-file", ca_file) if ca_file else None)
        return self.client.call("POST", "/clusters", Cluster, json=dump(body))

    def update_kubeconfig(self, ref: str, kubeconfig: Path, context: str | None) -> Cluster:
        """The new kubeconfig's contents, read here and sent (the server seals them)."""
        from automation.client.http import dump
        from automation.models import Cluster, NewKubeconfigRequest

        self._secrets_may_go()
        body = NewKubeconfigRequest.model_validate({
            "kubeconfig": self.read_local_file("--kubeconfig", str(kubeconfig)),
            "context": context})
        return self.client.call("PUT", f"/clusters/{_segment(ref)}/kubeconfig", Cluster,
                                json=dump(body))

    def move_cluster(self, ref: str, org: str) -> MovedToOrg:
        from automation.models import MovedToOrg

        return self.client.call("POST", f"/clusters/{_segment(ref)}/move", MovedToOrg,
                                json={"org": org})

    def move_credential(self, ref: str, org: str) -> MovedToOrg:
        from automation.models import MovedToOrg

        return self.client.call("POST", f"/credentials/{_segment(ref)}/move", MovedToOrg,
                                json={"org": org})

    def refresh_cluster(self, ref: str) -> Cluster:
        from automation.models import Cluster

        return self.client.call("POST", f"/clusters/{_segment(ref)}/refresh", Cluster)

    def delete_cluster(self, ref: str) -> Cluster:
        from automation.models import Cluster

        return self.client.call("DELETE", f"/clusters/{_segment(ref)}", Cluster)

    def _secrets_may_go(self) -> None:
        """A secret goes over TLS, or to this machine; never in the clear over a network."""
        from automation.client.config import in_the_clear

        # --insecure does not lift this: it is about the API token, not a cloud's secret.
        if in_the_clear(self.client.base_url):
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
