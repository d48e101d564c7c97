"""A credential's secret material: what each provider takes, the rules it must meet, and
what of it may be shown. (How the engine gets it: ``automation.stack_targets.secret_env``.)
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic.alias_generators import to_camel

from automation.errors import InvalidInput
from automation.models import SecretMaterial

# IAM access key ids: AKIA (long-term) or ASIA (temporary, which needs a session token),
# then 16 upper-case letters and digits; secret keys are 40 base64 characters.
_ACCESS_KEY_ID = re.compile(r"(AKIA|ASIA)[A-Z0-9]{16}")
_SECRET_ACCESS_KEY = re.compile(r"[A-Za-z0-9/+]{40}")
_PRINTABLE = re.compile(r"[\x21-\x7e]+")  # no spaces, no control characters

FIELDS: dict[str, tuple[str, ...]] = {
    "aws": ("access_key_id", "secret_access_key", "session_token"),
    "gcp": ("service_account_json",),
    "azure": ("client_secret",),
}
OTHER_FIELDS = ("api_key",)


def _flag(name: str) -> str:
    return "secret." + to_camel(name)  # as the API's body names it


def _hidden(value: str) -> str:
    """What an error may say of a secret: its length, never its characters."""
    return f"(hidden, {len(value)} characters)"


def _required(plain: dict[str, str], name: str, provider: str) -> str:
    if not plain.get(name):
        raise InvalidInput(_flag(name), None, f"is required for --provider {provider}")
    return plain[name]


def check(provider: str, material: SecretMaterial) -> tuple[dict[str, str], dict[str, str]]:
    """The material's fields by name, and what of them may be shown; InvalidInput on a
    missing, foreign or malformed field (naming it, never showing a secret)."""
    plain = {name: value.get_secret_value()
             for name, value in material if value is not None}
    allowed = FIELDS.get(provider, OTHER_FIELDS)
    for name in plain:
        if name not in allowed:
            raise InvalidInput(_flag(name), _hidden(plain[name]),
                               f"does not apply to --provider {provider} (it takes "
                               f"{', '.join(_flag(a) for a in allowed)})")
    if provider == "aws":
        key_id = _required(plain, "access_key_id", provider)
        if not _ACCESS_KEY_ID.fullmatch(key_id):
            raise InvalidInput("secret.accessKeyId", _hidden(key_id),
                               "must be an IAM access key id (AKIA or ASIA, then 16 of A-Z 0-9)")
        secret = _required(plain, "secret_access_key", provider)
        if not _SECRET_ACCESS_KEY.fullmatch(secret):
            raise InvalidInput("secret.secretAccessKey", _hidden(secret),
                               "must be an IAM secret access key (40 of A-Z a-z 0-9 / +)")
        if key_id.startswith("ASIA") and not plain.get("session_token"):
            raise InvalidInput("secret.sessionToken", None,
                               "is required with a temporary access key id (ASIA...)")
        return plain, {"accessKeyId": key_id[:4] + "…" + key_id[-4:]}
    if provider == "gcp":
        return plain, _service_account(_required(plain, "service_account_json", provider))
    name = "client_secret" if provider == "azure" else "api_key"
    value = _required(plain, name, provider)
    if not (8 <= len(value) <= 4096 and _PRINTABLE.fullmatch(value)):
        raise InvalidInput(_flag(name), _hidden(value),
                           "must be 8 to 4096 printable characters, no spaces")
    return plain, {}


def _service_account(text: str) -> dict[str, str]:
    field = "secret.serviceAccountJson"
    try:
        key: Any = json.loads(text)
    except ValueError:
        raise InvalidInput(field, _hidden(text), "must be a service-account key file's JSON"
                           ) from None
    if not isinstance(key, dict) or key.get("type") != "service_account":
        raise InvalidInput(field, _hidden(text), 'must be a service-account key ("type": '
                           '"service_account"), not another kind of credential')
    for name in ("client_email", "private_key_id", "private_key"):
        if not isinstance(key.get(name), str) or not key[name]:
            raise InvalidInput(field, _hidden(text), f"must hold {name!r} (a key file as "
                               "`gcloud iam service-accounts keys create` writes it)")
    if "PRIVATE KEY" not in key["private_key"]:
        raise InvalidInput(field, _hidden(text), "private_key must be a PEM private key")
    return {"clientEmail": key["client_email"], "privateKeyId": key["private_key_id"]}
