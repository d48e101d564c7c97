"""Runtime tokens (seed 002's audience): what a runtime's verifier accepts and refuses."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from hypothesis import given
from hypothesis import strategies as st

from automation.auth.runtime_tokens import (
    LEEWAY_SECONDS,
    RuntimeTokenRefused,
    SigningKey,
    issue,
    verify,
)

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
KEY = SigningKey.generate()
JWKS = {"keys": [KEY.public_jwk()]}
A, B = "https://a1.example", "https://b1.example"


def refused(token: str, jwks: dict[str, Any] = JWKS, *, audience: str = A,
            now: datetime = NOW, subject: str | None = "p") -> RuntimeTokenRefused:
    with pytest.raises(RuntimeTokenRefused) as err:
        verify(token, jwks, audience=audience, now=now, subject=subject)
    assert err.value.code == "RUNTIME_TOKEN_REFUSED" and err.value.rule
    return err.value


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_a_token_for_runtime_a_is_accepted_by_a_and_refused_by_b() -> None:
    token = issue(KEY, audience=A, subject="p-123", now=NOW)
    claims = verify(token, JWKS, audience=A, now=NOW + timedelta(minutes=4),
                    subject="p-123")
    assert (claims["aud"], claims["sub"], claims["iss"]) == (A, "p-123", "anycloud")
    assert claims["exp"] - claims["iat"] == 300
    err = refused(token, audience=B, subject="p-123")
    assert (err.field, err.value) == ("aud", A) and B in (err.rule or "")


def test_an_expired_token_is_refused_and_clock_skew_is_allowed_for() -> None:
    token = issue(KEY, audience=A, subject="p", now=NOW, ttl=timedelta(seconds=60))
    verify(token, JWKS, audience=A, now=NOW + timedelta(seconds=60 + LEEWAY_SECONDS),
           subject="p")
    err = refused(token, now=NOW + timedelta(seconds=61 + LEEWAY_SECONDS))
    assert err.field == "exp" and "expired" in err.message
    # Issued "in the future" by a clock far ahead: not yet valid.
    assert refused(token, now=NOW - timedelta(seconds=LEEWAY_SECONDS + 1)).field == "nbf"


def test_a_key_the_control_plane_does_not_publish_and_a_changed_token_are_refused() -> None:
    token = issue(SigningKey.generate(), audience=A, subject="p", now=NOW)
    assert refused(token).field == "signature"
    header, payload, signature = issue(KEY, audience=A, subject="p", now=NOW).split(".")
    forged = json.loads(_b64(payload)) | {"aud": B}
    body = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    assert refused(f"{header}.{body}.{signature}", audience=B).field == "signature"
    # An unsigned token ("alg": "none") is never accepted.
    none = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    assert refused(f"{none}.{payload}.").field == "signature"
    assert refused("not a token").field == "signature"


def test_the_token_is_a_standard_es256_jws_any_library_verifies() -> None:
    """Checked here with nothing of ours or joserfc's: the thumbprint-named key of the JWKS
    verifies the ECDSA P-256 signature over the first two segments (RFC 7515, RFC 7518)."""
    token = issue(KEY, audience=A, subject="p", now=NOW)
    header_part, payload_part, signature_part = token.split(".")
    header = json.loads(_b64(header_part))
    assert header == {"typ": "JWT", "alg": "ES256", "kid": KEY.kid}
    jwk = next(k for k in JWKS["keys"] if k["kid"] == header["kid"])
    assert (jwk["kty"], jwk["crv"], jwk["alg"], jwk["use"]) == ("EC", "P-256", "ES256", "sig")
    assert "d" not in jwk  # the private half is never published
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(_b64(jwk["x"]), "big"), int.from_bytes(_b64(jwk["y"]), "big"),
        ec.SECP256R1()).public_key()
    raw = _b64(signature_part)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{header_part}.{payload_part}".encode(), ec.ECDSA(hashes.SHA256()))


def test_a_key_read_back_from_its_pem_signs_tokens_the_jwks_still_verifies() -> None:
    again = SigningKey.from_pem(KEY.private_pem())
    assert again.kid == KEY.kid
    verify(issue(again, audience=A, subject="p", now=NOW), JWKS, audience=A, now=NOW,
           subject="p")


@given(aud=st.sampled_from([A, B]), verifier=st.sampled_from([A, B]),
       age=st.integers(min_value=0, max_value=2000), ttl=st.integers(min_value=1, max_value=900))
def test_accepted_exactly_when_audience_matches_and_within_lifetime(
        aud: str, verifier: str, age: int, ttl: int) -> None:
    token = issue(KEY, audience=aud, subject="p", now=NOW, ttl=timedelta(seconds=ttl))
    should = aud == verifier and age <= ttl + LEEWAY_SECONDS
    try:
        verify(token, JWKS, audience=verifier, now=NOW + timedelta(seconds=age),
               subject="p")
        accepted = True
    except RuntimeTokenRefused:
        accepted = False
    assert accepted == should
