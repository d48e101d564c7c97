"""The agent's configuration file (the ConfigMap mounted at ``/run/anycloud``), its broker
address, and the small option parsers the broker and agent commands share.

The file, as the seed's ``velda.yaml`` with our names::

    broker:
      address: "anycloud-broker.anycloud.svc.cluster.local:50051"
    sandbox_config:           # how sessions run (automation/agentpools/sandbox.py)
      session_user: 65534     # uid or name; default nobody (65534) when the agent may switch
      session_group: 65534    # gid or name; default the user's own group
      disk_source:            # where session directories live; default the agent's data dir
        path: /mnt/sessions   # or: an already-mounted volume
        # or: nfs_mount_source: {server: nfs.example.internal, path: /exports/sessions,
        #                        mount_options: nolock}   (the agent mounts it at start)
      unsafe_same_user_sessions: false   # true: sessions may run as the agent's own user

Other top-level sections belong to other readers and are kept as given. ``sandbox_config``
is ours and strict: an unknown key, or a part the agent cannot honour, is refused when the
agent starts (exit 2, naming the field), never ignored.

``broker.address`` is ``host:port`` (plain HTTP, as inside a cluster) or a full
``http://`` / ``https://`` URL.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from automation.errors import InvalidInput

DEFAULT_CONFIG = "/run/anycloud/anycloud.yaml"
DEFAULT_PORT = 50051
ADDRESS_RULE = "must be host:port or an http:// or https:// URL"
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)"
                        r":(?P<port>[0-9]{1,5})")
_URL = re.compile(r"https?://[^/\s?#]+(/[^\s?#]*)?")
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def broker_url(address: str, field: str = "broker.address") -> str:
    """``host:port`` or a URL, as the base URL of the broker's API. A URL ending in ``/v1``
    (as ``anycloud serve`` prints the API's, which serves the broker too) is taken as it is
    printed: the client adds ``/v1`` itself."""
    text = address.strip() if isinstance(address, str) else ""
    if _URL.fullmatch(text):
        return text.rstrip("/").removesuffix("/v1")
    match = _HOST_PORT.fullmatch(text)
    if match and 0 < int(match["port"]) < 65536:
        return f"http://{text}"
    raise InvalidInput(field, address, ADDRESS_RULE)


class BrokerSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        try:
            broker_url(value)
        except InvalidInput as err:
            raise ValueError(ADDRESS_RULE) from err
        return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


NFS_RULE = ("must name the NFS server and the export to mount (server, path): anycloud's "
            "broker exports no NFS share of its own (the seed's Velda API server did)")


class NfsMountSource(_Strict):
    """An NFS export the agent mounts at start (``mount -t nfs``), for session directories."""

    server: str | None = None
    path: str | None = None
    mount_options: str = ""

    @model_validator(mode="after")
    def _whole(self) -> NfsMountSource:
        if not self.server or not self.path or not self.path.startswith("/"):
            raise ValueError(NFS_RULE)
        if any(c.isspace() for c in self.mount_options) or "," in (self.server + self.path):
            raise ValueError("mount_options must be one comma-separated word (no spaces), "
                             "server and path must hold no comma")
        return self


class DiskSource(_Strict):
    """Where session directories live: by default under the agent's data dir; ``path``: an
    already-mounted volume (the agent mounts nothing there); ``nfs_mount_source``: an NFS
    export the agent mounts itself."""

    path: str | None = None
    nfs_mount_source: NfsMountSource | None = None

    @model_validator(mode="after")
    def _one(self) -> DiskSource:
        if self.path is not None and self.nfs_mount_source is not None:
            raise ValueError("give path or nfs_mount_source, not both")
        if self.path is not None and not self.path.startswith("/"):
            raise ValueError("path must be absolute (where the volume is mounted)")
        return self


class SandboxConfig(_Strict):
    """How the agent runs sessions (``automation.agentpools.sandbox``)."""

    session_user: int | str | None = None  # None: nobody (65534) when the agent may switch
    session_group: int | str | None = None  # None: the session user's own group
    disk_source: DiskSource = DiskSource()
    # Sessions as the agent's own user can read its token (/proc/<agent>/environ): refused
    # unless asked for by this name.
    unsafe_same_user_sessions: bool = False


class AgentConfig(BaseModel):
    # Sections of other readers are allowed and left alone; sandbox_config is ours.
    model_config = ConfigDict(extra="allow")

    broker: BrokerSection | None = None  # required unless --broker gives it
    sandbox_config: SandboxConfig = SandboxConfig()

    @property
    def broker_url(self) -> str:
        if self.broker is None:
            raise InvalidInput("broker", None, "is required (or give --broker)")
        return broker_url(self.broker.address)


def load_config(path: str | os.PathLike[str], *, broker_required: bool = True) -> AgentConfig:
    """Read and check the file; every refusal names the file and the field.
    ``broker_required``: False when ``--broker`` gives the address (the file is then read
    for its ``sandbox_config``)."""
    import yaml

    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput("--config", where, "must be a readable YAML file "
                           f"({exc.strerror}); or give the broker with --broker") from exc
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(where, "(unparsable)", f"must be YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput(where, type(data).__name__, "must be a YAML mapping with a "
                           "broker section (broker: {address: host:port})")
    if broker_required and data.get("broker") is None:
        raise InvalidInput(f"{where}: broker", None, "is required")
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        value = err.get("input") if err["type"] != "missing" else None
        rule = "is required" if err["type"] == "missing" else err["msg"].removeprefix(
            "Value error, ")
        raise InvalidInput(f"{where}: {loc}", value, rule) from exc


def parse_duration(text: str, field: str) -> float:
    """``30s``, ``5m``, ``1h``, ``7d`` or plain seconds, as seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        seconds = (float(text[:-1]) * units[text[-1]] if text and text[-1] in units
                   else float(text))
    except ValueError:
        seconds = -1
    if not seconds >= 0:  # also refuses NaN
        raise InvalidInput(field, text, "must be a duration such as 30s, 5m, 1h or 7d")
    return seconds


def pod_namespace() -> str:
    """The namespace the agent's pod runs in: POD_NAMESPACE, the service account's, or
    ``default``."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return _SA_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def qualified_pool(pool: str, namespace: str | None) -> str:
    """``name`` or ``namespace/name`` as the broker's ``namespace/name``."""
    if "/" in pool:
        return pool
    return f"{namespace or pod_namespace()}/{pool}"
