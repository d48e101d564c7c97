"""``secrets-key rotate``: every sealed secret sealed again under a new key, in batches, while
servers keep answering; a SIGKILL at any batch boundary loses nothing and a second run
finishes; refusals change nothing. The key ring (several keys in one key file), the server
following its key file, and the API route (an admin's, the key never sent)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa

from automation.api.app import create_api
from automation.app import App
from automation.errors import Conflict, InvalidInput
from automation.ledger import open_ledger, schema
from automation.sealing import (
    KeySource,
    SealedSecretUnreadable,
    SealingKey,
    new_key_file,
    parse_key_file,
    read_key_file,
    write_key_file,
)
from automation.services import sealed, secrets_key
from automation.services.tokens import create_token
from automation.serving import ServerThread
from automation.ui.sessions import Sessions
from tests.automation.conftest import snapshot

ANYCLOUD = str(Path(sys.executable).with_name("anycloud"))
NOW = datetime(2026, 12, 6, tzinfo=UTC)
OLD, NEW, THIRD = (SealingKey(bytes([n]) * 32) for n in (1, 2, 3))


def _plain(i: int) -> bytes:
    return f"secret number {i}".encode()


def _seed(app: App, key: SealingKey, n: int, first: int = 0) -> None:
    with app.ledger.write() as conn:
        for i in range(first, first + n):
            sealed.store(conn, key, f"credential/cr-{i:04d}", _plain(i), {"n": str(i)}, NOW)


def _rows(ledger: Any) -> list[Any]:
    t = schema.sealed_secrets
    with ledger.read() as conn:
        return list(conn.execute(sa.select(t.c.owner, t.c.key_id, t.c.sealed, t.c.fingerprint)
                                 .order_by(t.c.owner)))


def _all_open_under(ledger: Any, key: SealingKey) -> int:
    """Every sealed row opens under ``key`` (and its ring) to what was sealed, its keyed
    fingerprint made with the key that sealed it; the number of rows under ``key`` itself."""
    under = 0
    for row in _rows(ledger):
        plain = key.open(row.sealed, row.owner)
        assert plain == _plain(int(row.owner.rsplit("-", 1)[1]))
        sealer = next(k for k in key.ring() if k.key_id.hex() == row.key_id)
        assert row.fingerprint == sealer.fingerprint(plain)
        under += row.key_id == key.key_id.hex()
    return under


# -- the ring ----------------------------------------------------------------------------

def test_a_key_file_holds_a_ring_the_first_seals_all_open(tmp_path: Path) -> None:
    ring = SealingKey(NEW.raw, (OLD,))
    blob = OLD.seal(b"x", "credential/a")
    assert ring.open(blob, "credential/a") == b"x"
    assert ring.seal(b"y", "credential/b")[3:11] == NEW.key_id  # the first seals
    with pytest.raises(SealedSecretUnreadable, match=f"holds key\\(s\\) {NEW.key_id.hex()}$"):
        NEW.open(blob, "credential/a")
    assert ring.digests(b"body") == [NEW.digest(b"body"), OLD.digest(b"body")]
    # A subkey (the dashboard's cookies) keeps the ring: a cookie of the old key opens.
    assert ring.subkey("ui").open(OLD.subkey("ui").seal(b"c", "o"), "o") == b"c"
    path = tmp_path / "server.key"
    write_key_file(path, ring)
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_key_file(path) == ring and read_key_file(path).previous == (OLD,)
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left nothing beside it


@pytest.mark.parametrize(("text", "rule"), [
    ("", "must hold a key"),
    ("# only a comment\n", "must hold a key"),
    (f"{base64.b64encode(NEW.raw).decode()}\n{base64.b64encode(NEW.raw).decode()}\n",
     "lists a key twice"),
    (f"{base64.b64encode(NEW.raw).decode()}\nnot base64!\n", "base64 of 32 random bytes"),
])
def test_a_bad_key_ring_is_refused_by_rule(text: str, rule: str) -> None:
    with pytest.raises(InvalidInput, match=rule) as caught:
        parse_key_file(text, "ANYCLOUD_SECRETS_KEY_FILE")
    assert caught.value.field == "ANYCLOUD_SECRETS_KEY_FILE"
    assert base64.b64encode(NEW.raw).decode() not in str(caught.value)


def test_a_server_follows_its_key_file_and_keeps_the_last_good_one(tmp_path: Path) -> None:
    path = tmp_path / "server.key"
    write_key_file(path, OLD)
    source = KeySource({"ANYCLOUD_SECRETS_KEY_FILE": str(path)})
    assert source.current() == OLD
    write_key_file(path, SealingKey(NEW.raw, (OLD,)))
    assert source.current() == SealingKey(NEW.raw, (OLD,))
    path.write_text("half a ke")  # a broken edit: the keys read last stay in use
    assert source.current() == SealingKey(NEW.raw, (OLD,))


def test_dashboard_cookies_and_forms_of_the_old_key_still_work_during_a_rotation() -> None:
    now = NOW
    before = Sessions(OLD)
    cookie = before.seal("acy_token", now)
    during = Sessions(lambda: SealingKey(NEW.raw, (OLD,)))
    assert during.open(cookie, now) == "acy_token"
    assert during.csrf_ok(cookie, before.csrf(cookie))
    assert Sessions(NEW).open(cookie, now) is None  # once the old key has left the file


# -- the rotation, in the service --------------------------------------------------------

def test_rotate_seals_every_secret_again_in_batches(app: App) -> None:
    _seed(app, OLD, 23)
    app.sealing = SealingKey(NEW.raw, (OLD,))
    assert secrets_key.status(app).sealed == {OLD.key_id.hex(): 23}
    done = secrets_key.rotate(app, NEW.key_id.hex(), batch_size=5, settle=0)
    assert (done.resealed, done.batches, done.unreadable) == (23, 5, 0)
    assert done.sealed == {NEW.key_id.hex(): 23}
    assert done.previous_key_ids == [OLD.key_id.hex()]
    assert _all_open_under(app.ledger, NEW) == 23  # the new key alone opens them all
    again = secrets_key.rotate(app, NEW.key_id.hex(), batch_size=5, settle=0)
    assert (again.resealed, again.batches) == (0, 0)


def test_refusals_name_the_rule_and_change_nothing(app: App) -> None:
    _seed(app, OLD, 3)
    app.sealing = SealingKey(NEW.raw, (OLD,))
    before = snapshot(app)
    with pytest.raises(Conflict, match="put the new key first") as caught:
        secrets_key.rotate(app, OLD.key_id.hex(), settle=0)
    assert (caught.value.field, caught.value.value) == ("keyId", OLD.key_id.hex())
    with pytest.raises(InvalidInput, match="must be 1 to 1000"):
        secrets_key.rotate(app, NEW.key_id.hex(), batch_size=0, settle=0)
    _seed(app, THIRD, 1, first=100)  # sealed under a key the file does not hold
    before = snapshot(app)
    with pytest.raises(Conflict, match=f"1 secret\\(s\\) are sealed under key\\(s\\) "
                                       f"{THIRD.key_id.hex()}"):
        secrets_key.rotate(app, NEW.key_id.hex(), settle=0)
    assert snapshot(app) == before
    assert secrets_key.status(app).unreadable == 1


# -- the command, killed at every batch boundary ------------------------------------------

def _cli(home: Path, url: str, key_file: Path, *args: str, crash_at: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANYCLOUD_HOME": str(home), "ANYCLOUD_DATABASE_URL": url,
           "ANYCLOUD_SECRETS_KEY_FILE": str(key_file)}
    for name in ("ANYCLOUD_API_URL", "ANYCLOUD_TOKEN", "ANYCLOUD_SECRETS_KEY"):
        env.pop(name, None)
    if crash_at:
        env["ANYCLOUD_CRASH_AT"] = crash_at
    return subprocess.run([ANYCLOUD, *args], env=env, capture_output=True, text=True,
                          timeout=120)


ROWS, BATCH = 23, 5  # five batches, the last of three rows
BOUNDARIES = [f"{where}@{n}" for n in range(1, 6)
              for where in ("mid-reseal-batch", "after-reseal-batch")]


@pytest.mark.parametrize("crash_at", BOUNDARIES)
def test_a_rotation_killed_at_a_batch_boundary_loses_nothing_and_resumes(
        tmp_path: Path, sqlite_url: str, crash_at: str) -> None:
    ledger = open_ledger(sqlite_url)
    app = App(ledger=ledger, home=tmp_path / "home")
    _seed(app, OLD, ROWS)
    key_file, new_file = tmp_path / "server.key", tmp_path / "new.key"
    write_key_file(key_file, OLD)
    write_key_file(new_file, NEW)
    args = ("secrets-key", "rotate", str(new_file), "--batch-size", str(BATCH),
            "--settle", "0", "--json")
    killed = _cli(tmp_path / "home", sqlite_url, key_file, *args, crash_at=crash_at)
    assert killed.returncode == -9, killed.stderr
    # Killed: the file holds the new key first and the old one after it, and every secret
    # opens under it; those of committed batches are under the new key, the batch in flight
    # rolled back.
    ring = read_key_file(key_file)
    assert ring == SealingKey(NEW.raw, (OLD,))
    where, n = crash_at.split("@")
    committed = int(n) if where == "after-reseal-batch" else int(n) - 1
    assert _all_open_under(ledger, ring) == min(ROWS, committed * BATCH)
    done = _cli(tmp_path / "home", sqlite_url, key_file, *args)
    assert done.returncode == 0, done.stderr
    assert read_key_file(key_file) == NEW  # the old key has left the file
    assert _all_open_under(ledger, NEW) == ROWS
    status = _cli(tmp_path / "home", sqlite_url, key_file, "secrets-key", "status", "--json")
    assert f'"{NEW.key_id.hex()}": {ROWS}' in status.stdout, status
    ledger.dispose()


# -- servers keep answering --------------------------------------------------------------

AWS = {"provider": "aws", "secret": {"accessKeyId": "AKIAIOSFODNN7EXAMPLE",
                                     "secretAccessKey": ("NeverOnDisk" * 4)[:40]}}


@pytest.mark.slow
def test_requests_in_flight_during_a_rotation_succeed(
        tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file, new_file = tmp_path / "server.key", tmp_path / "new.key"
    new_key_file(key_file)
    new_key = new_key_file(new_file)
    monkeypatch.setenv("ANYCLOUD_SECRETS_KEY_FILE", str(key_file))
    ledger = open_ledger(sqlite_url)
    app = App(ledger=ledger, home=tmp_path / "home")  # its key: the file, followed
    assert app.sealing is not None
    _seed(app, app.sealing, 300)
    admin = {"Authorization": "Bearer " + create_token(app, "ops", "admin", by="t").token}
    server = ServerThread(create_api(app, limiter=None), "127.0.0.1:0")
    answers: list[tuple[str, int]] = []
    stop = threading.Event()

    def traffic(worker: int) -> None:
        with httpx2.Client(base_url=server.url, headers=admin, timeout=30) as http:
            for i in range(10_000):
                if stop.is_set():
                    return
                made = http.post("/v1/credentials", json={**AWS, "name": f"c{worker}-{i}"})
                answers.append(("create", made.status_code))
                listed = http.get("/v1/credentials", params={"pageSize": 5})
                answers.append(("list", listed.status_code))

    threads = [threading.Thread(target=traffic, args=(w,)) for w in range(2)]
    try:
        for t in threads:
            t.start()
        while len(answers) < 6:
            time.sleep(0.01)
        rotation = _cli(tmp_path / "home", sqlite_url, key_file, "secrets-key", "rotate",
                        str(new_file), "--batch-size", "2", "--settle", "0.5", "--json")
        during = len(answers)
        time.sleep(0.3)  # the server's next requests, after the old key left its file
        stop.set()
        for t in threads:
            t.join(30)
    finally:
        stop.set()
        server.stop()
    assert rotation.returncode == 0, rotation.stderr
    assert during >= 20, "the requests did not overlap the rotation"
    assert len(answers) > during  # and went on after it
    assert [a for a in answers if a[1] not in (200, 201)] == []
    assert read_key_file(key_file) == new_key
    table = schema.sealed_secrets
    with ledger.read() as conn:
        keys: dict[str, int] = dict(conn.execute(sa.select(table.c.key_id, sa.func.count())
                                 .group_by(table.c.key_id)).all())
        creds = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    # Every secret, the 300 and those created meanwhile, is under the new key: none was
    # sealed under the old key after the walk had passed it (the settle pass).
    assert keys == {new_key.key_id.hex(): creds}
    for row in _rows(ledger):
        new_key.open(row.sealed, row.owner)
    assert creds > 300  # the 300 seeded, and those created meanwhile
    ledger.dispose()
