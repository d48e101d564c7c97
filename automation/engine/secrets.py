"""Where Pulumi state lives and how its secrets are encrypted.

Backend: ``PULUMI_BACKEND_URL`` when set (s3://, gs://, azblob://, Pulumi Cloud), else
``file://$ANYCLOUD_HOME/state``. Secrets: a KMS URL from ``ANYCLOUD_SECRETS_PROVIDER``, else
the passphrase provider with ``PULUMI_CONFIG_PASSPHRASE``/``_FILE`` when set, else a
passphrase generated once into ``$ANYCLOUD_HOME/passphrase`` (mode 0600) and handed to the
engine by path, so it never sits in an environment variable.
"""

from __future__ import annotations

import os
import secrets as _secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from automation.engine.errors import SecretsConfigError

KMS_SCHEMES = ("awskms://", "gcpkms://", "azurekeyvault://", "hashivault://")


@dataclass(frozen=True)
class StateSettings:
    backend_url: str
    secrets_provider: str  # "passphrase" or a KMS URL
    env: dict[str, str]  # what the engine process needs to decrypt


def backend_url(home: Path, environ: Mapping[str, str]) -> str:
    if environ.get("PULUMI_BACKEND_URL"):
        return environ["PULUMI_BACKEND_URL"]
    state = home / "state"
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    # metadata=skip: the file backend's blob library writes a checkpoint atomically (a temp
    # file renamed over it) but its metadata sidecar (<checkpoint>.attrs) in place, so a run
    # killed at that moment left an empty .attrs and the stack could not be read again
    # ("failed to load checkpoint: EOF"). Pulumi reads nothing from that sidecar.
    return f"file://{state}?metadata=skip"


def where_state_lives(home: Path, environ: Mapping[str, str]) -> str:
    """One line for a long-running process's start: where the Pulumi state is and what keeps
    it, since state that vanishes makes every VM read as absent. Touches nothing."""
    url = environ.get("PULUMI_BACKEND_URL")
    if url:
        return f"Pulumi state: {url.split('?')[0]} (PULUMI_BACKEND_URL)"
    line = (f"Pulumi state: file://{home / 'state'} (file backend under $ANYCLOUD_HOME): it "
            "must outlive this process")
    if environ.get("KUBERNETES_SERVICE_HOST"):
        line += (" -- in a pod, keep $ANYCLOUD_HOME on a PersistentVolume (an emptyDir loses "
                 "it on restart) or set PULUMI_BACKEND_URL")
    return line


def _generated_passphrase(home: Path) -> Path:
    path = home / "passphrase"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise SecretsConfigError(
                f"{path} is readable by others (mode {mode:o}); run `chmod 600 {path}`",
                field="passphrase file", value=str(path), rule="must have mode 0600",
            ) from None
        return path
    with os.fdopen(fd, "w") as fh:
        fh.write(_secrets.token_urlsafe(32))
    return path


def _refuse_empty(var: str, value: str) -> None:
    """Pulumi takes an empty passphrase, and the stack's secrets are then encrypted under a key
    anyone can derive. The value itself is never shown (it may be a real passphrase)."""
    rule = (f"must not be empty: an empty passphrase protects nothing; unset {var} to let "
            "anycloud generate one in $ANYCLOUD_HOME/passphrase (mode 0600), or give a real one")
    if not value.strip():
        raise SecretsConfigError(f"{var} is set but empty", field=var, value="", rule=rule)
    if var.endswith("_FILE"):
        path = Path(value)
        if path.is_file() and not path.read_text(errors="replace").strip():
            raise SecretsConfigError(f"{var} names an empty file: {path}", field=var,
                                     value=str(path), rule=rule)


def state_settings(home: Path, environ: Mapping[str, str] | None = None) -> StateSettings:
    env_in = os.environ if environ is None else environ
    backend = backend_url(home, env_in)
    provider = env_in.get("ANYCLOUD_SECRETS_PROVIDER", "passphrase")
    if provider != "passphrase":
        if not provider.startswith(KMS_SCHEMES):
            raise SecretsConfigError(
                f"ANYCLOUD_SECRETS_PROVIDER {provider!r}: must be 'passphrase' or a KMS URL "
                f"({', '.join(KMS_SCHEMES)})",
                field="ANYCLOUD_SECRETS_PROVIDER", value=provider,
                rule="passphrase or a KMS URL",
            )
        return StateSettings(backend, provider, {})
    for var in ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        if var in env_in:
            _refuse_empty(var, env_in[var])
            return StateSettings(backend, "passphrase", {var: env_in[var]})
    path = _generated_passphrase(home)
    return StateSettings(backend, "passphrase", {"PULUMI_CONFIG_PASSPHRASE_FILE": str(path)})
