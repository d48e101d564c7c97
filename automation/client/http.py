"""The API as Python calls: the same models the services return, and the same errors (code,
field, value, rule and exit code) the CLI would have raised in embedded mode, rebuilt from
the server's problem+json.

pydantic is imported only by a call that asks for a model: a command that prints what the
server sent (``get_json``) loads neither pydantic nor our models."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

import httpx2

from automation import __version__
from automation.errors import EXIT_BAD_INPUT, EXIT_FAILURE, AnycloudError, InvalidInput

if TYPE_CHECKING:
    from pydantic import BaseModel

T = TypeVar("T")
CLIENT_VERSION_HEADER = "Anycloud-Client-Version"
SERVER_VERSION_HEADER = "Anycloud-Version"
RETRIES = 3  # GETs and keyed POSTs: a refused connection, a lost answer, a 502/503/504;
# any call: a 429
IDEMPOTENCY_HEADER = "Idempotency-Key"


class RemoteError(AnycloudError):
    """A refusal or failure the server answered, as the CLI reports it."""

    def __init__(self, message: str, *, status: int, code: str, field: str | None = None,
                 value: Any = None, rule: str | None = None) -> None:
        super().__init__(message, code=code, field=field, value=value, rule=rule)
        self.status = status
        self.exit_code = EXIT_BAD_INPUT if 400 <= status < 500 else EXIT_FAILURE


def tls_verify(ca_file: str | None) -> Any:
    """What httpx verifies the server's certificate with: the system's CAs, or ``ca_file``'s
    (``anycloud api use --ca-file``)."""
    if not ca_file:
        return True
    import ssl

    try:
        return ssl.create_default_context(cafile=ca_file)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise InvalidInput("caFile", ca_file, f"must be a readable PEM CA certificate "
                           f"({exc})") from None


class ApiClient:
    def __init__(self, base_url: str, token: str | None, *, ca_file: str | None = None,
                 timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {CLIENT_VERSION_HEADER: __version__}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx2.Client(base_url=self.base_url + "/v1", headers=headers,
                                   timeout=timeout, verify=tls_verify(ca_file))
        self.server_version: str | None = None

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, answer: type[T] | Any, *,
             json: Any = None, params: dict[str, Any] | None = None) -> T:
        """``answer``: the model (or type, e.g. ``list[Cluster]``) the body is read as."""
        from pydantic import TypeAdapter

        resp = self._send(method, path, json=json, params=params)
        adapter: TypeAdapter[T] = TypeAdapter(answer)
        return adapter.validate_python(resp.json())

    def get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """A GET's body as the server sent it (parsed JSON, not validated): what a command
        that only prints it, or builds a table from it, needs."""
        return self._send("GET", path, params=params).json()

    def _send(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        # GETs are safe to repeat; a POST is repeated under one Idempotency-Key, which the
        # server answers once (a retry after a lost answer gets the first answer, not a
        # second pool). DELETE is not retried: its second answer would be a 404. A 429 ran
        # nothing: any method waits its Retry-After and tries again.
        safe = method in ("GET", "POST")
        if method == "POST":
            import secrets

            kw["headers"] = {IDEMPOTENCY_HEADER: secrets.token_hex(16)}
        for attempt in range(1, RETRIES + 1):
            try:
                resp = self._http.request(method, path, **kw)
            except httpx2.TransportError as exc:
                if safe and attempt < RETRIES:
                    time.sleep(0.2 * 2 ** attempt)
                    continue
                raise AnycloudError(f"cannot reach the API at {self.base_url}: "
                                    f"{type(exc).__name__}: {exc}", code="UNAVAILABLE") from exc
            self.server_version = resp.headers.get(SERVER_VERSION_HEADER, self.server_version)
            retry = resp.status_code == 429 or (safe and resp.status_code in (502, 503, 504))
            if retry and attempt < RETRIES:
                time.sleep(float(resp.headers.get("Retry-After", "0.5")))
                continue
            if resp.status_code >= 400:
                raise self._error(method, path, resp)
            return resp
        raise AssertionError("unreachable")

    def _error(self, method: str, path: str, resp: httpx2.Response) -> AnycloudError:
        try:
            problem = resp.json()
        except ValueError:
            problem = None
        if not isinstance(problem, dict) or "code" not in problem:
            if resp.status_code in (404, 405):  # a route this server does not have
                return RemoteError(
                    f"the server at {self.base_url} (version {self.server_version or '?'}) "
                    f"has no {method} /v1{path}; this client is version {__version__}",
                    status=resp.status_code, code="UNIMPLEMENTED")
            return RemoteError(f"the API at {self.base_url} answered HTTP {resp.status_code}",
                               status=resp.status_code, code="UNAVAILABLE")
        return RemoteError(str(problem.get("detail") or problem.get("title")),
                           status=resp.status_code, code=str(problem["code"]),
                           field=problem.get("field"), value=problem.get("value"),
                           rule=problem.get("rule"))


def dump(model: BaseModel) -> dict[str, Any]:
    """A request body: camelCase, as the API reads it, with its secrets (SecretStr, which a
    JSON dump would mask) in the clear: the body goes over the API's TLS and nowhere else."""
    masked = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    plain = model.model_dump(by_alias=True, exclude_none=True)
    return _reveal(masked, plain)  # type: ignore[no-any-return]


def _reveal(masked: Any, plain: Any) -> Any:
    from pydantic import SecretStr

    if isinstance(plain, SecretStr):
        return plain.get_secret_value()
    if isinstance(plain, dict):
        return {k: _reveal(masked[k], v) for k, v in plain.items()}
    return masked
