"""Compute credentials: a reference to where the secret lives (embedded mode: a profile, a
key file, a variable), or, through the API, the secret itself sealed under the server's key
(``automation.sealing``): never returned, opened only for the stack operation that
needs it (``automation.stack_targets.secret_env``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from automation import ids
from automation.app import App
from automation.errors import Conflict, InvalidInput
from automation.ledger import schema
from automation.ledger.orgs import owning_org
from automation.ledger.records import Expectation, find_live, record_event
from automation.models import LIVE_POOL_STATES, Credential, SecretMaterial
from automation.sealing import owner
from automation.services import credential_secrets, sealed
from automation.validation import check_name

_LIVE = schema.credentials.c.state == "active"
_UUID = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}")
_GCP_PROJECT = re.compile(r"[a-z][-a-z0-9]{4,28}[a-z0-9]")
_ENV_VAR = re.compile(r"[A-Z_][A-Z0-9_]*")


@dataclass(frozen=True)
class NewCredential:
    name: str
    provider: str
    options: dict[str, Any] = field(default_factory=dict)
    # The secret itself (through the API): sealed under the server's key.
    secret: SecretMaterial | None = None
    org: str | None = None  # the owning org (name or id); None: the default org


def _require(opts: dict[str, Any], key: str, provider: str) -> Any:
    if not opts.get(key):
        flag = "--" + key.replace("_", "-")
        raise InvalidInput(flag, None, f"is required for --provider {provider}")
    return opts[key]


def _refuse_extra(opts: dict[str, Any], allowed: set[str], provider: str) -> None:
    for key, value in opts.items():
        if value is not None and key not in allowed:
            flag = "--" + key.replace("_", "-")
            raise InvalidInput(flag, value, f"does not apply to --provider {provider}")


def _sealed_reference(provider: str, opts: dict[str, Any]) -> dict[str, Any]:
    """The reference beside sealed material: the non-secret ids, no local profile or file
    (the secret came with the request)."""
    for key in ("profile", "key_file"):
        if opts.get(key):
            flag = "--" + key.replace("_", "-")
            raise InvalidInput(flag, opts[key], "names a file on the client's machine: with "
                               "the secret sent along, give no profile or key file")
    if provider == "aws":  # keys alone, or keys that assume a role
        _refuse_extra(opts, {"role_arn"}, provider)
        return _reference(provider, opts) if opts.get("role_arn") else {}
    if provider == "gcp":
        _refuse_extra(opts, {"project"}, provider)
        return {"project": _gcp_project(_require(opts, "project", provider))}
    if provider == "azure":
        reference = _reference(provider, opts)
        reference.pop("client_secret_env")
        return reference
    return _reference(provider, opts)


def _gcp_project(project: str) -> str:
    if not _GCP_PROJECT.fullmatch(project):
        raise InvalidInput(
            "--project", project, "must be a GCP project id (6-30 chars: a-z, 0-9, -)"
        )
    return project


def _reference(provider: str, opts: dict[str, Any]) -> dict[str, Any]:
    """Validate the provider-specific options and return what gets stored."""
    if provider == "aws":
        _refuse_extra(opts, {"profile", "role_arn"}, provider)
        if not (opts.get("profile") or opts.get("role_arn")):
            raise InvalidInput("--profile", None, "aws needs --profile or --role-arn")
        if opts.get("role_arn") and not _ROLE_ARN.fullmatch(opts["role_arn"]):
            raise InvalidInput(
                "--role-arn", opts["role_arn"],
                "must be an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>)",
            )
        return {k: opts[k] for k in ("profile", "role_arn") if opts.get(k)}
    if provider == "gcp":
        _refuse_extra(opts, {"project", "key_file"}, provider)
        project = _gcp_project(_require(opts, "project", provider))
        key_file = Path(_require(opts, "key_file", provider)).expanduser().resolve()
        if not key_file.is_file():
            raise InvalidInput(
                "--key-file", opts["key_file"], "must be a readable service-account key file"
            )
        return {"project": project, "key_file": str(key_file)}
    if provider == "azure":
        _refuse_extra(opts, {"subscription_id", "tenant_id", "client_id"}, provider)
        out = {}
        for key in ("subscription_id", "tenant_id", "client_id"):
            value = _require(opts, key, provider)
            if not _UUID.fullmatch(value):
                raise InvalidInput("--" + key.replace("_", "-"), value, "must be a UUID")
            out[key] = value.lower()
        out["client_secret_env"] = "AZURE_CLIENT_SECRET"
        return out
    # Providers the catalog lists without isolated networking: an API key from the environment.
    _refuse_extra(opts, {"api_key_env"}, provider)
    env = _require(opts, "api_key_env", provider)
    if not _ENV_VAR.fullmatch(env):
        raise InvalidInput("--api-key-env", env, "must name an environment variable")
    return {"api_key_env": env}


def new_credential(app: App, req: NewCredential) -> Credential:
    check_name("name", req.name)
    if app.catalog.provider(req.provider) is None:
        raise InvalidInput(
            "--provider", req.provider, f"must be one of {', '.join(sorted(app.catalog.providers))}"
        )
    plain: dict[str, str] | None = None
    shown: dict[str, str] = {}
    if req.secret is None:
        reference = _reference(req.provider, req.options)
    else:
        reference = _sealed_reference(req.provider, req.options)
        plain, shown = credential_secrets.check(req.provider, req.secret)
        key = sealed.require_key(app, f"credential {req.name!r}")
    now = app.clock.now()
    cred_id = ids.new_id("cr")
    row = dict(
        id=cred_id, name=req.name, provider=req.provider, reference=reference,
        state="active", created_at=now,
    )
    with app.ledger.write() as conn:
        row["org_id"] = owning_org(conn, req.org, now)
        if conn.execute(sa.select(schema.credentials.c.id).where(
            _LIVE, schema.credentials.c.name == req.name
        )).first():
            raise Conflict(
                f"credential {req.name!r} already exists", code="ALREADY_EXISTS",
                field="name", value=req.name, rule="must be unique among credentials",
            )
        conn.execute(schema.credentials.insert().values(**row))
        summary = None
        if plain is not None:
            summary = sealed.store(conn, key, _owner(cred_id), _sealable(plain), shown, now)
        record_event(conn, now, "credential", cred_id, "created", f"credential {req.name}"
                     + (f" (secret {summary.fingerprint})" if summary else ""))
    return Credential.model_validate({**row, "secret": summary})


def _owner(cred_id: str) -> str:
    return owner("credential", cred_id)


def _sealable(plain: dict[str, str]) -> bytes:
    return json.dumps(plain, sort_keys=True).encode()


def with_secrets(conn: Any, rows: list[Any]) -> list[Credential]:
    found = sealed.summaries(conn, [_owner(r["id"]) for r in rows])
    return [Credential.model_validate({**r, "secret": found.get(_owner(r["id"]))})
            for r in rows]


def list_credentials(app: App) -> list[Credential]:
    with app.ledger.read() as conn:
        rows = conn.execute(
            sa.select(schema.credentials).where(_LIVE).order_by(schema.credentials.c.name)
        ).mappings().all()
        return with_secrets(conn, list(rows))


def get_credential(app: App, ref: str) -> Credential:
    with app.ledger.read() as conn:
        row = find_live(conn, schema.credentials, ref, live=_LIVE, kind="credential",
                        field="credentials")
        return with_secrets(conn, [row])[0]


def rotate_credential(app: App, ref: str, material: SecretMaterial,
                      expect: Expectation | None = None) -> Credential:
    """Replace the sealed secret of a credential that has one (a reference's secret lives
    where it points, and is rotated there). ``expect``: a check of the locked record before
    anything changes (the API's If-Match)."""
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(conn, schema.credentials, ref, live=_LIVE, kind="credential",
                        field="credentials", lock=True)
        if expect is not None:
            expect(with_secrets(conn, [row])[0])
        plain, shown = credential_secrets.check(row["provider"], material)
        key = sealed.require_key(app, f"credential {row['name']!r}")
        if not sealed.held(conn, _owner(row["id"])):
            raise Conflict(
                f"credential {row['name']!r} is a reference "
                f"({', '.join(f'{k}={v}' for k, v in row['reference'].items())}): its secret "
                "lives where that points, and is rotated there", code="NO_SEALED_SECRET",
                field="credentials", value=ref,
                rule="only a credential whose secret the server holds is rotated here")
        summary = sealed.store(conn, key, _owner(row["id"]), _sealable(plain), shown, now,
                               replace=True)
        record_event(conn, now, "credential", row["id"], "rotated",
                     f"credential {row['name']}: secret {summary.fingerprint}")
    return Credential.model_validate({**row, "secret": summary})


def delete_credential(app: App, ref: str, expect: Expectation | None = None) -> Credential:
    """Refused while a node pool that is not deleted uses it (checked under the row lock).
    ``expect``: as for ``rotate_credential``."""
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(
            conn, schema.credentials, ref, live=_LIVE, kind="credential", field="credentials",
            lock=True,
        )
        if expect is not None:
            expect(with_secrets(conn, [row])[0])
        users = conn.execute(
            sa.select(schema.node_pools.c.name).where(
                schema.node_pools.c.credential_id == row["id"],
                schema.node_pools.c.state.in_(list(LIVE_POOL_STATES)),
            )
        ).scalars().all()
        if users:
            raise Conflict(
                f"credential {row['name']!r} is used by node pool(s) {', '.join(sorted(users))}",
                code="CREDENTIAL_IN_USE", field="credentials", value=ref,
                rule="a credential used by a node pool cannot be deleted",
            )
        conn.execute(
            schema.credentials.update().where(schema.credentials.c.id == row["id"])
            .values(state="deleted", deleted_at=now)
        )
        # No pool needs the secret any more (a pool's destroy ran before it was deleted).
        sealed.drop(conn, _owner(row["id"]))
        record_event(conn, now, "credential", row["id"], "deleted", f"credential {row['name']}")
    return Credential.model_validate({**row, "state": "deleted"})
