"""The AgentPool operator: kopf handlers around ``reconcile.Reconciler``, and its config.

Configured by the control plane's config file, the seed's shape::

    broker:                            # optional: the agents' broker address, given to
      address: http://anycloud-broker.anycloud.svc:50051   #   each worker as ANYCLOUD_BROKER
    provisioners:
      - kubernetes:
          namespace: anycloud          # AgentPools are watched, and pods made, here
          agentConfigMap: anycloud-agent-config   # optional: mounted at /run/anycloud (the
                                       #   default when no broker address is set)
          gke:                         # optional: only selects the kubeconfig context
            project: my-gcp-project    #   gke_<project>_<location>_<cluster_name>,
            location: us-central1      #   the name `gcloud container clusters
            cluster_name: my-cluster   #   get-credentials` gives it
    # other top-level sections belong to other readers and are left alone

The cluster is the current kubeconfig context (KUBECONFIG, else ~/.kube/config), or the
pod's service account when the operator runs in a cluster with no kubeconfig. Several
``kubernetes`` provisioners watch several namespaces of that one context.

kopf wiring: create/resume/update-of-spec and a timer per pool run one reconcile pass (the
timer notices agents registering, going idle and pods scheduling), and a pending-session
watch beside kopf runs one as soon as a session waits for a pool (pending_watch.py);
delete runs behind the finalizer ``anycloud.sh/agent-pods`` and removes exactly the pool's
pods. kopf's own Events are off (the pass posts its own), and so is its cluster-wide
scanning of namespaces and CRDs, so a namespaced Role is all it needs (k8s/rbac/).

Several replicas: ``anycloud operator --leader-elect`` runs all this only while it holds a
Lease (leader.py); the operator records the namespaces it serves and each pool it sees in
the ledger, so the broker refuses a session for a pool nobody serves (POOL_NOT_FOUND).

Deleting a pool whose timer is mid-pass: the pass is a sync handler in kopf's thread pool,
which kopf cannot cancel, only wait for, and kopf keeps the finalizer until the timer has
exited. By default it gives the timer a few event-loop cycles, then looks again only after
``background.cancellation_polling`` (60 s) unless another event on the pool comes first:
``kubectl delete agentpool`` then hung for a minute whenever the deletion landed inside a
pass that wrote nothing. So the operator waits up to EXIT_WAIT for the pass to end, then
looks again every EXIT_POLL (each look is one annotation patch of the pool, only while a
deleted pool's pass is still running).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from automation.agentpools.config import BrokerSection
from automation.agentpools.model import DNS_LABEL, GROUP, VERSION
from automation.agentpools.pods import DEFAULT_CONFIG_MAP, NodePoolRef
from automation.errors import InvalidInput

PLURAL = "agentpools"
FINALIZER = "anycloud.sh/agent-pods"
ANNOTATIONS_PREFIX = "operator.anycloud.sh"
DEFAULT_INTERVAL = 10.0
# A pool deleted while its timer is mid-pass: how long kopf waits for the pass to end before
# it falls back to looking again every EXIT_POLL seconds (kopf's defaults: no wait, 60 s).
EXIT_WAIT = 1.0
EXIT_POLL = 1.0
DELETE_RETRY = 2.0  # a delete pass that failed (API blip) runs again after this, not 60 s
PENDING_PERIOD = 0.25  # the pending-session watch's look interval (pending_watch.py)


class GkeCluster(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str = Field(min_length=1)
    location: str = Field(min_length=1)
    cluster_name: str = Field(min_length=1)

    @property
    def context(self) -> str:
        return f"gke_{self.project}_{self.location}_{self.cluster_name}"


class KubernetesProvisioner(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    namespace: str = Field(pattern=rf"^{DNS_LABEL}$", max_length=63)
    agent_config_map: str | None = Field(None, alias="agentConfigMap",
                                         min_length=1, max_length=253)
    gke: GkeCluster | None = None


class Provisioner(BaseModel):
    # Other provisioner types (static hosts, cloud node pools) are other readers'.
    model_config = ConfigDict(extra="allow")

    kubernetes: KubernetesProvisioner | None = None


class ControlPlaneConfig(BaseModel):
    model_config = ConfigDict(extra="allow")

    provisioners: list[Provisioner] = Field(default_factory=list)
    broker: BrokerSection | None = None  # the agents' broker, as in their own config

    @property
    def kubernetes(self) -> list[KubernetesProvisioner]:
        return [p.kubernetes for p in self.provisioners if p.kubernetes is not None]

    def context(self) -> str | None:
        """The kubeconfig context: the gke block's, else the current one (None)."""
        chosen = {k.gke.context for k in self.kubernetes if k.gke is not None}
        if len(chosen) > 1:
            raise InvalidInput("provisioners[].kubernetes.gke", sorted(chosen),
                               "must name one cluster: one operator watches one cluster")
        return chosen.pop() if chosen else None

    def config_maps(self) -> dict[str, str | None]:
        """Namespace -> the agent ConfigMap its pods mount: the one named, else ours by
        default unless the broker address is given to the agents directly."""
        default = None if self.broker else DEFAULT_CONFIG_MAP
        return {k.namespace: k.agent_config_map or default for k in self.kubernetes}


def load_config(path: Path) -> ControlPlaneConfig:
    """Read and check the file; each refusal names the file, the field and the rule."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput("--config", str(path), f"must be a readable YAML file "
                           f"({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise InvalidInput("--config", str(path),
                           f"must be YAML: {' '.join(str(exc).split())}") from exc
    if not isinstance(data, dict):
        raise InvalidInput(str(path), type(data).__name__,
                           "must be a mapping with a provisioners list")
    try:
        config = ControlPlaneConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        value = None if err["type"] in ("missing", "extra_forbidden") else err.get("input")
        rule = {"missing": "is required",
                "extra_forbidden": "is not a field of a kubernetes provisioner"}.get(
            err["type"], err["msg"])
        raise InvalidInput(f"{path}: {loc}", value, rule) from exc
    if not config.kubernetes:
        raise InvalidInput(f"{path}: provisioners", None, "must list a kubernetes provisioner "
                           "(provisioners: [{kubernetes: {namespace: ...}}]) for the "
                           "operator to watch AgentPools")
    names = [k.namespace for k in config.kubernetes]
    if len(set(names)) != len(names):
        raise InvalidInput(f"{path}: provisioners", names, "must name each namespace once")
    config.context()
    return config


def connection_info(cfg: Any) -> Any:
    """kopf's ConnectionInfo from the official client's configuration (as kopf's own
    login_via_client does, for a kubeconfig and context of our choosing)."""
    import kopf

    header = cfg.get_api_key_with_prefix("BearerToken") or \
        cfg.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = ((None, None) if not parts else (None, parts[0]) if len(parts) == 1
                     else (parts[0], parts[1]))
    return kopf.ConnectionInfo(
        server=cfg.host, ca_path=cfg.ssl_ca_cert, insecure=not cfg.verify_ssl,
        username=cfg.username or None, password=cfg.password or None, scheme=scheme,
        token=token, certificate_path=cfg.cert_file, private_key_path=cfg.key_file)


def build_registry(reconciler_for: Callable[[str], Any], client_config: Any,
                   interval: float = DEFAULT_INTERVAL) -> Any:
    """A kopf registry with the operator's handlers. ``reconciler_for(namespace)``: the
    namespace's Reconciler (its ConfigMap name differs per provisioner)."""
    import kopf

    registry = kopf.OperatorRegistry()
    resource = (GROUP, VERSION, PLURAL)

    def plain(body: Any) -> dict[str, Any]:
        return copy.deepcopy(dict(body))

    @kopf.on.login(registry=registry)
    def _login(**_: Any) -> Any:
        return connection_info(client_config)

    @kopf.on.startup(registry=registry)
    def _configure(settings: Any, **_: Any) -> None:
        settings.posting.enabled = False
        settings.scanning.disabled = True
        settings.persistence.finalizer = FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
            prefix=ANNOTATIONS_PREFIX)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=ANNOTATIONS_PREFIX, key="last-handled-configuration")
        settings.watching.server_timeout = 300
        settings.networking.request_timeout = 30
        # A deleted pool's timer may be mid-pass: see the module docstring.
        settings.background.instant_exit_timeout = EXIT_WAIT
        settings.background.cancellation_polling = EXIT_POLL

    @kopf.on.resume(*resource, registry=registry)
    @kopf.on.create(*resource, registry=registry)
    @kopf.on.update(*resource, field="spec", registry=registry)
    def _changed(body: Any, **_: Any) -> None:
        pool = plain(body)
        reconciler_for(pool["metadata"]["namespace"]).reconcile(pool)

    @kopf.timer(*resource, interval=interval, initial_delay=interval, registry=registry)
    def _tick(body: Any, **_: Any) -> None:
        pool = plain(body)
        if not pool["metadata"].get("deletionTimestamp"):
            reconciler_for(pool["metadata"]["namespace"]).reconcile(pool)

    @kopf.on.delete(*resource, backoff=DELETE_RETRY, registry=registry)
    def _deleted(body: Any, **_: Any) -> None:
        pool = plain(body)
        reconciler_for(pool["metadata"]["namespace"]).delete(pool)

    return registry


class Operator:
    """kopf running in a thread of its own, stoppable: what ``anycloud operator`` runs (in
    the main thread's place) and what tests start and stop in-process."""

    def __init__(self, registry: Any, namespaces: list[str], client_config: Any = None,
                 background: list[Callable[[threading.Event], None]] | None = None) -> None:
        self.registry = registry
        self.namespaces = namespaces
        self.client_config = client_config  # the cluster's (leader election talks to it too)
        # Loops that run beside kopf while it runs (the pending-session watch), each until
        # the event is set.
        self.background = background or []
        self._background_stop = threading.Event()
        self.ready = threading.Event()
        self._stop: asyncio.Future[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    async def _main(self) -> None:
        import kopf

        self._loop = asyncio.get_running_loop()
        self._stop = self._loop.create_future()
        ready = self._loop.create_future()
        ready.add_done_callback(lambda _: self.ready.set())
        await kopf.operator(registry=self.registry, namespaces=self.namespaces,
                            standalone=True, stop_flag=self._stop, ready_flag=ready)

    def run(self) -> None:
        """Run in the calling thread until stopped (or SIGINT/SIGTERM in the main thread)."""
        self._background_stop.clear()
        loops = [threading.Thread(target=loop, args=(self._background_stop,), daemon=True,
                                  name="agentpool-operator-background")
                 for loop in self.background]
        for t in loops:
            t.start()
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # kept for the thread's starter to see
            self.error = exc
            raise
        finally:
            self._background_stop.set()
            self.ready.set()

    def start(self) -> Operator:
        def target() -> None:
            try:
                self.run()
            except BaseException:  # reported through self.error
                logging.getLogger(__name__).exception("the operator stopped")

        self._thread = threading.Thread(target=target, name="agentpool-operator", daemon=True)
        self._thread.start()
        if not self.ready.wait(60):
            raise RuntimeError("the operator did not get ready within 60 s")
        if self.error is not None:
            raise RuntimeError(f"the operator failed to start: {self.error}")
        return self

    def stop(self, timeout: float = 30.0) -> None:
        loop, flag = self._loop, self._stop
        def release() -> None:
            if flag is not None and not flag.done():
                flag.set_result(None)

        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(release)
        if self._thread is not None:
            self._thread.join(timeout)


def ledger_node_pool_ids(ledger: Any) -> Callable[[str], NodePoolRef]:
    """``spec.nodePool`` name (or id) -> the live node pool, read from the ledger, with its
    VM type's GPU count from the catalog (read once, on the first GPU question)."""
    from automation.ledger import schema
    from automation.ledger.records import find_live
    from automation.models import LIVE_POOL_STATES

    pools = schema.node_pools
    catalogs: list[Any] = []

    def gpus(provider: str, vm_type: str) -> int:
        if not catalogs:
            from automation.catalog.overlay import LedgerOverlay
            from automation.catalog.store import load_catalog

            catalogs.append(load_catalog().with_overlay(LedgerOverlay(ledger)))
        cloud = catalogs[0].provider(provider)
        found = cloud.vm_type(vm_type) if cloud is not None else None
        return int(found.gpus) if found is not None else 0

    def lookup(name: str) -> NodePoolRef:
        with ledger.read() as conn:
            row = find_live(conn, pools, name, live=pools.c.state.in_(list(LIVE_POOL_STATES)),
                            kind="node pool", field="spec.nodePool")
        return NodePoolRef(str(row["id"]), gpus(row["provider"], row["vm_type"]))

    return lookup


def assemble(config: ControlPlaneConfig, ledger: Any, *, kubeconfig: Path | None = None,
             context: str | None = None, interval: float = DEFAULT_INTERVAL,
             clock: Any = None, log: Callable[[str], None] | None = None,
             after_create: Callable[[str], None] | None = None,
             pending_period: float = PENDING_PERIOD) -> Operator:
    """The operator for this config over this ledger (broker registry and node pools)."""
    from automation.agentpools.kubeapi import KubeApi
    from automation.agentpools.pending_watch import PendingWatch
    from automation.agentpools.reconcile import Reconciler, RegistryState
    from automation.agentpools.registry import Registry
    from automation.clock import SystemClock
    from automation.kube.kubeconfig import client_configuration

    clock = clock or SystemClock()
    client_config = client_configuration(kubeconfig, context or config.context())
    api = KubeApi(client_config)
    state = RegistryState(Registry(ledger, clock))
    node_pool_id = ledger_node_pool_ids(ledger)
    reconcilers = {
        ns: Reconciler(api=api, state=state, node_pool_id=node_pool_id, clock=clock,
                       config_map=cm, broker=config.broker.address if config.broker else None,
                       after_create=after_create,
                       log=log or (lambda line: None))
        for ns, cm in config.config_maps().items()}
    state.registry.serve_namespaces(sorted(reconcilers))  # what a refused session names
    registry = build_registry(lambda ns: reconcilers[ns], client_config, interval)
    watch = PendingWatch(state.registry.newest_pending, api.read_pool,
                         lambda pool: reconcilers[pool["metadata"]["namespace"]].reconcile(pool),
                         sorted(reconcilers), log=log or (lambda line: None),
                         period=pending_period)
    return Operator(registry, sorted(reconcilers), client_config, background=[watch.run])
