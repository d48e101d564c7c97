"""Plain JSON requests to the API server over the official client's transport and auth
(TLS, tokens, proxy), for the kubernetes and nodepool provisioners: the typed models of
kubernetes 37 refuse some bodies the API server accepts (a ``nvidia.com/gpu: 1`` limit),
and server-side apply needs no model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from automation.errors import AnycloudError

PLURALS = {"Deployment": "deployments", "Service": "services",
           "PersistentVolumeClaim": "persistentvolumeclaims", "Ingress": "ingresses"}


class KubernetesFailed(AnycloudError):
    """The API server could not be reached or refused a call (not the request's fault)."""

    default_code = "KUBERNETES_FAILED"


def api_message(status: int, raw: bytes) -> str:
    try:
        return str(json.loads(raw).get("message"))
    except (ValueError, AttributeError):
        return raw.decode(errors="replace")[:300] or f"HTTP {status}"


class JsonApi:
    """Plain JSON requests over the official client's ApiClient (auth, TLS, proxy)."""

    def __init__(self, kubeconfig: Path, context: str | None, timeout: float) -> None:
        from kubernetes import client

        from automation.kube.kubeconfig import client_configuration

        self.configuration = client_configuration(kubeconfig, context)
        self.timeout = timeout
        self._api = client.ApiClient(self.configuration)

    def close(self) -> None:
        self._api.close()

    def call(self, method: str, path: str, *, body: Any = None,
             query: list[tuple[str, str]] | None = None,
             content_type: str = "application/json") -> tuple[int, dict[str, Any], str]:
        """(status, parsed body, API server message); only transport failures raise."""
        from urllib3.exceptions import HTTPError

        try:
            _, url, headers, data, _ = self._api.param_serialize(
                method=method, resource_path=path, query_params=query or [],
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body, auth_settings=["BearerToken"])
            resp = self._api.call_api(method, url, header_params=headers, body=data,
                                      _request_timeout=self.timeout)
            raw = resp.read()
        except (HTTPError, OSError) as exc:
            raise KubernetesFailed(f"cannot reach the API server {self.configuration.host} "
                                   f"({method} {path}): {exc}") from exc
        if 200 <= resp.status < 300:
            return resp.status, (json.loads(raw) if raw else {}), ""
        return resp.status, {}, api_message(resp.status, raw)

    def expect(self, method: str, path: str, what: str, *, ok: tuple[int, ...] = (),
               **kwargs: Any) -> dict[str, Any] | None:
        """The body of a 2xx answer, None for a status in ``ok``, else KubernetesFailed."""
        status, body, message = self.call(method, path, **kwargs)
        if 200 <= status < 300:
            return body
        if status in ok:
            return None
        raise KubernetesFailed(f"the API server answered {status} to {what}: {message}")


def collection_path(api_version: str, kind: str, namespace: str) -> str:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{base}/namespaces/{namespace}/{PLURALS[kind]}"


def object_path(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{collection_path(obj['apiVersion'], obj['kind'], meta['namespace'])}/{meta['name']}"


