"""KubernetesCluster: the cluster port over the official ``kubernetes`` client.

The client costs ~0.5 s to import, so it is imported on first use. Reads ask for raw JSON
(``_preload_content=False``) and parse only the fields we need: it is faster than the
client's models and keeps the add-on objects exactly as the API server stored them, which
the add-on drift rules compare against.

Error mapping: 403 -> ClusterForbidden(verb, resource); 404 on reading one object -> absent;
404 on a delete (and on a patch: the object vanished since it was observed) -> success; 409
on deleting a namespace that is already Terminating -> success; any other API answer, a body
that is not Kubernetes JSON, a refused connection, a timeout or an unreadable kubeconfig ->
ClusterUnavailable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from automation.kube.port import (
    ATTEMPT_LABEL,
    CLUSTER_LABEL,
    DAEMONSET_NAME,
    DAEMONSET_NAMESPACE,
    GPU_RESOURCE,
    HELM_GROUP,
    HELM_NAMESPACE,
    HELM_PLURAL,
    HELM_VERSION,
    INGRESS_ENTRY_LABEL,
    JOB_NAME_LABEL,
    MANAGED_BY,
    MANAGER,
    POOL_LABEL,
    RUNTIME_CLASS_NAME,
    TOKEN_NAMESPACE,
    TOKEN_SECRET_TYPE,
    AddonKind,
    AddonObservation,
    ClusterForbidden,
    ClusterPort,
    ClusterUnavailable,
    IngressObjects,
    NamespaceOwner,
    ObservedNode,
    ingress_release_name,
    token_secret_name,
)

T = TypeVar("T")
MERGE_PATCH = "application/merge-patch+json"
FIELD_MANAGER = "anycloud"
# Above this many issued names without a pool label, one full Node list is cheaper than
# a GET per name.
MAX_NAME_LOOKUPS = 20

__all__ = ["KubernetesCluster", "parse_node", "parse_quantity_int"]


def parse_quantity_int(value: Any) -> int:
    """An extended-resource quantity ("1", "8", "2k") as a whole count; absent/odd -> 0."""
    if value is None:
        return 0
    text = str(value).strip()
    suffixes = {"k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in sorted(suffixes.items(), key=lambda s: -len(s[0])):
        if text.endswith(suffix):
            try:
                return int(float(text[: -len(suffix)]) * factor)
            except ValueError:
                return 0
    try:
        return int(float(text))
    except ValueError:
        return 0


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_node(obj: dict[str, Any]) -> ObservedNode:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    return ObservedNode(
        name=meta.get("name", ""),
        labels=dict(meta.get("labels") or {}),
        ready=ready,
        gpu_allocatable=parse_quantity_int((status.get("allocatable") or {}).get(GPU_RESOURCE)),
        unschedulable=bool(spec.get("unschedulable", False)),
        created_at=_timestamp(meta.get("creationTimestamp")),
    )


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    try:
        return str(json.loads(body).get("message")) if body else ""
    except (ValueError, AttributeError):
        return str(body)


class KubernetesCluster(ClusterPort):
    """The ClusterPort against a real API server, from a kubeconfig path and context."""

    def __init__(self, kubeconfig: Path, context: str | None = None,
                 timeout_seconds: float = 10.0) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self.timeout = timeout_seconds
        self._api: Any = None

    # -- plumbing -------------------------------------------------------------------------

    def _client(self) -> Any:
        if self._api is None:
            from kubernetes import client, config
            from kubernetes.config.config_exception import ConfigException

            cfg = client.Configuration()
            try:
                config.load_kube_config(config_file=str(self.kubeconfig), context=self.context,
                                        client_configuration=cfg, persist_config=False)
            except (ConfigException, OSError, ValueError, TypeError) as exc:
                raise ClusterUnavailable(
                    f"cannot load kubeconfig {self.kubeconfig}: {exc}") from exc
            # The reconciler retries on its next pass; urllib3's own retries only delay it.
            cfg.retries = 0
            self._api = client.ApiClient(cfg)
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def _call(self, verb: str, resource: str, name: str | None, fn: Callable[[], T],
              namespace: str | None = None, *, tolerate: Collection[int] = ()) -> T | None:
        """Run one request, mapping errors. Returns None for a tolerated status."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        what = f"{resource}/{name}" if name else resource
        try:
            return fn()
        except ApiException as exc:
            message = _status_message(exc)
            if exc.status == 403:
                raise ClusterForbidden(verb, resource, namespace, message or None) from exc
            if exc.status in tolerate:
                return None
            if exc.status == 401:
                raise ClusterUnavailable(
                    "the API server rejected the registered credentials (401 Unauthorized); "
                    "give it a new one with `anycloud cluster update NAME --kubeconfig FILE`"
                ) from exc
            raise ClusterUnavailable(
                f"the API server answered {exc.status} {exc.reason} to {verb} {what}"
                + (f": {message}" if message else "")) from exc
        except (HTTPError, OSError) as exc:
            host = self._api.configuration.host if self._api is not None else "the cluster"
            raise ClusterUnavailable(f"cannot reach {host} ({verb} {what}): {exc}") from exc
        except ValueError as exc:  # a body that is not JSON: a proxy or something else answered
            raise ClusterUnavailable(
                f"the API server's answer to {verb} {what} is not Kubernetes JSON: {exc}"
            ) from exc

    def _json(self, verb: str, resource: str, name: str | None, fn: Callable[[], Any],
              namespace: str | None = None, *,
              tolerate: Collection[int] = ()) -> dict[str, Any] | None:
        def read() -> dict[str, Any]:
            # The body is streamed (_preload_content=False): read it inside the error mapping,
            # which also hands the connection back to the pool.
            data = json.loads(fn().data)
            if not isinstance(data, dict):
                raise ValueError(f"expected an object, got {type(data).__name__}")
            return data

        return self._call(verb, resource, name, read, namespace, tolerate=tolerate)

    def _get(self, resource: str, name: str, fn: Callable[[], Any],
             namespace: str | None = None) -> dict[str, Any] | None:
        return self._json("get", resource, name, fn, namespace, tolerate=(404,))

    def _reader(self, read: Callable[..., Any], name: str) -> Callable[[], Any]:
        return lambda: read(name, **self._opts())

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self._client())

    def _opts(self) -> dict[str, Any]:
        return {"_request_timeout": self.timeout, "_preload_content": False}

    # -- identity ---------------------------------------------------------------------------

    def identity(self) -> tuple[str, str]:
        """(Kubernetes git version, kube-system namespace UID): what a cluster record pins."""
        from kubernetes import client

        version = self._json("get", "version", None, lambda: client.VersionApi(
            self._client()).get_code(**self._opts())) or {}
        namespace = self._json("get", "namespaces", "kube-system",
                               self._reader(self._core().read_namespace, "kube-system")) or {}
        git_version = version.get("gitVersion")
        uid = (namespace.get("metadata") or {}).get("uid")
        if not git_version or not uid:
            raise ClusterUnavailable(
                "the API server answered without a version or a kube-system namespace UID")
        return str(git_version), str(uid)

    # -- nodes ------------------------------------------------------------------------------

    def nodes_claiming(self, pool_id: str, issued_names: set[str]) -> list[ObservedNode]:
        core = self._core()
        listed = self._json("list", "nodes", None, lambda: core.list_node(
            label_selector=f"{POOL_LABEL}={pool_id}", **self._opts())) or {}
        found = {n.name: n for n in map(parse_node, listed.get("items") or [])}
        missing = sorted(issued_names - set(found))
        if len(missing) > MAX_NAME_LOOKUPS:
            everything = self._json("list", "nodes", None,
                                    lambda: core.list_node(**self._opts())) or {}
            for node in map(parse_node, everything.get("items") or []):
                if node.name in issued_names:
                    found[node.name] = node
        else:
            for name in missing:
                obj = self._get("nodes", name, self._reader(core.read_node, name))
                if obj is not None:
                    found[name] = parse_node(obj)
        return [found[n] for n in sorted(found)]

    def _patch_node(self, verb: str, name: str, body: dict[str, Any]) -> None:
        core = self._core()
        self._json(verb, "nodes", name, lambda: core.patch_node(
            name, body, _content_type=MERGE_PATCH, field_manager=FIELD_MANAGER, **self._opts()),
            tolerate=(404,))

    def cordon_node(self, name: str) -> None:
        self._patch_node("patch", name, {"spec": {"unschedulable": True}})

    def label_node(self, name: str, key: str, value: str | None) -> None:
        # JSON merge patch: null removes the key.
        self._patch_node("patch", name, {"metadata": {"labels": {key: value}}})

    def delete_node(self, name: str) -> None:
        core = self._core()
        self._json("delete", "nodes", name, lambda: core.delete_node(name, **self._opts()),
                   tolerate=(404,))

    # -- secrets and namespaces -------------------------------------------------------------

    def delete_bootstrap_token(self, token_id: str) -> None:
        self._delete_secret(token_secret_name(token_id))

    def delete_attempt_tokens(self, attempt_id: str) -> int:
        core = self._core()
        listed = self._items("secrets", TOKEN_NAMESPACE, lambda: core.list_namespaced_secret(
            TOKEN_NAMESPACE, label_selector=f"{ATTEMPT_LABEL}={attempt_id}",
            field_selector=f"type={TOKEN_SECRET_TYPE}", **self._opts()))
        names = sorted(str((s.get("metadata") or {}).get("name")) for s in listed)
        for name in names:
            self._delete_secret(name)
        return len(names)

    def _delete_secret(self, name: str) -> None:
        core = self._core()
        self._json("delete", "secrets", name, lambda: core.delete_namespaced_secret(
            name, TOKEN_NAMESPACE, **self._opts()), TOKEN_NAMESPACE, tolerate=(404,))

    def _namespace(self, name: str) -> dict[str, Any] | None:
        core = self._core()
        return self._get("namespaces", name, lambda: core.read_namespace(name, **self._opts()))

    def namespace_owner(self, name: str, pool_id: str) -> NamespaceOwner:
        obj = self._namespace(name)
        if obj is None:
            return "absent"
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(MANAGED_BY) == MANAGER and labels.get(POOL_LABEL) == pool_id:
            return "ours"
        return "foreign"

    def delete_namespace(self, name: str) -> None:
        core = self._core()
        # 409: already Terminating; the namespace controller finishes the job.
        self._json("delete", "namespaces", name,
                   lambda: core.delete_namespace(name, **self._opts()), tolerate=(404, 409))

    def service_objects_removed(self, namespace: str) -> bool:
        # Confirmed only once the namespace is gone; Terminating is not yet removed.
        return self._namespace(namespace) is None

    # -- add-ons ----------------------------------------------------------------------------

    def addon_objects(self, cluster_id: str) -> AddonObservation:
        from kubernetes import client

        api = self._client()
        node_api, apps_api = client.NodeV1Api(api), client.AppsV1Api(api)
        rc = self._get("runtimeclasses", RUNTIME_CLASS_NAME, lambda: node_api.read_runtime_class(
            RUNTIME_CLASS_NAME, **self._opts()))
        ds = self._get("daemonsets", DAEMONSET_NAME, lambda: apps_api.read_namespaced_daemon_set(
            DAEMONSET_NAME, DAEMONSET_NAMESPACE, **self._opts()), DAEMONSET_NAMESPACE)
        return AddonObservation(cluster_id=cluster_id, runtime_class=rc, daemonset=ds)

    def write_addon_labels(self, cluster_id: str, kinds: Collection[AddonKind]) -> None:
        from kubernetes import client

        api = self._client()
        node_api, apps_api = client.NodeV1Api(api), client.AppsV1Api(api)
        body = {"metadata": {"labels": {MANAGED_BY: MANAGER, CLUSTER_LABEL: cluster_id}}}
        opts = {**self._opts(), "_content_type": MERGE_PATCH, "field_manager": FIELD_MANAGER}
        # A vanished object is classified absent and installed on the next pass.
        if "runtimeclass" in kinds:
            self._json("patch", "runtimeclasses", RUNTIME_CLASS_NAME,
                       lambda: node_api.patch_runtime_class(RUNTIME_CLASS_NAME, body, **opts),
                       tolerate=(404,))
        if "daemonset" in kinds:
            self._json("patch", "daemonsets", DAEMONSET_NAME,
                       lambda: apps_api.patch_namespaced_daemon_set(
                           DAEMONSET_NAME, DAEMONSET_NAMESPACE, body, **opts),
                       DAEMONSET_NAMESPACE, tolerate=(404,))

    def delete_addon_object(self, kind: AddonKind) -> None:
        from kubernetes import client

        api = self._client()
        if kind == "runtimeclass":
            node_api = client.NodeV1Api(api)
            self._json("delete", "runtimeclasses", RUNTIME_CLASS_NAME,
                       lambda: node_api.delete_runtime_class(RUNTIME_CLASS_NAME, **self._opts()),
                       tolerate=(404,))
        else:
            apps_api = client.AppsV1Api(api)
            # Background: the object goes at once so the stack can create it again.
            self._json("delete", "daemonsets", DAEMONSET_NAME,
                       lambda: apps_api.delete_namespaced_daemon_set(
                           DAEMONSET_NAME, DAEMONSET_NAMESPACE, propagation_policy="Background",
                           **self._opts()),
                       DAEMONSET_NAMESPACE, tolerate=(404,))

    # -- the pool's ingress release ---------------------------------------------------------

    def ingress_helm_chart(self, pool_id: str) -> dict[str, Any] | None:
        from kubernetes import client

        custom = client.CustomObjectsApi(self._client())
        release = ingress_release_name(pool_id)
        return self._get(HELM_PLURAL, release, lambda: custom.get_namespaced_custom_object(
            HELM_GROUP, HELM_VERSION, HELM_NAMESPACE, HELM_PLURAL, release, **self._opts()),
            HELM_NAMESPACE)

    def delete_ingress_helm_chart(self, pool_id: str) -> None:
        from kubernetes import client

        custom = client.CustomObjectsApi(self._client())
        release = ingress_release_name(pool_id)
        # Background: the helm-controller's finalizer uninstalls the release; the stack
        # creates the HelmChart again once it is gone.
        self._json("delete", HELM_PLURAL, release,
                   lambda: custom.delete_namespaced_custom_object(
                       HELM_GROUP, HELM_VERSION, HELM_NAMESPACE, HELM_PLURAL, release,
                       propagation_policy="Background", **self._opts()),
                   HELM_NAMESPACE, tolerate=(404,))

    def ingress_objects(self, pool_id: str) -> IngressObjects:
        from kubernetes import client

        from automation.kube.ingress import job_name

        api = self._client()
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        apps, custom = client.AppsV1Api(api), client.CustomObjectsApi(api)
        release = ingress_release_name(pool_id)
        chart = self._get(HELM_PLURAL, release, lambda: custom.get_namespaced_custom_object(
            HELM_GROUP, HELM_VERSION, HELM_NAMESPACE, HELM_PLURAL, release, **self._opts()),
            HELM_NAMESPACE)
        if chart is None:
            return IngressObjects(pool_id=pool_id, release=release)
        found = IngressObjects(pool_id=pool_id, release=release, helm_chart=chart)
        job = job_name(found)
        job_obj = self._get("jobs", job, lambda: batch.read_namespaced_job(
            job, HELM_NAMESPACE, **self._opts()), HELM_NAMESPACE)
        pods = self._items("pods", HELM_NAMESPACE, lambda: core.list_namespaced_pod(
            HELM_NAMESPACE, label_selector=f"{JOB_NAME_LABEL}={job}", **self._opts()))
        # The release namespace holds only this release's objects.
        daemon_sets = self._items("daemonsets", release, lambda: apps.list_namespaced_daemon_set(
            release, **self._opts()))
        entry: list[ObservedNode] = []
        if daemon_sets:
            entry = [parse_node(n) for n in self._items("nodes", None, lambda: core.list_node(
                label_selector=f"{INGRESS_ENTRY_LABEL}={pool_id}", **self._opts()))]
        # Before Helm created the DaemonSet, what matters happens to the install Job and its
        # Pods in kube-system; after, in the release namespace.
        where = release if daemon_sets else HELM_NAMESPACE
        events = self._items("events", where, lambda: core.list_namespaced_event(
            where, **self._opts()))
        return IngressObjects(pool_id=pool_id, release=release, helm_chart=chart, job=job_obj,
                              pods=tuple(pods), daemon_sets=tuple(daemon_sets),
                              entry_nodes=tuple(entry), events=tuple(events))

    def _items(self, resource: str, namespace: str | None,
               fn: Callable[[], Any]) -> list[dict[str, Any]]:
        """A list's items; a namespace that does not exist (yet) lists nothing."""
        listed = self._json("list", resource, None, fn, namespace, tolerate=(404,)) or {}
        return [i for i in listed.get("items") or [] if isinstance(i, dict)]
