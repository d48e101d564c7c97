"""Safe retries of a POST: the ``Idempotency-Key`` header.

The first request with a key (per token and route) runs and its answer is kept 24 hours; the
same key with the same body gets that answer again (``Idempotency-Replayed: true``) without
running anything; the same key with another body is a 422 (IDEMPOTENCY_KEY_REUSED); while the
first is still running, the same key is a 409 (retry after it). A request that fails leaves
no answer behind, so the client may retry with the same key. The key is claimed in the
ledger before the work starts, so two clients (or replicas) racing with one key run it once.
A key is bound to the method and the path as asked (``POST /v1/credentials/rot2/rotate``,
not the route's template): the same key and body on another record is another request.

An answer holding a secret (a new token) is not kept: its replay is a 409 saying the secret
was shown once (revoke it and make another if it was lost)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, SecretStr

from automation.auth.roles import Principal
from automation.errors import AnycloudError, Conflict, InvalidInput
from automation.ledger import schema
from automation.sealing import SealingKeyMissing
from automation.services import sealed

HEADER = "Idempotency-Key"
KEEP = timedelta(hours=24)
_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # printable ASCII, no spaces
_T = schema.idempotency_keys
_ROUTE_MAX = 200  # the length of the ledger's route column


class KeyReused(InvalidInput):
    http_status = 422  # the request is well-formed but cannot be processed with this key

    def __init__(self, key: str) -> None:
        super().__init__(HEADER, key, "was used with another request body: a new request "
                         "needs a new key", code="IDEMPOTENCY_KEY_REUSED")


def once(request: Request, who: Principal, body: BaseModel, produce: Callable[[], BaseModel],
         *, status: int, secret: str | None = None) -> JSONResponse:
    """Run ``produce`` at most once per Idempotency-Key; ``secret``: the answer's field that
    must never be stored (the answer is then not replayed)."""
    key = request.headers.get(HEADER)
    if key is None:
        return JSONResponse(produce().model_dump(mode="json"), status_code=status)
    if not _KEY.fullmatch(key):
        raise InvalidInput(HEADER, key, "must be 1-255 printable ASCII characters, no spaces")
    ctx = request.app.state.ctx
    route = _route(request)
    digests = _digests(ctx, body)
    where = sa.and_(_T.c.token_id == who.token_id, _T.c.route == route, _T.c.key == key)
    now = ctx.clock.now()
    try:
        with ctx.ledger.write() as conn:
            conn.execute(_T.delete().where(_T.c.created_at < now - KEEP))
            row = conn.execute(sa.select(_T).where(where).with_for_update()).mappings().first()
            if row is not None:
                return _replay(row, key, digests, secret)
            conn.execute(_T.insert().values(token_id=who.token_id, route=route, key=key,
                                            request_hash=digests[0], state="running",
                                            created_at=now))
    except sa.exc.IntegrityError:  # another replica claimed it between our read and insert
        raise _running(key) from None
    try:
        answer = produce().model_dump(mode="json")
    except BaseException:
        with ctx.ledger.write() as conn:
            conn.execute(_T.delete().where(where))
        raise
    kept: dict[str, Any] | None = None if secret else answer
    with ctx.ledger.write() as conn:
        conn.execute(_T.update().where(where).values(state="done", status_code=status,
                                                     response=kept))
    return JSONResponse(answer, status_code=status)


def _route(request: Request) -> str:
    """The method and the path the request asked for, as the ledger's ``route`` column holds
    it; a path that does not fit there (over-long, or with a NUL, which PostgreSQL's text
    cannot hold) is held by its digest, which tells paths apart as well."""
    path = request.scope["path"]
    route = f"{request.method} {path}"
    if len(route) <= _ROUTE_MAX and "\x00" not in route:
        return route
    return f"{request.method} sha256:{hashlib.sha256(path.encode()).hexdigest()}"


def _digests(ctx: Any, body: BaseModel) -> list[str]:
    """What tells two requests apart. A body with a secret in it (SecretStr) is digested
    under the ledger's own digest key (``services.sealed.digest_key``), never as a bare hash
    a guess could be checked against: the digest to store first, then those under the
    secrets keys the server holds (a retry of a request digested that way before)."""
    found: list[bool] = []

    def reveal(value: Any) -> Any:
        if isinstance(value, SecretStr):
            found.append(True)
            return value.get_secret_value()
        return str(value)

    data = json.dumps(body.model_dump(), sort_keys=True, default=reveal).encode()
    if not found:
        return [hashlib.sha256(data).hexdigest()]
    if ctx.sealing is None:
        raise SealingKeyMissing("a request that carries a secret")
    return [sealed.digest_key(ctx).digest(data), *ctx.sealing.digests(data)]


def _replay(row: Any, key: str, digests: list[str], secret: str | None) -> JSONResponse:
    if row["request_hash"] not in digests:
        raise KeyReused(key)
    if row["state"] != "done":
        raise _running(key)
    if row["response"] is None:
        raise Conflict(f"the first request with {HEADER} {key!r} succeeded, and its "
                       f"{secret or 'secret'} was shown only to it: revoke it and make another "
                       "if it was lost", code="ALREADY_EXISTS", field=HEADER, value=key,
                       rule="a secret is shown once")
    return JSONResponse(row["response"], status_code=row["status_code"],
                        headers={"Idempotency-Replayed": "true"})


def _running(key: str) -> AnycloudError:
    return Conflict(f"a request with {HEADER} {key!r} is still running: retry when it has "
                    "answered", code="IDEMPOTENCY_KEY_IN_USE", field=HEADER, value=key,
                    rule="one request at a time per key")
