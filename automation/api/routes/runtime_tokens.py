"""Tokens for a deployment's runtime (seed 002's audience): issued to a member, verified by
the runtime against ``GET /v1/.well-known/jwks.json``.

The key set is the one route besides the health probe that needs no token: it holds public
keys only, and a runtime must be able to fetch it before it trusts anyone (as every OpenID
issuer publishes its keys)."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from automation.api.routers import v1
from automation.api.security import Admin, Member, Public, Reader
from automation.models import NewRuntimeToken, RuntimeSigningKey, RuntimeToken
from automation.services import runtime_tokens
from automation.services.tenancy import resolve

router = v1("deployments")


@router.post("/deployments/{ref}/token")
def deployment_token(request: Request, response: Response, ref: str, who: Member,
                     body: NewRuntimeToken | None = None) -> RuntimeToken:
    """A short-lived token its runtime accepts: ``aud`` the runtime's audience URL, ``sub``
    the deployment's provision id. Shown once, never stored."""
    response.headers["Cache-Control"] = "no-store"  # no cache or proxy keeps the token
    ttl = body.ttl_seconds if body else None
    ctx = request.app.state.ctx
    return runtime_tokens.deployment_token(
        ctx, resolve(ctx, who, "deployment", ref, field="ref"), ttl)


@router.get("/.well-known/jwks.json")
def jwks(request: Request, _: Public) -> dict[str, Any]:
    """The keys that sign runtime tokens (RFC 7517), newest first."""
    return runtime_tokens.jwks(request.app.state.ctx)


@router.get("/runtime-keys")
def signing_keys(request: Request, _: Reader) -> list[RuntimeSigningKey]:
    """The keys that sign runtime tokens, newest first: ``signing``, ``verifying`` (still
    published until ``retiresAt``, when the last token it signed has expired), ``retired``."""
    return runtime_tokens.signing_keys(request.app.state.ctx)


@router.post("/runtime-keys/rotate")
def rotate_signing_key(request: Request, _: Admin) -> list[RuntimeSigningKey]:
    """A new key signs from now on; the one it replaces stays published until its tokens
    have expired, and a later rotation retires it."""
    return runtime_tokens.rotate_signing_key(request.app.state.ctx)
