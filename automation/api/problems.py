"""Errors as ``application/problem+json`` (RFC 9457), one ``type`` per error code the CLI has.

``type`` is ``https://anycloud.sh/problems/<code>``, ``title`` the code in words, ``detail``
the message; ``code``, ``field``, ``value`` and ``rule`` as the CLI's ``--json`` error. Bad
input is never a 500: InvalidInput 400, a malformed request 422, NotFound 404, a refusing
state 409, Unauthenticated 401, PermissionDenied 403, an unavailable dependency 503 (with
Retry-After). An unexpected exception is a 500 with an opaque ``errorId``; the server logs the
traceback under that id and says nothing else."""

from __future__ import annotations

import logging
import secrets
from collections.abc import MutableMapping
from functools import cache
from typing import Any, get_args

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, SecretStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from automation.errors import AnycloudError, http_status

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://anycloud.sh/problems/"
RETRY_AFTER = "5"
log = logging.getLogger("anycloud.api")


class Problem(BaseModel):
    """An error answer (``application/problem+json``, RFC 9457)."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    code: str
    field: str | None = None
    value: Any = None
    rule: str | None = None
    errorId: str | None = None  # a 500 only: the id the server logged the error under


# Every route may answer these (declared in the OpenAPI document for the SDK).
RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "description": f"{what} (application/problem+json)"}
    for status, what in ((400, "A rule refused the request"), (401, "No valid token"),
                         (403, "The token's role may not"), (404, "Not found"),
                         (409, "The current state refuses it"), (422, "Malformed request"),
                         (500, "Unexpected error (errorId)"), (503, "Unavailable; retry"))
}


def problem(status: int, code: str, detail: str, *, field: str | None = None,
            value: Any = None, rule: str | None = None, retry_after: int | None = None,
            **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_BASE + code.lower().replace("_", "-"),
        "title": code.replace("_", " ").capitalize(),
        "status": status, "detail": detail, "code": code,
    }
    if field is not None:
        body |= {"field": field, "value": value if _plain(value) else str(value)}
    if rule is not None:
        body["rule"] = rule
    body |= extra
    headers = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="anycloud"'
    if status in (429, 503):
        headers["Retry-After"] = str(retry_after) if retry_after else RETRY_AFTER
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(AnycloudError)
    async def _domain(_: Request, err: AnycloudError) -> JSONResponse:
        return problem(http_status(err), err.code, err.message, field=err.field,
                       value=err.value, rule=err.rule)

    @app.exception_handler(RequestValidationError)
    async def _shape(_: Request, err: RequestValidationError) -> JSONResponse:
        found = []
        for e in err.errors():
            loc = [str(p) for p in e.get("loc", ()) if p not in ("body", "query", "path",
                                                                  "header")]
            field = ".".join(loc) or "body"
            # A secret's input is never echoed back (it would land in logs and terminals),
            # whatever its type (a kubeconfig sent as a JSON object holds its token), nor an
            # unknown field's: it may be a secret sent to the wrong place (a key in a
            # rotation's body), and the rule needs only its name. Nor is an object or a
            # list: it may hold either (a whole body sent as a list), and is no value to show.
            hidden = (not secret_fields().isdisjoint(loc)
                      or e.get("type") == "extra_forbidden")
            value = None if hidden else e.get("input")
            found.append({"field": field, "value": value if _scalar(value) else None,
                          "rule": e["msg"]})
        first = found[0]
        return problem(422, "INVALID_ARGUMENT", f"{first['field']}: {first['rule']}",
                       field=first["field"], value=first["value"], rule=first["rule"],
                       problems=found)

    @app.exception_handler(StarletteHTTPException)
    async def _routing(request: Request, err: StarletteHTTPException) -> JSONResponse:
        """No route for the path (404) or not for this method (405, with ``Allow`` naming
        every method some route of the path takes: Starlette names only the first route's)."""
        if err.status_code == 405:
            allowed = allowed_methods(request.app, request.scope)
            answer = problem(405, "METHOD_NOT_ALLOWED",
                             f"{request.method} is not served at {request.url.path}",
                             field="method", value=request.method,
                             rule=f"must be one of {', '.join(allowed)}")
            answer.headers["Allow"] = ", ".join(allowed)
            return answer
        if err.status_code == 404:
            return problem(404, "NOT_FOUND", f"no route {request.url.path}", field="path",
                           value=request.url.path, rule="must be a route of the API (/v1/...)")
        return problem(err.status_code, "INVALID_ARGUMENT", str(err.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, err: Exception) -> JSONResponse:
        error_id = secrets.token_hex(6)
        log.error("error %s on %s %s", error_id, request.method, request.url.path,
                  exc_info=err)
        return problem(500, "INTERNAL", f"unexpected error {error_id}: the server logged it",
                       errorId=error_id)


def allowed_methods(app: Any, scope: MutableMapping[str, Any]) -> list[str]:
    """Every method a route of the request's path takes."""
    from starlette.routing import Match

    found: set[str] = set()
    for route in app.router.routes:
        if route.matches(scope)[0] is not Match.NONE:
            found |= set(getattr(route, "methods", None) or ())
    return sorted(found)


def as_problem_json(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with every error answer under ``application/problem+json``, the
    media type it is served with (FastAPI documents a response model as application/json)."""
    for operation in (op for path in document.get("paths", {}).values()
                      for op in path.values()):
        for status, response in operation.get("responses", {}).items():
            content = response.get("content", {})
            if status[:1] in ("4", "5") and "application/json" in content:
                content[MEDIA_TYPE] = content.pop("application/json")
    return document


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


@cache
def secret_fields() -> frozenset[str]:
    """The names (as sent, camelCase, and snake_case) of every request body's field that
    holds a secret: a SecretStr, or a model holding one (``secret``, ``kubeconfig``)."""
    from pydantic.alias_generators import to_camel

    from automation.models import CamelRequest

    found: set[str] = set()
    pending: list[type] = [CamelRequest]
    while pending:
        model = pending.pop()
        pending += model.__subclasses__()
        for name, info in getattr(model, "model_fields", {}).items():
            if _holds_secret(info.annotation):
                found |= {name, to_camel(name), *([info.alias] if info.alias else [])}
    return frozenset(found)


def _holds_secret(annotation: Any, seen: frozenset[type] = frozenset()) -> bool:
    """Whether a field of this type carries a secret: SecretStr, or a model with one (a
    union or a list of them included)."""
    if annotation is SecretStr:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation not in seen and any(
            _holds_secret(f.annotation, seen | {annotation})
            for f in annotation.model_fields.values())
    return any(_holds_secret(arg, seen) for arg in get_args(annotation))
