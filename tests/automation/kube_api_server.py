"""A local HTTP server that answers like a Kubernetes API server, with real Kubernetes JSON.

No API server can run here, so the real client is pointed at this one instead. It keeps an
in-memory object store for nodes, secrets, namespaces, runtimeclasses (node.k8s.io/v1) and
daemonsets (apps/v1) with GET (object and list, label and field selectors), POST, PATCH
(JSON merge patch) and DELETE, answers errors with real ``Status`` objects, can deny a
(method, path) with a 403 like RBAC does, and records every request it received.

``routes`` (path -> (status, body)) still overrides GETs, as the probe tests rely on.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

VERSION = {
    "major": "1", "minor": "36", "gitVersion": "v1.36.2+k3s1",
    "gitCommit": "5a1b8e0f7d0c0c2cfa5f0b5c6b1a2e9e0a1b2c3d", "gitTreeState": "clean",
    "buildDate": "2026-06-18T19:05:37Z", "goVersion": "go1.24.4", "compiler": "gc",
    "platform": "linux/amd64",
}
KUBE_SYSTEM = {
    "kind": "Namespace", "apiVersion": "v1",
    "metadata": {
        "name": "kube-system", "uid": "6c3a4b0e-2f1d-4e8a-9b7c-1d2e3f4a5b6c",
        "resourceVersion": "4", "creationTimestamp": "2026-06-20T08:00:00Z",
        "labels": {"kubernetes.io/metadata.name": "kube-system"},
    },
    "spec": {"finalizers": ["kubernetes"]},
    "status": {"phase": "Active"},
}
FORBIDDEN = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": 'namespaces "kube-system" is forbidden: User "anycloud" cannot get resource '
               '"namespaces" in API group "" in the namespace "kube-system"',
    "reason": "Forbidden", "details": {"name": "kube-system", "kind": "namespaces"}, "code": 403,
}
NOW = "2026-07-01T12:00:00Z"


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    api_version: str
    namespaced: bool
    pattern: re.Pattern[str]

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


def _resource(plural: str, kind: str, api_version: str, namespaced: bool) -> Resource:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    ns = "/namespaces/(?P<ns>[^/]+)" if namespaced else ""
    pattern = re.compile(f"^{re.escape(base)}{ns}/{plural}(?:/(?P<name>[^/]+))?$")
    return Resource(plural, kind, api_version, namespaced, pattern)


RESOURCES = (
    _resource("nodes", "Node", "v1", False),
    _resource("secrets", "Secret", "v1", True),
    _resource("namespaces", "Namespace", "v1", False),
    _resource("runtimeclasses", "RuntimeClass", "node.k8s.io/v1", False),
    _resource("daemonsets", "DaemonSet", "apps/v1", True),
)
BY_KIND = {r.kind: r for r in RESOURCES}


@dataclass(frozen=True)
class Call:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str | None
    body: Any  # parsed JSON, or None


def status(code: int, reason: str, message: str, name: str = "", kind: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    }
    if name or kind:
        out["details"] = {"name": name, "kind": kind}
    return out


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


def _selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Equality-based label selectors: k=v, k==v, k!=v, k, !k (comma = and)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field_matches(selector: str, obj: dict[str, Any]) -> bool:
    meta = obj.get("metadata", {})
    for term in filter(None, (t.strip() for t in selector.split(","))):
        k, _, v = term.partition("=")
        have = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace")}
        if have.get(k) != v.lstrip("="):
            return False
    return True


class FakeKubeApi:
    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, Any]] = {
            "/version": (200, VERSION),
            "/api/v1/namespaces/kube-system": (200, KUBE_SYSTEM),
        }
        self.requests: list[str] = []  # every request's path, in order
        self.calls: list[Call] = []
        self.url = ""
        self.user = "anycloud"
        self.denied: set[tuple[str, str]] = set()  # (METHOD, path) answered 403
        self.fail: dict[tuple[str, str], tuple[int, Any]] = {}  # any other canned answer
        self.store: dict[str, dict[str, Any]] = {}  # object path -> object
        self._rv = 100
        self._uids = 0
        self._lock = threading.Lock()
        self.put(copy.deepcopy(KUBE_SYSTEM))

    # -- test helpers --------------------------------------------------------------------

    def path_of(self, obj: dict[str, Any]) -> str:
        res = BY_KIND[obj["kind"]]
        meta = obj["metadata"]
        base = "/api/v1" if res.api_version == "v1" else f"/apis/{res.api_version}"
        ns = f"/namespaces/{meta['namespace']}" if res.namespaced else ""
        return f"{base}{ns}/{res.plural}/{meta['name']}"

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store an object as if it had been created earlier (fills uid/resourceVersion)."""
        with self._lock:
            obj = copy.deepcopy(obj)
            self._stamp(obj, created=True)
            self.store[self.path_of(obj)] = obj
            return obj

    def get(self, path: str) -> dict[str, Any] | None:
        with self._lock:
            found = self.store.get(path)
            return copy.deepcopy(found) if found is not None else None

    def deny(self, method: str, path: str) -> None:
        """Answer this (method, path) with 403 as RBAC would."""
        self.denied.add((method.upper(), path))

    def finish_namespace_deletion(self, name: str) -> None:
        """The namespace controller finished: a Terminating namespace disappears."""
        with self._lock:
            self.store.pop(f"/api/v1/namespaces/{name}", None)

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method.upper()]

    # -- request handling ----------------------------------------------------------------

    def _stamp(self, obj: dict[str, Any], created: bool) -> None:
        self._rv += 1
        meta = obj.setdefault("metadata", {})
        if created:
            self._uids += 1
            meta.setdefault("uid", f"00000000-0000-4000-8000-{self._uids:012d}")
            meta.setdefault("creationTimestamp", NOW)
        meta["resourceVersion"] = str(self._rv)

    def answer(self, method: str, raw_path: str, content_type: str | None,
               body: Any) -> tuple[int, Any]:
        split = urlsplit(raw_path)
        path = split.path.rstrip("/")
        query = parse_qs(split.query)
        with self._lock:
            self.requests.append(path)
            self.calls.append(Call(method, path, query, content_type, body))
            if method == "GET" and path in self.routes:
                return self.routes[path]
            if (method, path) in self.fail:
                return self.fail[(method, path)]
            match = next(((r, m) for r in RESOURCES if (m := r.pattern.match(path))), None)
            if match is None:
                return 404, status(404, "NotFound", "the server could not find the requested "
                                                    "resource")
            res, m = match
            ns, name = m.groupdict().get("ns"), m.group("name")
            if (method, path) in self.denied:
                return 403, self._forbidden(method, res, ns, name)
            return self._serve(method, res, path, ns, name, query, content_type, body)

    def _forbidden(self, method: str, res: Resource, ns: str | None,
                   name: str | None) -> dict[str, Any]:
        verb = {"GET": "get" if name else "list", "POST": "create", "PATCH": "patch",
                "DELETE": "delete", "PUT": "update"}[method]
        scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
        subject = f'{res.plural}.{res.group}' if res.group else res.plural
        who = f'{subject} "{name}"' if name else subject
        message = (f'{who} is forbidden: User "{self.user}" cannot {verb} resource '
                   f'"{res.plural}" in API group "{res.group}" {scope}')
        return status(403, "Forbidden", message, name or "", res.plural)

    def _serve(self, method: str, res: Resource, path: str, ns: str | None,
               name: str | None, query: dict[str, list[str]], content_type: str | None,
               body: Any) -> tuple[int, Any]:
        subject = f"{res.plural}.{res.group}" if res.group else res.plural
        missing = (404, status(404, "NotFound", f'{subject} "{name}" not found', name or "",
                               res.plural))
        if name is None:
            if method == "GET":
                return 200, self._list(res, path, query)
            if method == "POST":
                return self._create(res, path, ns, body)
            return 405, status(405, "MethodNotAllowed", f"{method} is not allowed on {path}")
        obj = self.store.get(path)
        if method == "GET":
            return (200, obj) if obj is not None else missing
        if obj is None:
            return missing
        if method == "PATCH":
            if content_type not in ("application/merge-patch+json",
                                    "application/strategic-merge-patch+json"):
                return 415, status(415, "UnsupportedMediaType",
                                   f"the body of the request was in an unknown format: "
                                   f"{content_type}")
            patched = _merge_patch(obj, body)
            patched["metadata"]["name"] = name  # the name cannot be patched
            self._stamp(patched, created=False)
            self.store[path] = patched
            return 200, patched
        if method == "DELETE":
            if res.kind == "Namespace":
                if obj["metadata"].get("deletionTimestamp"):
                    return 409, status(409, "Conflict", (
                        f'Operation cannot be fulfilled on namespaces "{name}": The system is '
                        "ensuring all content is removed from this namespace.  Upon "
                        "completion, this namespace will automatically be purged by the "
                        "system."), name, "namespaces")
                # Namespaces linger as Terminating until their content is gone.
                obj["metadata"]["deletionTimestamp"] = NOW
                obj["status"] = {"phase": "Terminating"}
                self._stamp(obj, created=False)
                return 200, obj
            del self.store[path]
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Success",
                         "details": {"name": name, "kind": res.plural,
                                     "uid": obj["metadata"].get("uid")}}
        return 405, status(405, "MethodNotAllowed", f"{method} is not allowed on {path}")

    def _list(self, res: Resource, path: str, query: dict[str, list[str]]) -> dict[str, Any]:
        labels = (query.get("labelSelector") or [""])[0]
        fields = (query.get("fieldSelector") or [""])[0]
        items = []
        for key in sorted(self.store):
            obj = self.store[key]
            if not key.startswith(path + "/") or "/" in key[len(path) + 1:]:
                continue
            if not _selector_matches(labels, obj["metadata"].get("labels") or {}):
                continue
            if not _field_matches(fields, obj):
                continue
            item = copy.deepcopy(obj)
            # List items carry no kind/apiVersion on the wire.
            item.pop("kind", None)
            item.pop("apiVersion", None)
            items.append(item)
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def _create(self, res: Resource, path: str, ns: str | None,
                body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not body.get("metadata", {}).get("name"):
            return 422, status(422, "Invalid", f"{res.kind} is invalid: metadata.name: "
                                               "Required value")
        obj = copy.deepcopy(body)
        obj.setdefault("kind", res.kind)
        obj.setdefault("apiVersion", res.api_version)
        if ns:
            obj["metadata"]["namespace"] = ns
        target = f"{path}/{obj['metadata']['name']}"
        if target in self.store:
            name = obj["metadata"]["name"]
            subject = f"{res.plural}.{res.group}" if res.group else res.plural
            return 409, status(409, "AlreadyExists", f'{subject} "{name}" already exists',
                               name, res.plural)
        self._stamp(obj, created=True)
        self.store[target] = obj
        return 201, obj

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _respond(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                content_type = self.headers.get("Content-Type")
                if content_type:
                    content_type = content_type.split(";")[0].strip()
                code, answer = api.answer(method, self.path, content_type, body)
                # bytes go out as they are (e.g. a proxy's HTML error page)
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._respond("GET")

            def do_POST(self) -> None:
                self._respond("POST")

            def do_PATCH(self) -> None:
                self._respond("PATCH")

            def do_DELETE(self) -> None:
                self._respond("DELETE")

            def do_PUT(self) -> None:
                self._respond("PUT")

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def serve() -> Iterator[FakeKubeApi]:
    api = FakeKubeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    # A short poll keeps shutdown (and so each test's teardown) quick.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()


def write_kubeconfig(path: Path, server: str, ca_pem: bytes | None = None) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": cluster}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "users": [{"name": "test", "user": {"token": "test-token"}}],
    }))
    return path


# -- real-shaped objects ---------------------------------------------------------------------


def node_json(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    ready: bool | None = True,
    gpus: int | None = None,
    unschedulable: bool = False,
    created: str = "2026-07-01T11:50:00Z",
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A Node as a K3s agent registers it (ready=None: no Ready condition reported yet)."""
    allocatable = {"cpu": "4", "ephemeral-storage": "95491281146", "hugepages-1Gi": "0",
                   "hugepages-2Mi": "0", "memory": "16114396Ki", "pods": "110"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    conditions = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": m,
         "lastHeartbeatTime": NOW, "lastTransitionTime": created}
        for t, r, m in (
            ("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    if ready is not None:
        conditions.append({
            "type": "Ready", "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else
                       "container runtime network not ready: NetworkReady=false",
            "lastHeartbeatTime": NOW, "lastTransitionTime": created,
        })
    spec: dict[str, Any] = {"podCIDR": "10.42.3.0/24", "podCIDRs": ["10.42.3.0/24"],
                            "providerID": f"k3s://{name}"}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "kind": "Node", "apiVersion": "v1",
        "metadata": {
            "name": name, "creationTimestamp": created,
            "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "k3s",
                       **(labels or {})},
            "annotations": {"k3s.io/node-args": '["agent"]',
                            "node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": spec,
        "status": {
            "capacity": dict(allocatable), "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": "10.0.1.12"},
                          {"type": "ExternalIP", "address": "198.51.100.7"},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": "0b1c", "containerRuntimeVersion":
                         "containerd://2.0.5-k3s1", "kernelVersion": "6.8.0-1029-aws",
                         "kubeProxyVersion": "v1.36.2+k3s1", "kubeletVersion": "v1.36.2+k3s1",
                         "machineID": "ec2a", "operatingSystem": "linux",
                         "osImage": "Ubuntu 24.04.2 LTS", "systemUUID": "ec2a"},
        },
    }


def secret_json(name: str, namespace: str = "kube-system",
                data: dict[str, str] | None = None, type_: str = "Opaque") -> dict[str, Any]:
    return {"kind": "Secret", "apiVersion": "v1", "type": type_,
            "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in (data or {}).items()}}


def bootstrap_token_json(token_id: str) -> dict[str, Any]:
    return secret_json(f"bootstrap-token-{token_id}", type_="bootstrap.kubernetes.io/token",
                       data={"token-id": token_id, "token-secret": "0123456789abcdef",
                             "usage-bootstrap-authentication": "true",
                             "expiration": "2026-07-01T13:00:00Z"})


def namespace_json(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name,
                                                  **(labels or {})}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def runtime_class_json(handler: str = "nvidia", labels: dict[str, str] | None = None,
                       **extra: Any) -> dict[str, Any]:
    return {"kind": "RuntimeClass", "apiVersion": "node.k8s.io/v1",
            "metadata": {"name": "nvidia", "labels": labels or {}}, "handler": handler, **extra}


def daemonset_json(labels: dict[str, str] | None = None,
                   spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"kind": "DaemonSet", "apiVersion": "apps/v1",
            "metadata": {"name": "anycloud-nvidia-device-plugin", "namespace": "kube-system",
                         "generation": 1, "labels": labels or {},
                         "annotations": {"deprecated.daemonset.template.generation": "1"}},
            "spec": spec or {"selector": {"matchLabels": {"app": "x"}}, "template": {}},
            "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                       "numberMisscheduled": 0, "numberReady": 0, "observedGeneration": 1}}
