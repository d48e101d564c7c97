"""A small typed client over the generated models (hand-written; the models are generated).

- Errors are the API's problem+json as exceptions by status (``NotFound``, ``Conflict``, …),
  each carrying ``code``, ``field``, ``value``, ``rule`` and, for a 500, ``error_id``.
- Safe retries: GETs, and POSTs under one ``Idempotency-Key`` reused across the retries of one
  call (the server answers a repeated key with the first result), after a lost connection or
  a 502/503/504 (honouring ``Retry-After``); any call after a 429 (the server ran nothing),
  after its ``Retry-After``. DELETE is not retried otherwise.
- Lists are iterators that follow ``nextPageToken``. ``raw=True`` yields each item as the
  server's JSON (a dict, camelCase keys) without building a model: for callers that only
  forward the data (a quarter of the time of a 1,000-item list goes to the models).
"""

from __future__ import annotations

import builtins
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any, Literal, TypeVar, overload

import httpx2
from pydantic import BaseModel, RootModel, SecretStr

from anycloud_sdk import models

__version__ = "0.1.0"
M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    def __init__(self, status: int, problem: models.Problem) -> None:
        super().__init__(f"{status} {problem.code}: {problem.detail}")
        self.status = status
        self.problem = problem
        self.code = problem.code
        self.field = problem.field
        self.value = problem.value
        self.rule = problem.rule
        self.error_id = problem.error_id


class BadRequest(ApiError):
    """400 (a rule refused it) or 422 (malformed)."""


class Unauthenticated(ApiError):
    pass


class PermissionDenied(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class PreconditionFailed(ApiError):
    """412: the record changed since the ETag given in If-Match was read."""


class TooManyRequests(ApiError):
    """429, after the retries (each waited the server's Retry-After)."""


class ServerError(ApiError):
    pass


_BY_STATUS: dict[int, type[ApiError]] = {400: BadRequest, 422: BadRequest,
                                         401: Unauthenticated, 403: PermissionDenied,
                                         404: NotFound, 409: Conflict, 412: PreconditionFailed,
                                         429: TooManyRequests}
# A 429 ran nothing on the server: any method is retried after its Retry-After; these only
# for GET and keyed POST.
_RETRY_STATUS = (502, 503, 504)


class Client:
    def __init__(self, base_url: str, token: str, *, verify: Any = True,
                 timeout: float = 30.0, retries: int = 3) -> None:
        self._http = httpx2.Client(
            base_url=base_url.rstrip("/") + "/v1", timeout=timeout, verify=verify,
            headers={"Authorization": f"Bearer {token}",
                     "Anycloud-Client-Version": f"sdk-{__version__}"})
        self.retries = retries
        self.node_pools = NodePools(self)
        self.tokens = Tokens(self)
        self.credentials = Credentials(self)
        self.clusters = Clusters(self)
        self.secrets_key = SecretsKey(self)
        self.runtime_keys = RuntimeKeys(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def me(self) -> models.Me:
        return self.request("GET", "/me", models.Me)

    def cost(self, *, by: str = "pool", since: str | None = None) -> models.CostReport:
        """VM hours and their cost at list price, summed ``by`` pool, cluster or provider,
        from ``since`` (a date or ISO time) or the beginning."""
        params = {"by": by} | ({"since": since} if since is not None else {})
        return self.request("GET", "/cost", models.CostReport, params=params)

    def cost_daily(self, *, days: int = 30) -> models.DailyCost:
        """Cost per UTC day and node pool at list price over the last ``days`` (1-90)."""
        return self.request("GET", "/cost/daily", models.DailyCost, params={"days": days})

    def preview(self, *, diff: bool = False) -> list[models.PoolPreview]:
        """Every live pool's stack previewed with the server's engine (what CI runs before a
        rollout): changes, policy findings, cost once applied."""
        return [models.PoolPreview.model_validate(p) for p in self.request(
            "GET", "/preview", _List, params={"diff": "true"} if diff else None).root]

    def policy(self) -> list[models.PolicyReport]:
        """The policy pack over every live pool's stack and GPU clusters' add-on stacks."""
        return [models.PolicyReport.model_validate(r)
                for r in self.request("GET", "/policy", _List).root]

    def catalog(self, **filters: Any) -> list[models.CatalogEntry]:
        """VM types matching ``filters`` (the query of ``GET /v1/catalog``: ``provider``,
        ``region``, ``zone``, ``gpu``, ``minGpus``, ``minVcpus``, ``minMemoryGib``, ``arch``,
        ``maxPriceUsdHour``), cheapest first."""
        return [models.CatalogEntry.model_validate(e) for e in self.request(
            "GET", "/catalog", _List, params={k: v for k, v in filters.items()
                                              if v is not None}).root]

    def catalog_type(self, vm_type: str, *, provider: str | None = None
                     ) -> models.CatalogType:
        """One VM type: specs, every region offering it, prices and their sources."""
        return self.request("GET", f"/catalog/{vm_type}", models.CatalogType,
                            params={"provider": provider} if provider else None)

    def request(self, method: str, path: str, answer: type[M], *, json: Any = None,
                params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> M:
        return answer.model_validate(self.request_json(method, path, json=json, params=params,
                                                       headers=headers))

    def request_json(self, method: str, path: str, *, json: Any = None,
                     params: dict[str, Any] | None = None,
                     headers: dict[str, str] | None = None) -> Any:
        """The answer's body as the server sent it (parsed JSON, no model), with the same
        retries and errors as ``request``."""
        headers = dict(headers or {})
        safe = method in ("GET", "POST")  # a POST under its key; DELETE only after a 429
        tries = self.retries
        if method == "POST":
            headers["Idempotency-Key"] = secrets.token_hex(16)  # one key for every retry
        for attempt in range(1, tries + 1):
            try:
                resp = self._http.request(method, path, json=json, params=params,
                                          headers=headers)
            except httpx2.TransportError:
                if attempt == tries or not safe:
                    raise
                time.sleep(0.2 * 2 ** attempt)
                continue
            retry = resp.status_code == 429 or (safe and resp.status_code in _RETRY_STATUS)
            if retry and attempt < tries:
                time.sleep(float(resp.headers.get("Retry-After", "0.5")))
                continue
            if resp.status_code >= 400:
                raise _error(resp)
            return resp.json()
        raise AssertionError("unreachable")


class NodePools:
    def __init__(self, client: Client) -> None:
        self._c = client

    @overload
    def list(self, *, cluster: str | None = None, page_size: int = 100,
             raw: Literal[False] = False) -> Iterator[models.NodePoolStatus]: ...

    @overload
    def list(self, *, cluster: str | None = None, page_size: int = 100,
             raw: Literal[True]) -> Iterator[dict[str, Any]]: ...

    def list(self, *, cluster: str | None = None, page_size: int = 100, raw: bool = False
             ) -> Iterator[models.NodePoolStatus] | Iterator[dict[str, Any]]:
        """Every pool, page by page; ``raw``: as the server's JSON (dicts), no models."""
        return _pages(self._c, "/node-pools", models.NodePoolPage, page_size,
                      {"cluster": cluster} if cluster else {}, raw=raw)

    def get(self, ref: str) -> models.NodePoolStatus:
        return self._c.request("GET", f"/node-pools/{ref}", models.NodePoolStatus)

    def create(self, name: str, *, credentials: str, region: str, vm_type: str, vms: int,
               cluster: str | None = None, zone: str | None = None) -> models.NodePoolCreated:
        body = models.NewNodePool(name=name, credentials=credentials, region=region,
                                  vm_type=vm_type, min_vms=vms, max_vms=vms, cluster=cluster,
                                  zone=zone)
        return self._c.request("POST", "/node-pools", models.NodePoolCreated,
                               json=body.model_dump(mode="json", by_alias=True,
                                                    exclude_none=True))

    def etag(self, ref: str) -> str:
        """The pool's current ETag (for ``delete(if_match=...)``)."""
        return _etag(self._c, f"/node-pools/{ref}")

    def delete(self, ref: str, *, if_match: str | None = None) -> models.NodePool:
        """``if_match``: delete only that version (``PreconditionFailed`` if the pool changed
        since)."""
        return self._c.request("DELETE", f"/node-pools/{ref}", models.NodePool,
                               headers=_if_match(if_match))

    def plan(self, ref: str) -> models.Plan:
        """The pool's stack evaluated offline (mock engine): resources, warnings, cost."""
        return self._c.request("GET", f"/node-pools/{ref}/plan", models.Plan)

    def policy(self, ref: str) -> models.PolicyReport:
        """The policy pack's findings over the pool's stack (a mandatory one blocks it)."""
        return self._c.request("GET", f"/node-pools/{ref}/policy", models.PolicyReport)

    def preview(self, ref: str, *, diff: bool = False) -> models.PoolPreview:
        """The pool's stack previewed with the server's engine; changes nothing."""
        return self._c.request("GET", f"/node-pools/{ref}/preview", models.PoolPreview,
                               params={"diff": "true"} if diff else None)

    def unlock(self, ref: str) -> models.PoolUnlock:
        """Clear a lock a killed run left on the pool's stacks (admin)."""
        return self._c.request("POST", f"/node-pools/{ref}/unlock", models.PoolUnlock)

    def adopt(self, ref: str) -> models.RunResult:
        """Rebuild the pool's lost engine state from what the cloud holds; buys nothing
        (admin)."""
        return self._c.request("POST", f"/node-pools/{ref}/adopt", models.RunResult)


class Clusters:
    """A kubeconfig given here is sealed by the server and never returned; it must carry its
    certificates and token inline (no files, no exec plugin)."""

    def __init__(self, client: Client) -> None:
        self._c = client

    @overload
    def list(self, *, page_size: int = 100,
             raw: Literal[False] = False) -> Iterator[models.Cluster]: ...

    @overload
    def list(self, *, page_size: int = 100, raw: Literal[True]) -> Iterator[dict[str, Any]]: ...

    def list(self, *, page_size: int = 100, raw: bool = False
             ) -> Iterator[models.Cluster] | Iterator[dict[str, Any]]:
        return _pages(self._c, "/clusters", models.ClusterPage, page_size, raw=raw)

    def get(self, ref: str) -> models.Cluster:
        return self._c.request("GET", f"/clusters/{ref}", models.Cluster)

    def register(self, name: str, kubeconfig: str, **options: Any) -> models.Cluster:
        """``options``: ``context``, ``server_url``, ``kubernetes_version``, ``ca_pem``,
        ``offline``, ``allow_private_address`` (a private server URL the VMs reach)."""
        body = models.RegisterClusterRequest(name=name, kubeconfig=SecretStr(kubeconfig),
                                             **options)
        return self._c.request("POST", "/clusters", models.Cluster, json=_body(body))

    def etag(self, ref: str) -> str:
        """The cluster's current ETag (for ``update_kubeconfig`` and ``delete``'s
        ``if_match``)."""
        return _etag(self._c, f"/clusters/{ref}")

    def move(self, ref: str, org: str, *, if_match: str | None = None) -> models.MovedToOrg:
        """To ``org``, with its node pools and the credentials only they use."""
        return self._c.request("POST", f"/clusters/{ref}/move", models.MovedToOrg,
                               json=_body(models.MoveToOrg(org=org)),
                               headers=_if_match(if_match))

    def update_kubeconfig(self, ref: str, kubeconfig: str, *, context: str | None = None,
                          if_match: str | None = None) -> models.Cluster:
        """Replace the cluster's kubeconfig with one that reaches the same cluster (the same
        CA hash and kube-system UID; Conflict otherwise, nothing changed)."""
        body = models.NewKubeconfigRequest(kubeconfig=SecretStr(kubeconfig), context=context)
        return self._c.request("PUT", f"/clusters/{ref}/kubeconfig", models.Cluster,
                               json=_body(body), headers=_if_match(if_match))

    def delete(self, ref: str, *, if_match: str | None = None) -> models.Cluster:
        return self._c.request("DELETE", f"/clusters/{ref}", models.Cluster,
                               headers=_if_match(if_match))

    def preview_addons(self, ref: str, *, diff: bool = False) -> models.RunResult:
        """The cluster's NVIDIA add-on stack previewed with the server's engine."""
        return self._c.request("GET", f"/clusters/{ref}/addons/preview", models.RunResult,
                               params={"diff": "true"} if diff else None)

    def unlock_addons(self, ref: str) -> models.EngineUnlock:
        """Clear a lock a killed run left on the add-on stack (admin)."""
        return self._c.request("POST", f"/clusters/{ref}/addons/unlock",
                               models.EngineUnlock)


class Credentials:
    """A secret given here (``models.SecretMaterial``) is sealed by the server and never
    returned: answers carry ``secret.fingerprint`` and the non-secret fields only."""

    def __init__(self, client: Client) -> None:
        self._c = client

    @overload
    def list(self, *, page_size: int = 100,
             raw: Literal[False] = False) -> Iterator[models.Credential]: ...

    @overload
    def list(self, *, page_size: int = 100, raw: Literal[True]) -> Iterator[dict[str, Any]]: ...

    def list(self, *, page_size: int = 100, raw: bool = False
             ) -> Iterator[models.Credential] | Iterator[dict[str, Any]]:
        return _pages(self._c, "/credentials", models.CredentialPage, page_size, raw=raw)

    def create(self, name: str, provider: str, *,
               secret: models.SecretMaterial | None = None,
               **ids: str) -> models.Credential:
        """``ids``: the provider's non-secret fields (``role_arn``, ``project``,
        ``subscription_id``, ``tenant_id``, ``client_id``, ``api_key_env``)."""
        body = models.NewCredentialRequest(name=name, provider=provider, secret=secret, **ids)
        return self._c.request("POST", "/credentials", models.Credential, json=_body(body))

    def get(self, ref: str) -> models.Credential:
        return self._c.request("GET", f"/credentials/{ref}", models.Credential)

    def etag(self, ref: str) -> str:
        """The credential's current ETag (for ``rotate`` and ``delete``'s ``if_match``)."""
        return _etag(self._c, f"/credentials/{ref}")

    def rotate(self, ref: str, secret: models.SecretMaterial, *,
               if_match: str | None = None) -> models.Credential:
        body = models.RotateCredentialRequest(secret=secret)
        return self._c.request("POST", f"/credentials/{ref}/rotate", models.Credential,
                               json=_body(body), headers=_if_match(if_match))

    def move(self, ref: str, org: str, *, if_match: str | None = None) -> models.MovedToOrg:
        """To ``org``; refused while a node pool uses it (move its cluster instead)."""
        return self._c.request("POST", f"/credentials/{ref}/move", models.MovedToOrg,
                               json=_body(models.MoveToOrg(org=org)),
                               headers=_if_match(if_match))

    def delete(self, ref: str, *, if_match: str | None = None) -> models.Credential:
        return self._c.request("DELETE", f"/credentials/{ref}", models.Credential,
                               headers=_if_match(if_match))


class SecretsKey:
    """The control plane's secrets key (admin): which key seals, and its rotation. The key
    itself never travels: the server reads it from its own key file."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def status(self) -> models.SecretsKeyStatus:
        return self._c.request("GET", "/secrets-key", models.SecretsKeyStatus)

    def rotate(self, key_id: str, *, batch_size: int = 100,
               settle_seconds: float = 2.0) -> models.SecretsKeyRotation:
        """Seal every stored secret again under ``key_id``, which must be the server's
        current key (first in its key file, the old key after it)."""
        body = models.RotateSecretsKey(key_id=key_id, batch_size=batch_size,
                                       settle_seconds=settle_seconds)
        return self._c.request("POST", "/secrets-key/rotate", models.SecretsKeyRotation,
                               json=_body(body))


class RuntimeKeys:
    """The keys that sign runtime tokens: listed (a reader), rotated (an admin)."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(self) -> list[models.RuntimeSigningKey]:
        return [models.RuntimeSigningKey.model_validate(k)
                for k in self._c.request("GET", "/runtime-keys", _List).root]

    def rotate(self) -> builtins.list[models.RuntimeSigningKey]:
        """A new key signs from now on; the one it replaces stays in the key set until the
        tokens it signed have expired."""
        return [models.RuntimeSigningKey.model_validate(k)
                for k in self._c.request("POST", "/runtime-keys/rotate", _List).root]


def _etag(client: Client, path: str) -> str:
    resp = client._http.get(path)
    if resp.status_code >= 400:
        raise _error(resp)
    return str(resp.headers["ETag"])


def _if_match(etag: str | None) -> dict[str, str] | None:
    """Change only that version (``PreconditionFailed`` if the record changed since)."""
    return {"If-Match": etag} if etag else None


def _pages(client: Client, path: str, page: type[Any], page_size: int,
           params: dict[str, Any] | None = None, *, raw: bool = False) -> Iterator[Any]:
    """Every item of a list route, a page fetched as the iteration reaches it; ``raw``: the
    items as the server sent them, else each read into the page's model."""
    token: str | None = None
    while True:
        asked = {**(params or {}), "pageSize": page_size}
        if token:
            asked["pageToken"] = token
        body = client.request_json("GET", path, params=asked)
        if raw:
            yield from body["items"]
            token = body.get("nextPageToken")
        else:
            found = page.model_validate(body)
            yield from found.items
            token = found.next_page_token
        if not token:
            return


class _List(RootModel[list[dict[str, Any]]]):
    pass


def _body(model: BaseModel) -> Any:
    """A request body with its secrets in the clear (a JSON dump masks SecretStr): it goes
    to the server over its TLS and nowhere else."""
    def reveal(value: Any) -> Any:
        if isinstance(value, SecretStr):
            return value.get_secret_value()
        if isinstance(value, dict):
            return {k: reveal(v) for k, v in value.items()}
        return value

    return json.loads(json.dumps(reveal(model.model_dump(by_alias=True, exclude_none=True)),
                                 default=str))


class Tokens:
    def __init__(self, client: Client) -> None:
        self._c = client

    def create(self, name: str, role: str, *, pool: str | None = None,
               expires_in_seconds: int | None = None) -> models.IssuedToken:
        body = models.NewToken(name=name, role=role, pool=pool,
                               expires_in_seconds=expires_in_seconds)
        return self._c.request("POST", "/tokens", models.IssuedToken,
                               json=body.model_dump(mode="json", by_alias=True,
                                                    exclude_none=True))

    def revoke(self, name: str) -> models.ApiToken:
        return self._c.request("DELETE", f"/tokens/{name}", models.ApiToken)


def _error(resp: httpx2.Response) -> ApiError:
    try:
        problem = models.Problem.model_validate(resp.json())
    except ValueError:
        problem = models.Problem(type="about:blank", title="HTTP error",
                                 status=resp.status_code, detail=resp.text[:200],
                                 code="UNKNOWN")
    cls = _BY_STATUS.get(resp.status_code, ServerError if resp.status_code >= 500 else ApiError)
    return cls(resp.status_code, problem)
