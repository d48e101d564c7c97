"""``/v1/secrets-key``: an admin's; the rotation takes the new key's id, never the key (the
server reads it from its own key file)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from automation.api.app import create_api
from automation.app import App
from automation.cli import cli
from automation.sealing import SealingKey, write_key_file
from automation.services.tokens import create_token
from automation.serving import ServerThread
from tests.automation.test_secrets_key_rotation import NEW, OLD, _all_open_under, _seed


def test_the_route_is_an_admins_and_never_takes_the_key(app: App, http: Any,
                                                        callers: dict[str, Any]) -> None:
    _seed(app, OLD, 4)
    app.sealing = SealingKey(NEW.raw, (OLD,))
    body = {"keyId": NEW.key_id.hex(), "batchSize": 3, "settleSeconds": 0}
    for who in ("member", "viewer", "none"):
        assert http.post("/v1/secrets-key/rotate", json=body,
                         headers=callers[who]).status_code in (401, 403)
    assert _all_open_under(app.ledger, app.sealing) == 0
    refused = http.post("/v1/secrets-key/rotate", headers=callers["admin"],
                        json={**body, "key": base64.b64encode(NEW.raw).decode()})
    assert refused.status_code == 422  # unknown fields refused: no key in a body
    assert base64.b64encode(NEW.raw).decode() not in refused.text
    done = http.post("/v1/secrets-key/rotate", json=body, headers=callers["admin"])
    assert done.status_code == 200, done.text
    assert done.json()["resealed"] == 4 and done.json()["batches"] == 2
    status = http.get("/v1/secrets-key", headers=callers["admin"]).json()
    assert status == {"keyId": NEW.key_id.hex(), "previousKeyIds": [OLD.key_id.hex()],
                      "sealed": {NEW.key_id.hex(): 4}, "unreadable": 0}


def test_remote_mode_sends_the_keys_id_only(app: App, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(app, OLD, 3)
    app.sealing = SealingKey(NEW.raw, (OLD,))  # the server's key file: new first, then old
    server = ServerThread(create_api(app, limiter=None), "127.0.0.1:0")
    monkeypatch.setenv("ANYCLOUD_API_URL", server.url)
    monkeypatch.setenv("ANYCLOUD_TOKEN", create_token(app, "ops", "admin", by="t").token)
    monkeypatch.setenv("ANYCLOUD_CLI_CONFIG", str(tmp_path / "cli.json"))
    monkeypatch.delenv("ANYCLOUD_SECRETS_KEY_FILE", raising=False)
    new_file, old_file = tmp_path / "new.key", tmp_path / "old.key"
    write_key_file(new_file, NEW)
    write_key_file(old_file, OLD)
    try:
        runner = CliRunner()
        wrong = runner.invoke(cli, ["secrets-key", "rotate", str(old_file), "--json"])
        assert wrong.exit_code == 2 and "put the new key first" in wrong.stdout, wrong.stdout
        done = runner.invoke(cli, ["secrets-key", "rotate", str(new_file), "--settle", "0",
                                   "--json"])
        assert done.exit_code == 0, done.stdout
        assert json.loads(done.stdout)["resealed"] == 3
        status = runner.invoke(cli, ["secrets-key", "status"])
        assert f"3 under {NEW.key_id.hex()}" in status.stdout, status.stdout
    finally:
        server.stop()
    assert _all_open_under(app.ledger, NEW) == 3


def test_a_retry_from_before_a_rotation_is_replayed_after_it(app: App, http: Any,
                                                              callers: dict[str, Any]) -> None:
    """A POST carrying a secret, retried once the rotation is over and the old key has left
    the key file: its replay, not IDEMPOTENCY_KEY_REUSED (its digest was made under the old
    key, which is gone)."""
    from tests.automation.api.test_api_credentials import AWS, AWS_SECRET

    admin, keyed = callers["admin"], callers["admin"] | {"Idempotency-Key": "before"}
    app.sealing = OLD
    first = http.post("/v1/credentials", json=AWS, headers=keyed)
    assert first.status_code == 201, first.text
    app.sealing = SealingKey(NEW.raw, (OLD,))  # the key file: the new key first, then the old
    done = http.post("/v1/secrets-key/rotate", headers=admin,
                     json={"keyId": NEW.key_id.hex(), "settleSeconds": 0})
    assert done.status_code == 200 and done.json()["unreadable"] == 0, done.text
    app.sealing = SealingKey(NEW.raw)  # the old key has left the file
    again = http.post("/v1/credentials", json=AWS, headers=keyed)
    assert again.status_code == 201, again.text
    assert again.headers["idempotency-replayed"] == "true" and again.json() == first.json()
    other = AWS | {"secret": {"accessKeyId": "AKIAIOSFODNN7EXAMPLE",
                              "secretAccessKey": AWS_SECRET[::-1]}}
    reused = http.post("/v1/credentials", json=other, headers=keyed)
    assert reused.status_code == 422 and reused.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
