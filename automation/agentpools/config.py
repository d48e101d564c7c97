"""The agent's configuration file (the ConfigMap mounted at ``/run/anycloud``), its broker
address, and the small option parsers the broker and agent commands share.

The file, as the seed's ``velda.yaml`` with our names::

    broker:
      address: "anycloud-broker.anycloud.svc.cluster.local:50051"
    sandbox_config: {...}     # other sections belong to other readers and are kept as given

``broker.address`` is ``host:port`` (plain HTTP, as inside a cluster) or a full
``http://`` / ``https://`` URL.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

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


class AgentConfig(BaseModel):
    # Sections of other readers (sandbox_config, ...) are allowed and left alone.
    model_config = ConfigDict(extra="allow")

    broker: BrokerSection

    @property
    def broker_url(self) -> str:
        return broker_url(self.broker.address)


def load_config(path: str | os.PathLike[str]) -> AgentConfig:
    """Read and check the file; every refusal names the file and the field."""
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
