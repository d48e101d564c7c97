"""Tokens a runtime trusts (seed 002's ``audience_url``): short-lived JWTs the control plane
signs with an asymmetric key, verified by the runtime against the control plane's published
keys (a JWKS), never against a secret the two share.

- Signed with ES256 (ECDSA P-256, RFC 7518 §3.4), which every JOSE library verifies; the
  header's ``kid`` is the key's RFC 7638 thumbprint, so a verifier picks the key by it.
- Claims: ``iss`` (``anycloud``), ``aud`` (the runtime's audience URL), ``sub`` (the
  deployment's provision id, which a move keeps), ``iat``, ``nbf``, ``exp`` and a ``jti``.
- ``verify`` is the runtime's side: the signature under a published key, the audience, the
  issuer and the lifetime, and (``subject``) the deployment, each refused with a
  ``RUNTIME_TOKEN_REFUSED`` naming which.

``aud`` names a runtime, not a tenant: a runtime that several deployments share (a static
runtime's slots, whatever their orgs) gets tokens for each of them under one audience, so it
must also check ``sub`` against the deployment (instance) the request acts on, or a member
of one org could use its own deployment's token on another org's. ``aud`` stays the
runtime's own audience, as Rill's runtimes verify it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet

from automation.errors import AnycloudError

ALGORITHM = "ES256"
ISSUER = "anycloud"
DEFAULT_TTL = timedelta(minutes=5)
MAX_TTL = timedelta(hours=1)  # short-lived: a runtime cannot revoke one it has accepted
LEEWAY_SECONDS = 30  # clock skew between the control plane and a runtime


class RuntimeTokenRefused(AnycloudError):
    """A verifier refused a token: which check failed, never the token itself."""

    default_code = "RUNTIME_TOKEN_REFUSED"
    http_status = 401

    def __init__(self, claim: str, value: Any, rule: str) -> None:
        super().__init__(f"token refused: {claim} {value!r} {rule}", field=claim,
                         value=value, rule=rule)


@dataclass(frozen=True)
class SigningKey:
    """One signing key: its private half (PEM, sealed at rest by the caller) and its id."""

    key: ECKey

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(ECKey.generate_key("P-256", auto_kid=True))

    @classmethod
    def from_pem(cls, pem: bytes) -> SigningKey:
        key = ECKey.import_key(pem)
        key.ensure_kid()
        return cls(key)

    @property
    def kid(self) -> str:
        return str(self.key.kid)

    def private_pem(self) -> bytes:
        return self.key.as_pem(private=True)

    def public_jwk(self) -> dict[str, Any]:
        """The public half as a JWK, as the JWKS publishes it."""
        return {**self.key.as_dict(private=False), "use": "sig", "alg": ALGORITHM}


def issue(key: SigningKey, *, audience: str, subject: str, now: datetime,
          ttl: timedelta = DEFAULT_TTL) -> str:
    """A compact JWS for ``audience`` about ``subject``, valid from ``now`` for ``ttl``."""
    start = int(now.timestamp())
    claims = {"iss": ISSUER, "aud": audience, "sub": subject, "iat": start, "nbf": start,
              "exp": start + int(ttl.total_seconds()), "jti": secrets.token_urlsafe(12)}
    return jwt.encode({"alg": ALGORITHM, "kid": key.kid}, claims, key.key,
                      algorithms=[ALGORITHM])


def verify(token: str, jwks: dict[str, Any], *, audience: str, now: datetime,
           subject: str | None) -> dict[str, Any]:
    """The claims of ``token`` when a key of ``jwks`` signed it for ``audience`` and it is
    within its lifetime at ``now``; RuntimeTokenRefused naming the failed check otherwise.
    ``subject``: the provision id of the deployment the request acts on, which the token
    must name (None only where the runtime serves that one deployment alone)."""
    try:
        keys = KeySet.import_key_set(jwks)  # type: ignore[arg-type]
        decoded = jwt.decode(token, keys, algorithms=[ALGORITHM])
    except (JoseError, ValueError) as exc:
        raise RuntimeTokenRefused("signature", type(exc).__name__,
                                  "must be made by a key the control plane publishes "
                                  f"({ALGORITHM})") from None
    claims = dict(decoded.claims)
    if claims.get("iss") != ISSUER:
        raise RuntimeTokenRefused("iss", claims.get("iss"), f"must be {ISSUER!r}")
    if claims.get("aud") != audience:
        raise RuntimeTokenRefused("aud", claims.get("aud"),
                                  f"must be this runtime's audience {audience!r}")
    if subject is not None and claims.get("sub") != subject:
        raise RuntimeTokenRefused("sub", claims.get("sub"),
                                  f"must be the deployment acted on ({subject!r}): a token "
                                  "is for its own deployment, not the runtime's others")
    at = int(now.timestamp())
    exp, nbf = claims.get("exp"), claims.get("nbf", claims.get("iat"))
    if not isinstance(exp, int) or at > exp + LEEWAY_SECONDS:
        raise RuntimeTokenRefused("exp", exp, f"must be after now ({at}): the token expired")
    if isinstance(nbf, int) and at + LEEWAY_SECONDS < nbf:
        raise RuntimeTokenRefused("nbf", nbf, f"must be before now ({at})")
    return claims
