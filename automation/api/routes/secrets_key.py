"""The secrets key, for an admin: which key seals, which still open, and the rotation that
seals every stored secret again under the current key. The key never travels: the server
reads it from its own key file (``automation.sealing``)."""

from __future__ import annotations

from fastapi import Request

from automation.api.routers import v1
from automation.api.security import Admin
from automation.models import RotateSecretsKey, SecretsKeyRotation, SecretsKeyStatus
from automation.services import secrets_key

router = v1("secrets-key")


@router.get("/secrets-key")
def secrets_key_status(request: Request, _: Admin) -> SecretsKeyStatus:
    """The key ids the server holds and how many sealed secrets each key id holds."""
    return secrets_key.status(request.app.state.ctx)


@router.post("/secrets-key/rotate")
def rotate_secrets_key(request: Request, body: RotateSecretsKey,
                       _: Admin) -> SecretsKeyRotation:
    """Seal every stored secret again under ``keyId``, which must be the server's current
    key (first in its key file). Batches of ``batchSize``, one transaction each; run again
    after an interruption, it goes on. The previous keys may leave the key file once it
    answers with none sealed under them."""
    return secrets_key.rotate(request.app.state.ctx, body.key_id, body.batch_size,
                              body.settle_seconds)
