"""Where the CLI sends its commands: the local ledger (embedded mode, the default) or a
control plane's API, and the token it sends there.

The choice comes from, first to last: the ``--api`` flag, ``ANYCLOUD_API_URL``, the config file
(``ANYCLOUD_CLI_CONFIG``, default ``$XDG_CONFIG_HOME/anycloud/config.json``, i.e.
``~/.config/anycloud/config.json``), written by ``anycloud api use`` and ``anycloud login``
with mode 0600 (it holds the token). The token: ``ANYCLOUD_TOKEN``, else the config file."""

from __future__ import annotations

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


@dataclass(frozen=True)
class Endpoint:
    """Remote mode's settings; ``url`` None means embedded mode."""

    url: str | None
    source: Source
    token: str | None
    token_source: Literal["env", "config file"] | None
    ca_file: str | None


def resolve(flag: str | None) -> Endpoint:
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
    token_source: Literal["env", "config file"] | None = None
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token:
        token_source = "env"
    elif config.get("token"):
        token, token_source = config["token"], "config file"
    return Endpoint(url=url, source=source, token=token, token_source=token_source,
                    ca_file=config.get("caFile"))
