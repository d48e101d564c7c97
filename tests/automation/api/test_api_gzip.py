"""Answers above a size are gzip-compressed for a client that accepts it (issue 36)."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from automation.api.app import GZIP_ABOVE_BYTES


def test_large_answers_are_compressed_small_ones_are_not(
        http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    viewer = callers["viewer"]
    plain = http.get("/v1/openapi.json", headers=viewer | {"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and len(plain.content) > GZIP_ABOVE_BYTES
    packed = http.get("/v1/openapi.json", headers=viewer | {"Accept-Encoding": "gzip"})
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.json() == plain.json()  # the same document, decoded by the client
    assert packed.num_bytes_downloaded < len(plain.content) / 4  # the bytes on the wire
    small = http.get("/v1/me", headers=viewer | {"Accept-Encoding": "gzip"})
    assert "content-encoding" not in small.headers
    assert json.loads(small.content)["role"] == "viewer"
