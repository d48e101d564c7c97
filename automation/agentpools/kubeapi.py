"""The Kubernetes calls of the AgentPool operator, and nothing else: every verb here is one
k8s/rbac/ grants (the RBAC test runs the operator under exactly that Role).

    pods        list (label selector), create, delete
    configmaps  get
    agentpools  patch (status subresource; kopf itself lists, watches and patches the pools)
    events      create
    leases      get, create, update (one Lease, with --leader-elect: leader.py)

Errors: a 403 from RBAC is ``ClusterForbidden`` naming the verb and resource; a 403 from
admission (PodSecurity, ResourceQuota, a missing RuntimeClass, a webhook) is
``AdmissionRefused`` naming which, with the API server's message: granting RBAC would not
help there. 422 from a pod create is ``PodRejected`` (the template is what the API server
refused), anything else ``ClusterUnavailable`` with the API server's message.
"""

from __future__ import annotations

import copy
import json
import os
from datetime import datetime
from typing import Any

from automation.agentpools.model import GROUP, KIND, VERSION
from automation.kube.port import ClusterForbidden, ClusterUnavailable, parse_forbidden

PLURAL = "agentpools"
COMPONENT = "anycloud-operator"


class PodRejected(ClusterUnavailable):
    """The API server refused a worker pod as invalid (422): the template is wrong."""


# The admission plugins a refusal's text names, and what to do about each.
_ADMISSION = (
    ("violates PodSecurity", "PodSecurity admission",
     "make the template meet the namespace's pod-security.kubernetes.io/enforce level"),
    ("exceeded quota", "ResourceQuota admission",
     "raise the namespace's ResourceQuota or lower the template's requests or maxReplicas"),
    ("RuntimeClass", "RuntimeClass admission",
     "install the RuntimeClass (GPU node pools install `nvidia`) or target a node pool "
     "that has it"),
)


class AdmissionRefused(ClusterUnavailable):
    """A 403 that is not RBAC's: an admission controller or webhook refused the request."""

    def __init__(self, verb: str, resource: str, namespace: str, detail: str) -> None:
        plugin, advice = next(((name, todo) for marker, name, todo in _ADMISSION
                               if marker in detail),
                              ("an admission controller or webhook",
                               "read its message; RBAC is not the cause"))
        self.plugin = plugin
        super().__init__(f"{plugin} refused `{verb}` on `{resource}` in namespace "
                         f"{namespace}: {detail}; {advice}")


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    try:
        return str(json.loads(body).get("message")) if body else str(exc.reason)
    except (ValueError, AttributeError):
        return str(body)


class KubeApi:
    """The operator's calls over one ApiClient (thread-safe: kopf runs handlers in threads).

    Requests go out as plain JSON through the client's transport and auth (its typed
    methods validate bodies against their models, and refuse a template's ``nvidia.com/gpu:
    1`` that the API server itself accepts)."""

    def __init__(self, configuration: Any, timeout: float = 10.0) -> None:
        from kubernetes import client

        self.configuration = configuration
        self.timeout = timeout
        self._api = client.ApiClient(configuration)

    def close(self) -> None:
        self._api.close()

    def _request(self, verb: str, resource: str, namespace: str, method: str, path: str, *,
                 body: Any = None, query: list[tuple[str, str]] | None = None,
                 content_type: str = "application/json",
                 tolerate: tuple[int, ...] = ()) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            _, url, headers, data, _ = self._api.param_serialize(
                method=method, resource_path=path, query_params=query or [],
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body, auth_settings=["BearerToken"])
            resp = self._api.call_api(method, url, header_params=headers, body=data,
                                      _request_timeout=self.timeout)
            raw = resp.read()
            if not 200 <= resp.status < 300:
                raise ApiException(http_resp=resp, body=raw.decode(errors="replace"))
            found: dict[str, Any] = json.loads(raw) if raw else {}
            return found
        except ApiException as exc:
            message = _message(exc)
            if exc.status == 403 and parse_forbidden(message) is None:
                raise AdmissionRefused(verb, resource, namespace, message) from exc
            if exc.status == 403:
                raise ClusterForbidden(verb, resource, namespace, message) from exc
            if exc.status in tolerate:
                return None
            if exc.status == 422 and resource == "pods" and verb == "create":
                raise PodRejected(message) from exc
            raise ClusterUnavailable(f"the API server answered {exc.status} {exc.reason} to "
                                     f"{verb} {resource} in {namespace}: {message}") from exc
        except (HTTPError, OSError) as exc:
            raise ClusterUnavailable(f"cannot reach {self.configuration.host} ({verb} "
                                     f"{resource}): {exc}") from exc

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        out = self._request("list", "pods", namespace, "GET",
                            f"/api/v1/namespaces/{namespace}/pods",
                            query=[("labelSelector", selector)])
        return list((out or {}).get("items") or [])

    def create_pod(self, namespace: str, pod: dict[str, Any]) -> bool:
        """True when made, False when a pod of that name already exists (a retried create)."""
        made = self._request("create", "pods", namespace, "POST",
                             f"/api/v1/namespaces/{namespace}/pods", body=pod,
                             tolerate=(409,))
        return made is not None

    def delete_pod(self, namespace: str, name: str, uid: str) -> bool:
        """Delete that very pod (uid precondition: never a newer pod of the same name);
        False when it was already gone."""
        done = self._request("delete", "pods", namespace, "DELETE",
                             f"/api/v1/namespaces/{namespace}/pods/{name}",
                             body={"kind": "DeleteOptions", "apiVersion": "v1",
                                   "preconditions": {"uid": uid}},
                             tolerate=(404, 409))
        return done is not None

    def config_map_exists(self, namespace: str, name: str) -> bool:
        found = self._request("get", "configmaps", namespace, "GET",
                              f"/api/v1/namespaces/{namespace}/configmaps/{name}",
                              tolerate=(404,))
        return found is not None

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._request("get", "secrets", namespace, "GET",
                             f"/api/v1/namespaces/{namespace}/secrets/{name}", tolerate=(404,))

    def write_secret(self, namespace: str, secret: dict[str, Any],
                     existing: dict[str, Any] | None) -> None:
        """Create the Secret, or replace ``existing`` (its resourceVersion: a Secret changed
        meanwhile is a 409, and the next pass starts again from what is there)."""
        name = secret["metadata"]["name"]
        if existing is None:
            self._request("create", "secrets", namespace, "POST",
                          f"/api/v1/namespaces/{namespace}/secrets", body=secret)
            return
        body = copy.deepcopy(secret)
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        self._request("update", "secrets", namespace, "PUT",
                      f"/api/v1/namespaces/{namespace}/secrets/{name}", body=body)

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._request("patch", f"{PLURAL}/status", namespace, "PATCH",
                      f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}/status",
                      body={"status": status}, content_type="application/merge-patch+json",
                      tolerate=(404,))

    def post_event(self, pool: dict[str, Any], type_: str, reason: str, message: str,
                   now: datetime) -> None:
        """A core/v1 Event on the AgentPool: what ``kubectl describe agentpool`` lists."""
        meta = pool["metadata"]
        namespace = meta["namespace"]
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
            "involvedObject": {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
                               "name": meta["name"], "namespace": namespace,
                               "uid": meta["uid"],
                               "resourceVersion": meta.get("resourceVersion")},
            "type": type_, "reason": reason, "message": message[:1024],
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": os.environ.get("HOSTNAME") or COMPONENT,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        self._request("create", "events", namespace, "POST",
                      f"/api/v1/namespaces/{namespace}/events", body=event)

    def read_pool(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The AgentPool as the API server has it now (a list by name: the Role grants list,
        not get), None when it is gone."""
        out = self._request("list", PLURAL, namespace, "GET",
                            f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}",
                            query=[("fieldSelector", f"metadata.name={name}")])
        items = list((out or {}).get("items") or [])
        if not items:
            return None
        pool: dict[str, Any] = items[0]
        pool.setdefault("apiVersion", f"{GROUP}/{VERSION}")
        pool.setdefault("kind", KIND)
        return pool

    # -- leader election (leader.py): one coordination.k8s.io/v1 Lease ----------------------

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._request("get", "leases", namespace, "GET",
                             f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
                             tolerate=(404,))

    def write_lease(self, namespace: str, lease: dict[str, Any], create: bool) -> bool:
        """Create the Lease, or replace it at the resourceVersion its metadata carries; False
        when another candidate got there first (409: someone else created or changed it)."""
        base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        if create:
            done = self._request("create", "leases", namespace, "POST", base, body=lease,
                                 tolerate=(409,))
        else:
            done = self._request("update", "leases", namespace, "PUT",
                                 f"{base}/{lease['metadata']['name']}", body=lease,
                                 tolerate=(409,))
        return done is not None
