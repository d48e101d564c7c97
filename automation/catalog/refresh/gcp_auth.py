"""An OAuth2 access token from a GCP service-account key: the JWT bearer grant (RFC 7523).

The key file is read when the refresh runs (the credential stores only its path); the JWT is
signed RS256 with the key's private key and sent to the key's own ``token_uri``. Read-only
scopes: the fetcher only lists machine types and public prices.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from automation.catalog.refresh.http import JsonHttp
from automation.catalog.refresh.model import RefreshError

SCOPES = (
    "https://www.googleapis.com/auth/compute.readonly",
    "https://www.googleapis.com/auth/cloud-billing.readonly",
)
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
LIFETIME_SECONDS = 3600  # the most Google accepts for a self-signed assertion


@dataclass(frozen=True)
class ServiceAccountKey:
    client_email: str
    private_key_id: str
    private_key_pem: str
    token_uri: str


def load_key(path: str | Path) -> ServiceAccountKey:
    """The key file's fields; a missing or malformed file is a RefreshError naming the file
    (never its content)."""
    where = f"gcp key file {path}"
    try:
        text = Path(path).read_text()
    except FileNotFoundError as err:
        raise RefreshError(f"{where}: not found") from err
    except OSError as err:
        raise RefreshError(f"{where}: cannot be read ({err.strerror})") from err
    return parse_key(text, where)


def parse_key(text: str, where: str) -> ServiceAccountKey:
    """A key file's fields from its JSON (a sealed credential's key, or a file's); a
    malformed one is a RefreshError naming ``where`` (never the content)."""
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise RefreshError(f"{where}: not JSON") from err
    if not isinstance(raw, dict) or raw.get("type") != "service_account":
        raise RefreshError(f"{where}: not a service-account key (type must be "
                           f"'service_account')")
    missing = [k for k in ("client_email", "private_key", "token_uri") if not raw.get(k)]
    if missing:
        raise RefreshError(f"{where}: missing {', '.join(missing)}")
    return ServiceAccountKey(
        client_email=str(raw["client_email"]),
        private_key_id=str(raw.get("private_key_id") or ""),
        private_key_pem=str(raw["private_key"]),
        token_uri=str(raw["token_uri"]),
    )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _json_segment(value: dict[str, Any]) -> str:
    return _b64url(json.dumps(value, separators=(",", ":"), sort_keys=True).encode())


def assertion(key: ServiceAccountKey, now: datetime, scopes: tuple[str, ...] = SCOPES) -> str:
    """The signed JWT the token endpoint exchanges for an access token."""
    try:
        private = serialization.load_pem_private_key(key.private_key_pem.encode(), None)
    except (ValueError, TypeError) as err:
        raise RefreshError(f"gcp key of {key.client_email}: the private key cannot be "
                           f"loaded ({err})") from err
    if not isinstance(private, rsa.RSAPrivateKey):
        raise RefreshError(f"gcp key of {key.client_email}: not an RSA key")
    header = {"alg": "RS256", "typ": "JWT"}
    if key.private_key_id:
        header["kid"] = key.private_key_id
    issued = int(now.timestamp())
    claims = {
        "iss": key.client_email,
        "scope": " ".join(scopes),
        "aud": key.token_uri,
        "iat": issued,
        "exp": issued + LIFETIME_SECONDS,
    }
    signing_input = f"{_json_segment(header)}.{_json_segment(claims)}"
    signature = private.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64url(signature)}"


def access_token(key: ServiceAccountKey, now: datetime, http: JsonHttp) -> str:
    return http.access_token(key.token_uri, {"grant_type": GRANT_TYPE,
                                             "assertion": assertion(key, now)},
                             f"token for {key.client_email}")
