"""Sealing every stored secret again under a new secrets key (``secrets-key rotate``).

The new key is first in the server's key file and the old one after it (``automation.
sealing``): new secrets are sealed under the new key at once, and the old key still opens
what is not yet sealed again. The rotation walks ``sealed_secrets`` in batches, one write
transaction each: a row is opened under whichever key sealed it and sealed again under the
new one, its keyed fingerprint made again with it. A crash loses at most the batch in
flight, which rolled back: the next run goes on from what is left. Done when no row is
sealed under another key; the old key may then leave the key file.

A request that read the key file before the new key was put first may still seal one secret
under the old key after the walk has passed: the walk runs once more after ``settle``
seconds, longer than any request holds a key between reading it and committing.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from automation.app import App
from automation.crash import crashpoint
from automation.errors import Conflict, InvalidInput
from automation.ledger import schema
from automation.models import SecretsKeyRotation, SecretsKeyStatus
from automation.sealing import KEY_FILE_ENV, SealingKey, SealingKeyMissing, write_key_file

_T = schema.sealed_secrets
MAX_BATCH = 1000
SETTLE = 2.0  # seconds before the walk that catches a secret sealed in flight
MAX_SETTLE = 60.0


def _key(app: App, what: str) -> SealingKey:
    if app.sealing is None:
        raise SealingKeyMissing(what)
    return app.sealing


def _status(key: SealingKey, conn: Any) -> SecretsKeyStatus:
    """The key ids ``key`` holds, and the sealed secrets under each key id in the ledger."""
    counts = dict(conn.execute(sa.select(_T.c.key_id, sa.func.count())
                               .group_by(_T.c.key_id)).all())
    held = {k.key_id.hex() for k in key.ring()}
    return SecretsKeyStatus(
        key_id=key.key_id.hex(), previous_key_ids=[k.key_id.hex() for k in key.previous],
        sealed=dict(sorted(counts.items())),
        unreadable=sum(n for k, n in counts.items() if k not in held))


def status(app: App) -> SecretsKeyStatus:
    key = _key(app, "showing the secrets key")
    with app.ledger.read() as conn:
        return _status(key, conn)


def rotate(app: App, key_id: str, batch_size: int = 100,
           settle: float = SETTLE) -> SecretsKeyRotation:
    """Seal every secret under ``key_id``, the server's current key. Refused, changing
    nothing, when that is not the current key, or when a secret is sealed under a key the
    server does not hold (it could not be opened to be sealed again)."""
    if not 1 <= batch_size <= MAX_BATCH:
        raise InvalidInput("batchSize", batch_size, f"must be 1 to {MAX_BATCH}")
    if not 0 <= settle <= MAX_SETTLE:
        raise InvalidInput("settleSeconds", settle, f"must be 0 to {MAX_SETTLE:g} seconds")
    key = _key(app, "rotating the secrets key")
    new = key.key_id.hex()
    if key_id != new:
        raise Conflict(
            f"the server seals under key {new}, not {key_id}: put the new key first in its "
            "key file (ANYCLOUD_SECRETS_KEY_FILE) and the old one after it, then rotate",
            field="keyId", value=key_id, rule="must be the server's current secrets key")
    with app.ledger.read() as conn:
        before = _status(key, conn)
    if before.unreadable:
        missing = sorted(set(before.sealed) - {before.key_id, *before.previous_key_ids})
        raise Conflict(
            f"{before.unreadable} secret(s) are sealed under key(s) {', '.join(missing)}, "
            "which the key file does not hold: add them after the current key, then rotate",
            field="keyId", value=key_id, rule="every sealed secret must open to be sealed again")
    resealed, batches = _walk(app, key, batch_size)
    time.sleep(settle)
    late, more = _walk(app, key, batch_size)
    with app.ledger.read() as conn:
        after = _status(key, conn)
    return SecretsKeyRotation(**after.model_dump(), resealed=resealed + late,
                              batches=batches + more)


def _walk(app: App, key: SealingKey, batch_size: int) -> tuple[int, int]:
    """Every row not under ``key`` sealed again under it, ``batch_size`` rows a transaction:
    (rows, batches)."""
    new = key.key_id.hex()
    resealed = batches = 0
    while True:
        with app.ledger.write() as conn:
            rows = conn.execute(
                sa.select(_T.c.owner, _T.c.key_id, _T.c.sealed).where(_T.c.key_id != new)
                .order_by(_T.c.owner).limit(batch_size).with_for_update()).all()
            for row in rows:
                plain = key.open(row.sealed, row.owner)
                conn.execute(_T.update().where(_T.c.owner == row.owner,
                                               _T.c.key_id == row.key_id).values(
                    key_id=new, sealed=key.seal(plain, row.owner),
                    fingerprint=key.fingerprint(plain)))
            if rows:
                crashpoint("mid-reseal-batch")
        if not rows:
            return resealed, batches
        resealed, batches = resealed + len(rows), batches + 1
        crashpoint("after-reseal-batch")


def rotate_key_file(app: App, new_key: SealingKey, batch_size: int = 100,
                    settle: float = SETTLE) -> SecretsKeyRotation:
    """Embedded mode's whole rotation, next to the key file: ``new_key`` goes first in it
    (the old keys after it), every secret is sealed again under it, then the old keys leave
    the file. Run again after a crash, it goes on where it stopped."""
    path = app.keys.path
    if path is None:
        raise InvalidInput(KEY_FILE_ENV, None, "a rotation edits the key file: give the key "
                           "as a file (anycloud secrets-key new FILE), not in "
                           "ANYCLOUD_SECRETS_KEY")
    if new_key.previous:
        raise InvalidInput("NEW_FILE", "(hidden)", "must hold one key (anycloud secrets-key "
                           "new FILE), not a key ring")
    key = _key(app, "rotating the secrets key")
    if key.key_id != new_key.key_id:
        write_key_file(path, SealingKey(new_key.raw, tuple(
            k for k in key.ring() if k.key_id != new_key.key_id)))
    done = rotate(app, new_key.key_id.hex(), batch_size, settle)
    write_key_file(path, SealingKey(new_key.raw))
    return done.model_copy(update={"previous_key_ids": []})
