"""Where the CLI sends its commands: the local ledger (embedded mode, the default) or a
control plane's API, and the token it sends there.

The choice comes from, first to last: the ``--api`` flag, ``ANYCLOUD_API_URL``, the config file
(``ANYCLOUD_CLI_CONFIG``, default ``$XDG_CONFIG_HOME/anycloud/config.json``, i.e.
``~/.config/anycloud/config.json``), written by ``anycloud api use`` and ``anycloud login``
with mode 0600 (it holds the token). The token: ``ANYCLOUD_TOKEN``, else the config file.

The token goes over HTTPS, or in the clear to this machine's loopback only: plain HTTP to
another host is refused unless the user says ``--insecure`` (for one command, or with
``anycloud api use URL --insecure`` for that URL), since whoever sees the request can act
as the token's owner."""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from automation.errors import InvalidInput

URL_ENV = "ANYCLOUD_API_URL"
TOKEN_ENV = "ANYCLOUD_TOKEN"
CONFIG_ENV = "ANYCLOUD_CLI_CONFIG"
LOCAL = "local"
INSECURE = "insecure"  # the config file's key: "true" lets its apiUrl's token go in the clear
Source = Literal["flag", "env", "config file", "default"]


def config_path() -> Path:
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "anycloud" / "config.json"


def read_config() -> dict[str, str]:
    path = config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise InvalidInput("config file", str(path), f"must be readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput("config file", str(path), "must be a JSON object")
    return {k: v for k, v in data.items() if isinstance(v, str)}


def write_config(values: dict[str, str | None]) -> Path:
    """Merge ``values`` into the config file (None removes a key); mode 0600 from the start."""
    path = config_path()
    data = read_config()
    for key, value in values.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return path


def check_url(url: str, field: str = "URL") -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(field, url, "must be an http(s):// URL of a control plane's API "
                           "(anycloud serve --api-listen), or 'local'")
    # The URL `serve` prints ends in /v1: taken as it is printed (the client adds /v1 itself).
    if parts.path.rstrip("/") not in ("", "/v1") or parts.query or parts.fragment:
        raise InvalidInput(field, url, "must be the server's base URL, without a path "
                           "other than /v1 (the client adds /v1)")
    return url.rstrip("/").removesuffix("/v1")


def is_loopback(host: str | None) -> bool:
    """This machine only: ``localhost``, 127.0.0.0/8 or ::1 (an IPv4 one mapped into v6
    too). A request to it never crosses a network."""
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def in_the_clear(url: str) -> bool:
    """Plain HTTP to another machine: what is sent can be read (and replayed) on the way."""
    parts = urlsplit(url)
    return parts.scheme != "https" and not is_loopback(parts.hostname)


def check_transport(url: str, insecure: bool, field: str) -> None:
    """Refuse to send a token in the clear over a network unless the user said so."""
    if insecure or not in_the_clear(url):
        return
    raise InvalidInput(field, url, "is plain HTTP to another machine: the API token is sent "
                       "only over HTTPS (or to this machine's loopback), since anyone on the "
                       "way could read it and act as you; use https://, or say --insecure "
                       "(for one command, or `anycloud api use URL --insecure` to keep it)")


@dataclass(frozen=True)
class Endpoint:
    """Remote mode's settings; ``url`` None means embedded mode."""

    url: str | None
    source: Source
    token: str | None
    token_source: Literal["env", "config file"] | None
    ca_file: str | None
    insecure: bool = False  # the user accepts sending the token over plain HTTP

    @property
    def field(self) -> str:
        """Where the URL came from, as the user would name it in an error."""
        return {"flag": "--api", "env": URL_ENV}.get(self.source, "apiUrl")

    def check_transport(self) -> None:
        if self.url is not None:
            check_transport(self.url, self.insecure, self.field)


def resolve(flag: str | None, insecure: bool = False) -> Endpoint:
    config = read_config()
    url: str | None
    source: Source
    if flag:
        url, source = flag, "flag"
    elif os.environ.get(URL_ENV):
        url, source = os.environ[URL_ENV], "env"
    elif config.get("apiUrl"):
        url, source = config["apiUrl"], "config file"
    else:
        url, source = None, "default"
    if url == LOCAL:
        url = None
    elif url is not None:
        url = check_url(url, {"flag": "--api", "env": URL_ENV}.get(source, "apiUrl"))
        # The config file's consent is for its own URL, not for one a flag or variable names.
        insecure = insecure or (config.get(INSECURE) == "true"
                                and url == _stored_url(config.get("apiUrl")))
    token_source: Literal["env", "config file"] | None = None
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token:
        token_source = "env"
    elif config.get("token"):
        token, token_source = config["token"], "config file"
    return Endpoint(url=url, source=source, token=token, token_source=token_source,
                    ca_file=config.get("caFile"), insecure=url is not None and insecure)


def _stored_url(url: str | None) -> str | None:
    try:
        return check_url(url) if url and url != LOCAL else None
    except InvalidInput:
        return None
