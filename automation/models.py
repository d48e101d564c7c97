"""Domain records as the services return them (pydantic), and their lifecycle states."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_serializer,
)
from pydantic.alias_generators import to_camel

from automation.recorded_engines import RecordedEngine
from automation.redact import redact

# An error or event as users see it (CLI text and --json, the API, the SDK): redacted when
# the model is built, so no path to the user can skip it -- status, list, delete and the
# ingress view alike (automation.redact says what goes). This is the one boundary on
# purpose: the ledger keeps the detail for operators, and the services that know the
# cluster's own values redact those first with their labels (services.pool_status).
ShownText = Annotated[str | None, AfterValidator(redact)]


def _shown(text: str) -> str:
    return redact(text) or text


# The same for a text that is always there (a runtime's health detail).
ShownDetail = Annotated[str, AfterValidator(_shown)]


class ClusterState(StrEnum):
    PENDING = "pending"
    READY = "ready"
    DELETED = "deleted"


class PoolState(StrEnum):
    PENDING = "pending"
    PROVISIONING = "provisioning"
    READY = "ready"
    FAILED = "failed"  # parked: provisions nothing until deleted and recreated
    DELETING = "deleting"
    DELETED = "deleted"


LIVE_POOL_STATES = frozenset(PoolState) - {PoolState.DELETED}


class AttemptState(StrEnum):
    PENDING = "pending"  # row written, no cloud call confirmed yet
    CREATING = "creating"
    RUNNING = "running"
    RELEASING = "releasing"
    RELEASED = "released"


class WorkloadKind(StrEnum):
    DEPLOYMENT = "deployment"
    SERVICE = "service"


class WorkloadState(StrEnum):
    ACTIVE = "active"
    TERMINATED = "terminated"  # its objects on the cluster are not yet confirmed removed
    REMOVED = "removed"


# The JSON convention of every ``--json`` output: camelCase keys. Models are built and read by
# their snake_case field names (constructors, ``model_validate(row)`` from ledger rows,
# attribute access); ``model_dump`` / ``model_dump(mode="json")`` give ``entryIp``, not
# ``entry_ip``. Every model the CLI prints derives from ``CamelModel`` or uses this config.
# They also read their own camelCase JSON back (remote mode reads the API's answers).
CAMEL_JSON = ConfigDict(
    alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    serialize_by_alias=True,
    validate_by_name=True,
    validate_by_alias=True,
    defer_build=True,
)


class CamelModel(BaseModel):
    """Built by field name, serialized with camelCase keys (``entry_ip`` -> ``entryIp``)."""

    model_config = CAMEL_JSON


# A name anycloud gives to what it creates (pool, cluster, credential, token, org, project,
# deployment): a DNS-1123 label. The pattern is the one ``validation.check_name`` applies; in
# a request body it is documented (the OpenAPI document, the SDK) and checked by the service,
# whose refusal names the field and the rule.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
Name = Annotated[str, Field(json_schema_extra={"pattern": DNS_LABEL_PATTERN, "minLength": 1,
                                               "maxLength": 63})]

# The most VMs one pool may hold: one node pool of the clouds' own Kubernetes services holds
# at most 1,000 nodes (AKS: "Maximum nodes per node pool"; GKE: "Nodes per node pool zone"),
# and a pool is one stack, created and replaced whole. ``validation.check_vm_counts`` applies
# it; a request body documents it, as ``Name`` does its pattern.
MAX_VMS = 1000
VmCount = Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": MAX_VMS})]
# The most slots one deployment may ask: enough for any runtime, and a templated runtime's
# size (slots times per_slot) stays a sane quantity. The deployments service applies it.
MAX_SLOTS = 1024
SlotCount = Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": MAX_SLOTS})]


class CamelRequest(BaseModel):
    """A request body of the API: camelCase keys (snake_case accepted too), unknown keys
    refused, so a misspelt field is an error rather than a default."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True,
                              validate_by_alias=True, serialize_by_alias=True, extra="forbid",
                              defer_build=True)


class _Record(CamelModel):
    model_config = ConfigDict(frozen=True, from_attributes=True)


class SecretSummary(CamelModel):
    """What may be shown of a stored secret: never the secret, only a keyed fingerprint (to
    tell two apart) and its non-secret fields (an access key's id, masked; an email)."""

    model_config = ConfigDict(frozen=True)

    fingerprint: str
    fields: dict[str, str] = Field(default_factory=dict)
    stored_at: datetime
    rotated_at: datetime | None = None


class MovedToOrg(CamelModel):
    """``cluster move`` and ``credentials move``: what now belongs to ``org_id`` (names)."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    clusters: list[str]
    node_pools: list[str]
    credentials: list[str]


class MoveToOrg(CamelRequest):
    """``POST /v1/clusters/{ref}/move`` and ``POST /v1/credentials/{ref}/move``."""

    org: str  # name or id


class SecretsKeyStatus(CamelModel):
    """``secrets-key status``: the key a server seals under, the previous keys it still opens
    with (a rotation under way), and how many sealed secrets each key id holds; ``unreadable``
    counts those sealed under a key this server does not hold."""

    model_config = ConfigDict(frozen=True)

    key_id: str
    previous_key_ids: list[str]
    sealed: dict[str, int]
    unreadable: int


class SecretsKeyRotation(SecretsKeyStatus):
    """``secrets-key rotate``: the secrets sealed again under ``key_id`` by this run, in how
    many batches (one transaction each), and the counts after it."""

    resealed: int
    batches: int


class RotateSecretsKey(CamelRequest):
    """``POST /v1/secrets-key/rotate``: the id of the key to seal everything under, which
    must be the server's current key (the first in its key file). The key itself never
    travels: the server reads it from its own key file."""

    key_id: str
    batch_size: int = 100
    # Seconds before the last pass, for a request that read the old key before the new one
    # was put first (automation.services.secrets_key).
    settle_seconds: float = 2.0


class Cluster(_Record):
    id: str
    name: str
    state: ClusterState
    server_url: str
    ca_sha256: str | None
    kubernetes_version: str | None
    kube_system_uid: str | None
    kubeconfig_path: str | None
    kube_context: str | None
    facts_source: str | None
    last_error: ShownText
    org_id: str  # the owning org (issue 36)
    created_at: datetime
    updated_at: datetime
    # A kubeconfig sent to the API: sealed by the server, shown by fingerprint and server.
    sealed_kubeconfig: SecretSummary | None = None


class Credential(_Record):
    id: str
    name: str
    provider: str
    reference: dict[str, Any]
    state: str
    org_id: str  # the owning org (issue 36)
    created_at: datetime
    # Secret material the server holds sealed (remote mode); None: the reference alone.
    secret: SecretSummary | None = None

    @field_serializer("reference")
    def _camel_reference(self, reference: dict[str, Any]) -> dict[str, Any]:
        """Stored by option name (``role_arn``, ``key_file``); shown as ``roleArn``, ``keyFile``."""
        return {to_camel(k): v for k, v in reference.items()}


class NodePool(_Record):
    id: str
    name: str
    cluster_id: str
    credential_id: str
    provider: str
    region: str
    zone: str | None
    vm_type: str
    min_vms: int
    max_vms: int
    state: PoolState
    hosts_service: bool
    last_error: ShownText
    org_id: str  # its cluster's org (issue 36)
    created_at: datetime
    updated_at: datetime


class NodePoolCreated(NodePool):
    """``node-pool create``'s answer (CLI ``--json`` and ``POST /v1/node-pools``)."""

    zone_chosen: bool  # no zone was asked: the first zone of the region offering the type
    warnings: list[str]
    cost: Cost  # the estimate at max_vms


class VmCounts(CamelModel):
    ready: int = 0
    starting: int = 0
    draining: int = 0


ReleaseState = Literal["absent", "installing", "installed", "failed"]
HelmJobPhase = Literal["pending", "running", "retrying", "succeeded", "failed"]


class _CamelView(CamelModel):
    """A read-only view computed at request time (camelCase JSON, like every model here)."""

    model_config = ConfigDict(frozen=True)


class HelmJob(_CamelView):
    """The helm-controller's install Job. ``retrying``: the install container exited non-zero
    and the Job starts it again; ``message``: that non-zero exit (or why the Job failed)."""

    phase: HelmJobPhase
    message: ShownText = None


class IngressDaemonSet(_CamelView):
    """The Traefik DaemonSet Helm created in the release namespace."""

    desired: int
    ready: int
    entry_node_ready: bool


class IngressRelease(_CamelView):
    """A Service-hosting pool's ingress release, read from the cluster at request time.

    ``state`` None: the cluster could not be read (``last_event`` says why).
    """

    state: ReleaseState | None
    helm_job: HelmJob | None = None
    daemon_set: IngressDaemonSet | None = None
    last_event: ShownText = None


class IngressView(_CamelView):
    """``ingress`` of node-pool status; ``release`` None for a pool that hosts no Service."""

    entry_ip: str | None = None
    release: IngressRelease | None = None


class Cost(CamelModel):
    """A pool's rate: ``vms`` x the hourly list price. Prices None: the catalog has none
    (``hint`` says why and where to look). Built by automation.services.cost."""

    model_config = ConfigDict(frozen=True)

    vms: int
    hourly_usd: float | None
    monthly_usd: float | None
    source: str | None = None
    as_of: str | None = None
    stale: bool = False  # the source is known to be out of date (apache-libcloud's EC2 prices)
    hint: str | None = None


GroupBy = Literal["pool", "cluster", "provider"]  # what ``anycloud cost`` sums by


class CostLine(CamelModel):
    """One group of ``anycloud cost``: VM hours billed since ``since`` and their cost at list
    price. ``unpriced_vm_hours``: hours of VMs the catalog has no price for (not in ``usd``).
    ``simulated_vm_hours``: hours of VMs the mock engine ran; it bought nothing, so they are
    in neither ``vm_hours`` nor ``usd``."""

    model_config = ConfigDict(frozen=True)

    group: str
    pool_id: str | None = None  # --by pool: names repeat across clusters and after deletes
    vm_hours: float
    usd: float
    unpriced_vm_hours: float
    simulated_vm_hours: float
    sources: list[str]
    hints: list[str]


class CostReport(CamelModel):
    model_config = ConfigDict(frozen=True)

    by: GroupBy
    since: datetime | None
    until: datetime
    lines: list[CostLine]
    total_usd: float
    total_vm_hours: float
    unpriced_vm_hours: float
    simulated_vm_hours: float


class PoolDailyCost(CamelModel):
    """One pool's cost at list price on each day of ``DailyCost.days`` (same order), and in
    all. ``unpriced_vm_hours``, ``sources`` and ``hints`` as in ``CostLine``."""

    model_config = ConfigDict(frozen=True)

    pool_id: str
    pool: str
    cluster: str
    per_day: list[float]
    total: float
    unpriced_vm_hours: float
    sources: list[str]
    hints: list[str]


class DailyCost(CamelModel):
    """``anycloud cost --daily``: cost per UTC day over the last ``len(days)`` days (today
    until ``until``), per pool, largest total first. Days with no cost are zeros."""

    model_config = ConfigDict(frozen=True)

    days: list[date]
    since: datetime
    until: datetime
    currency: Literal["USD"] = "USD"
    pools: list[PoolDailyCost]
    per_day: list[float]
    total_usd: float
    unpriced_vm_hours: float
    simulated_vm_hours: float


class DriftChange(CamelModel):
    """One resource whose live state differs from what its stack applied: its URN, type and
    name, what a refresh would do to the stack's state (``update``: changed outside anycloud;
    ``delete``: gone from the cloud, the next up creates it again) and the names of the
    properties that differ. Never a value: a property may hold a secret."""

    urn: str
    type: str
    name: str
    op: Literal["update", "delete"]
    properties: list[str] = Field(default_factory=list)


def drift_source(engine: str) -> str:
    """What a drift check compared the stack's state with, as the user reads it: the mock
    engine's checks read the simulated cloud, the real engine's through the stand-in
    plugins the stand-in cloud; never a real one."""
    return {"mock": "simulated cloud", "standin": "stand-in cloud"}.get(engine, "cloud")


class DriftReport(CamelModel):
    """The last drift check of a pool's stack: a refresh previewed (nothing written). ``error``
    when the check itself failed (its changes are then unknown, not none). ``source`` says
    what was compared: ``cloud`` (the real engine read the provider), ``simulated cloud`` (the
    mock engine read the simulator), ``stand-in cloud`` (the real engine read the simulator
    through the stand-in plugins)."""

    checked_at: datetime
    engine: RecordedEngine
    source: str
    changes: list[DriftChange] = Field(default_factory=list)
    error: ShownText = None
    error_code: str | None = None
    seconds: float | None = None  # how long the check took


class PoolHold(_CamelView):
    """A node pool held by the mass-failure brake (``automation.reconciler.brake``): too
    many of its cluster's VMs are NotReady or never joined, so none of its VMs is replaced
    and none bought until the cluster's Nodes recover."""

    reason: str  # "cluster-wide failure"
    evidence: str  # "7 of 12 VMs across 3 pools NotReady or never joined; since …"
    since: datetime  # the earliest failure counted


class NodePoolStatus(CamelModel):
    """What ``node-pool status`` shows: no credentials, endpoints, Pods or Node objects."""

    id: str
    name: str
    cluster: str
    credentials: str
    provider: str
    region: str
    zone: str | None
    vm_type: str
    vms: int
    state: PoolState
    last_error: ShownText
    # A stable code for scripts (ENGINE_MISMATCH, CLUSTER_UNAVAILABLE, ENGINE_FAILED, …).
    last_error_code: str | None = None
    counts: VmCounts
    hosts_service: bool
    # Pools hosting a Service: the public IP of the elected ingress entry (None until elected).
    ingress_entry_ip: str | None = None
    # Only ``node-pool status`` reads it (automation.services.ingress_status); None elsewhere.
    ingress: IngressView | None = None
    # The VMs billed now (confirmed by the provider, not yet released) x the list price.
    cost: Cost | None = None
    # Who runs the pool's live VMs: "mock" when the mock engine does, "standin" when the real
    # engine does over the stand-in cloud (simulated both: nothing was bought, nothing is
    # billed), "pulumi" for the real engine, None before any VM.
    engine: RecordedEngine | None = None
    # The last drift check of the pool's stack (``node-pool status --check-drift`` or the
    # reconciler's periodic one, ANYCLOUD_DRIFT_INTERVAL); None when never checked.
    drift: DriftReport | None = None
    # Held by the mass-failure brake, with its evidence; None when not held.
    held: PoolHold | None = None
    created_at: datetime
    updated_at: datetime


class PoolRef(_CamelView):
    id: str
    name: str


class VmAttemptView(_CamelView):
    """One VM attempt of a pool, released ones included (``node-pool history``).

    ``joined_at``: when its Node appeared (its bootstrap token was removed then);
    ``reason``: why it is being or was released, or its last error, redacted like status's."""

    id: str
    state: AttemptState
    replaces: str | None = None
    replaced_by: str | None = None
    created_at: datetime
    vm_created_at: datetime | None = None
    joined_at: datetime | None = None
    released_at: datetime | None = None
    reason: ShownText = None


class PoolEvent(_CamelView):
    at: datetime
    kind: str
    message: ShownText


class PoolHistory(_CamelView):
    """``node-pool history``: the pool's VM attempts and its last events, newest first."""

    pool: PoolRef
    attempts: list[VmAttemptView]
    events: list[PoolEvent]


class PolicyFinding(CamelModel):
    policy: str
    enforcement: str  # mandatory | advisory | disabled
    message: str
    urn: str | None = None


Operation = Literal["preview", "up", "destroy", "refresh", "adopt"]


class ChangeSummary(CamelModel):
    create: int = 0
    update: int = 0
    replace: int = 0
    delete: int = 0
    same: int = 0

    @property
    def changes(self) -> int:
        return self.create + self.update + self.replace + self.delete

    @classmethod
    def from_op_counts(cls, counts: Any) -> ChangeSummary:
        """From the engine's change summary (operation → count); the step-level operations
        (create-replacement, delete-replaced, …) are already folded into ``replace`` there."""
        plain = {str(getattr(op, "value", op)): int(n) for op, n in dict(counts or {}).items()}
        return cls(**{k: plain.get(k, 0) for k in cls.model_fields})


class RunResult(CamelModel):
    engine: Literal["pulumi", "mock"]
    operation: Operation
    stack: str
    summary: ChangeSummary = Field(default_factory=ChangeSummary)
    diff: str = ""
    outputs: dict[str, Any] = Field(default_factory=dict)
    policy: list[PolicyFinding] = Field(default_factory=list)

    @property
    def mandatory_violations(self) -> list[PolicyFinding]:
        return [p for p in self.policy if p.enforcement == "mandatory"]


class PoolPreview(RunResult):
    """A node-pool stack's preview, with what its VMs will cost once applied."""

    pool: str
    cost: Cost


class PlannedResource(CamelModel):
    urn: str
    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]  # wire names; secrets as "[secret]"


class Plan(CamelModel):
    """``node-pool plan``: the stack program evaluated under the mock engine."""

    engine: str = "mock"
    pool: str
    stack: str
    resources: list[PlannedResource]
    # What to check before rolling out (an image pin not verified first-hand, …).
    warnings: list[str] = []
    cost: Cost  # the planned VMs at the list price


class PolicyReport(CamelModel):
    pool: str | None = None  # a node-pool stack …
    cluster: str | None = None  # … or a cluster's add-on stack
    stack: str
    engine: str = "mock"
    findings: list[PolicyFinding]

    @property
    def mandatory(self) -> list[PolicyFinding]:
        return [f for f in self.findings if f.enforcement == "mandatory"]


class StackUnlock(CamelModel):
    stack: str
    unlocked: bool  # False: the engine keeps no lock (the mock engine), nothing to clear


class EngineUnlock(StackUnlock):
    """A stack unlocked by an engine (``cluster addons unlock``)."""

    engine: str


class PoolUnlock(EngineUnlock):
    """``node-pool unlock``: the pool's own stack, and its ingress release's (None: the pool
    hosts no Service)."""

    ingress_release: StackUnlock | None = None


class CatalogSource(CamelModel):
    """Where a catalog figure comes from and the date it was true: a row of the shipped
    catalog's sources (an integer id) or a live refresh (``refresh-…/prices``)."""

    id: int | str
    name: str
    url: str
    licence: str
    as_of: str
    stale: bool
    note: str | None = None


class CatalogSpecs(CamelModel):
    provider: str
    vm_type: str
    arch: str
    vcpus: int
    memory_gib: float
    gpus: int
    gpu_model: str | None
    family: str


class CatalogEntry(CatalogSpecs):
    """``catalog list``: a type in one region (``region`` asked) or in its cheapest region
    with a known price; ``regions``: how many regions offer it within the filter."""

    region: str
    regions: int
    zones: list[str] | None  # None: unknown
    price_usd_hour: float | None
    price_source: CatalogSource | None


class CatalogOffering(CamelModel):
    region: str
    zones: list[str] | None
    zones_source_id: int | str | None
    price_usd_hour: float | None
    price_source_id: int | str | None


class CatalogType(CatalogSpecs):
    """``catalog show``: a type, every region offering it, and the sources of its figures."""

    spec_source_id: int | str | None
    offerings: list[CatalogOffering]
    sources: list[CatalogSource]


class CatalogPriceChange(CamelModel):
    vm_type: str
    old_usd_hour: float | None
    new_usd_hour: float | None


class CatalogRegionRefresh(CamelModel):
    region: str
    types: int
    offerings: int
    prices: int
    new_types: list[str]
    gone_offerings: list[str]
    price_changes: list[CatalogPriceChange]
    compared_with: str  # where the data in use before came from


class CatalogRefreshed(CamelModel):
    """``catalog refresh``: what one refresh read from a cloud's APIs, region by region."""

    id: str
    provider: str
    credential: str
    fetched_at: str  # UTC, to the second
    sources: list[str]
    warnings: list[str]
    regions: list[CatalogRegionRefresh]


class CatalogRefresh(CamelModel):
    """``catalog refreshes``: a stored refresh (the newest of each region is in use)."""

    id: str
    provider: str
    credential: str
    regions: list[str]
    fetched_at: str
    counts: dict[str, Any]


class RefreshCatalog(CamelRequest):
    credentials: str = Field(description="The stored credential (name or id) to read the "
                                         "cloud with; it fixes the cloud.")
    regions: list[str] = Field(default_factory=list, description="Regions to read; none: "
                               "the cloud's regions with live pools, else every region.")


class Workload(_Record):
    id: str
    name: str
    kind: WorkloadKind
    pool_id: str
    state: WorkloadState
    created_at: datetime


class Event(_Record):
    id: int
    at: datetime
    subject_kind: str
    subject_id: str
    kind: str
    message: str
    data: dict[str, Any] | None


class Org(_Record):
    id: str
    name: str
    default_provisioner: str | None = None
    created_at: datetime


class Project(_Record):
    id: str
    name: str
    org_id: str
    provisioner: str | None = None
    created_at: datetime


class ProjectDeployment(_Record):
    """A deployment of a project: its runtime resource and where it runs (issue 12)."""

    id: str
    name: str
    project_id: str
    state: str  # stopped | running | deleted
    provision_id: str
    provisioner: str | None = None  # what its runtime is provisioned with
    runtime_host: str | None = None
    data_dir: str | None = None
    move: dict[str, Any] | None = None  # a move in progress (from, to, step)
    last_error: ShownText = None
    node_pool_id: str | None = None  # set while a nodepool provisioner holds objects there
    resources: dict[str, Any] | None = None  # slots, cpu, memory, storage asked of the runtime
    audience: str | None = None  # what its runtime verifies tokens for (set with the host)
    created_at: datetime
    updated_at: datetime


class NextStart(CamelModel):
    provisioner: str
    level: str  # project | org | global | current


class RuntimeHealth(CamelModel):
    ok: bool
    detail: ShownDetail


class DeploymentStatus(ProjectDeployment):
    """``deployment status``: the deployment, what its next start would use, and what its
    provisioner finds of the runtime now (None: nothing provisioned)."""

    next_start: NextStart | None = None  # None: the set is missing or broken (set_problem)
    health: RuntimeHealth | None = None
    set_problem: ShownText = None  # what is wrong with the provisioner set, if anything


class ApiToken(_Record):
    """An API token as ``token list`` shows it: never the token itself (issue 20)."""

    id: str
    name: str
    role: str  # admin | member | viewer | agent
    scope: str | None = None  # an agent token's AgentPool, "<namespace>/<name>"
    org_id: str | None = None  # a member's or viewer's tenant; None: every org
    project_id: str | None = None
    prefix: str  # the token's first characters, to tell tokens apart
    state: str  # active | expired | revoked
    created_by: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None


class IssuedToken(ApiToken):
    """``token create``'s answer: the only time the token is shown."""

    token: str


class NewRuntimeToken(CamelRequest):
    """``POST /v1/deployments/{ref}/token``: how long the token lives (default 300 s)."""

    ttl_seconds: int | None = None


class RuntimeSigningKey(CamelModel):
    """``deployment keys list``: a key that signs runtime tokens (``signing``, the newest),
    one still published so the tokens it signed verify until they expire (``verifying``,
    until ``retires_at``), or one out of the key set (``retired``)."""

    model_config = ConfigDict(frozen=True)

    kid: str
    state: Literal["signing", "verifying", "retired"]
    created_at: datetime
    superseded_at: datetime | None = None
    retires_at: datetime | None = None
    retired_at: datetime | None = None


class RuntimeToken(CamelModel):
    """``deployment token``: a token the deployment's runtime accepts (verified against
    ``GET /.well-known/jwks.json``), shown once and never stored."""

    token: str
    audience: str  # the runtime's audience URL (the token's aud)
    subject: str  # the deployment's provision id (the token's sub)
    key_id: str  # the signing key (the JWT header's kid)
    expires_at: datetime


class NewNodePool(CamelRequest):
    """``POST /v1/node-pools`` (``node-pool create``'s options)."""

    name: Name
    cluster: str | None = None  # id or name; default: the only registered cluster
    credentials: str
    region: str
    zone: str | None = None
    vm_type: str
    min_vms: VmCount
    max_vms: VmCount


class NewDeployment(CamelRequest):
    """``POST /v1/deployments`` (``deployment create``'s options)."""

    name: Name
    project: str | None = None  # a project deployment (a runtime from the provisioner set)
    node_pool: str | None = None  # or work placed on a node pool
    service: bool = False  # with node_pool: a Service
    start: bool = False  # with project: start it at once
    slots: SlotCount | None = None
    cpu: str | None = None
    memory: str | None = None
    storage: str | None = None


class SetProvisioner(CamelRequest):
    """``sudo``'s choice of provisioner (null or absent: unset)."""

    provisioner: str | None = None


class NewOrg(CamelRequest):
    """``POST /v1/orgs``."""

    name: Name


class NewProject(CamelRequest):
    """``POST /v1/projects``."""

    name: Name
    org: str  # name or id


class RegisterClusterRequest(CamelRequest):
    """``POST /v1/clusters`` (``cluster register``'s options; the kubeconfig's contents, which
    the server seals, and the offline CA as PEM text)."""

    name: Name
    kubeconfig: SecretStr
    context: str | None = None
    server_url: str | None = None
    kubernetes_version: str | None = None
    ca_pem: str | None = None
    offline: bool = False
    # The caller says the VMs reach a private server address (VPC peering, a VPN).
    allow_private_address: bool = False
    org: str | None = None  # the owning org (name or id); default: the org named default


class NewKubeconfigRequest(CamelRequest):
    """``PUT /v1/clusters/{ref}/kubeconfig`` (``cluster update --kubeconfig``): the new
    kubeconfig's contents, which the server reads (it must reach the same cluster) and seals."""

    kubeconfig: SecretStr
    context: str | None = None


class SecretMaterial(CamelRequest):
    """The secret a credential carries to the server (``credentials new|rotate`` in remote
    mode): each provider takes its own fields. Held as SecretStr so that no log, repr or
    error shows it; the server seals it and never returns it."""

    access_key_id: SecretStr | None = None  # aws, with secret_access_key
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None  # aws, temporary keys
    service_account_json: SecretStr | None = None  # gcp: the key file's contents
    client_secret: SecretStr | None = None  # azure
    api_key: SecretStr | None = None  # other providers


class NewCredentialRequest(CamelRequest):
    """``POST /v1/credentials`` (``credentials new``'s options and, in remote mode, the
    secret itself)."""

    name: Name
    provider: str
    org: str | None = None  # the owning org (name or id); default: the org named default
    role_arn: str | None = None
    project: str | None = None
    subscription_id: str | None = None
    tenant_id: str | None = None
    client_id: str | None = None
    api_key_env: str | None = None
    # References to this machine's own files and profiles mean nothing to a server: refused
    # through the API with a rule that says to send the secret instead.
    profile: str | None = None
    key_file: str | None = None
    secret: SecretMaterial | None = None

    def options(self) -> dict[str, Any]:
        """The reference options, as the service takes them (by option name)."""
        return {k: v for k, v in self.model_dump(exclude={"name", "provider", "secret", "org"},
                                                 by_alias=False).items() if v is not None}


class RotateCredentialRequest(CamelRequest):
    """``POST /v1/credentials/{ref}/rotate``: the new secret."""

    secret: SecretMaterial


# The longest a token may live (``token create --expires``): ten years. A token meant to
# outlive that should be none with an expiry at all.
MAX_TOKEN_SECONDS = 3650 * 86400


def token_lifetime(seconds: float, given: str) -> timedelta:
    """A token's lifetime: above 0 and at most MAX_TOKEN_SECONDS (``given``: as typed)."""
    if not 0 < seconds <= MAX_TOKEN_SECONDS:
        from automation.errors import InvalidInput

        raise InvalidInput("--expires", given, "must be a duration above 0 and at most "
                           f"{MAX_TOKEN_SECONDS // 86400}d")
    return timedelta(seconds=seconds)


class NewToken(CamelRequest):
    """``POST /v1/tokens`` (``token create``'s options; never --bootstrap)."""

    name: Name
    role: str
    pool: str | None = None  # for role agent: NAMESPACE/NAME
    expires_in_seconds: int | None = Field(default=None, gt=0, le=MAX_TOKEN_SECONDS)
    org: str | None = None  # scope a member or viewer to this org (name or id) ...
    project: str | None = None  # ... and project


# --- AgentPools as the ledger holds them (GET /v1/agent-pools, issue 24) -------------------

# The busy-slot history of ``AgentPoolSummary``: this many minutes, one value a minute.
BUSY_HISTORY_MINUTES = 60


class AgentPoolSummary(CamelModel):
    """One open AgentPool: its operator's last decision and condition, its live agents' slots
    and its sessions, from the ledger (no Kubernetes call). The slot figures are those of the
    broker's ``GET /v1/pools/{namespace}/{name}``: ``slots`` and ``idleSlots`` count ready
    agents, ``busySlots`` every live one (a draining agent's running sessions too)."""

    pool: str  # "<namespace>/<name>"
    namespace: str
    name: str
    desired_replicas: int  # the operator's last decision
    ready_agents: int
    draining_agents: int
    unknown_agents: int  # heartbeats stopped
    slots: int
    idle_slots: int
    busy_slots: int
    pending_sessions: int
    running_sessions: int
    ready: bool  # the Ready condition: True when its reason is Reconciled
    reason: str | None  # the Ready condition's reason, as last written
    observed_at: datetime  # the operator's last pass over it
    # The last hour from ``busyFrom``, oldest first: the busy slots in each minute, averaged
    # over the minute (busy slot-seconds / 60; a session holds one slot from its assignment
    # to its end, or to now while it runs).
    busy_from: datetime
    busy_slots_per_minute: list[float]
