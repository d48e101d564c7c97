"""What status output must never show: where a cluster is and how anycloud reaches it.

Errors from the Kubernetes client and the engine quote the API server's address (as a URL,
a host name that did not resolve, or a bare ``ip:port``), the kubeconfig's path and the files
it names, and sometimes a credential reference (a profile, a key file). Those stay in the
ledger for operators and are replaced by ``redact`` wherever an error becomes user-visible
text: every model that carries one (``automation.models.ShownText``), with the cluster's own
values when the caller knows them (``cluster_values``). Each replacement says what it hid
(``<api-server>``, ``<file>``, ``<address>``…); the rest of the message (the error's kind,
what failed) stays. ``redact`` is idempotent: the CLI redacts again what the API answered.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

API_SERVER = "<api-server>"
ENDPOINT = "<endpoint>"  # a URL that is not the cluster's known API server
HOST = "<host>"  # a host name that did not resolve, not known to be the API server
ADDRESS = "<address>"  # an IP address, with its port when it had one
FILE = "<file>"
HIDDEN = "<hidden>"  # a credential reference's value

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>(),;]+", re.IGNORECASE)
# urllib3's connection errors: HTTPSConnectionPool(host='203.0.113.10', port=6443)
_HOST = re.compile(r"host='([^']*)'(?:, port=\d+)?")
# urllib3: Failed to resolve 'k3s-abc123.invalid'; Go: dial tcp: lookup k3s-abc.invalid on …
_RESOLVE = re.compile(r"Failed to resolve '(?!<)[^']*'")
_LOOKUP = re.compile(r"\blookup (?!<)[^\s:]+")
# An absolute or home path: "File does not exist: /srv/secrets/admin.crt", "open /srv/ca.crt:
# no such file", "kubeconfig ~/.kube/config" -- any path, since the client libraries word
# these many ways. Kept, being no credential and what a person acts on: a URL's path
# (urllib3's "with url: /api/v1/nodes"), a crash report's ("report: /home/…") and the mock
# engine's state ("mock engine, /home/…": STATE_MISSING says where to restore it).
_PATH = re.compile(r"(?<![\w.:/<>~-])(?<!url: )(?<!report: )(?<!engine, )"
                   r"~?/[\w.@%+=,-]+(?:/[\w.@%+=,-]*)*")
# What could be an address: [v6](:port)?, or a run of hex digits, dots and colons that
# stands alone (not part of a word, a version or a Pulumi URN) and has a separator within
# its first five characters (an octet or a v6 group); _address decides.
_ADDRESS_LIKE = re.compile(
    r"\[[0-9A-Fa-f:.]+(?:%[\w.-]+)?\](?::\d+)?"
    r"|(?<![\w:.])[0-9A-Fa-f]{0,4}[:.][0-9A-Fa-f:.]*[0-9A-Fa-f:](?:%[\w.-]+)?(?!\w)")


def known_values(*values: Any) -> list[str]:
    """The strings to hide, from plain values and credential references (JSON or dicts)."""
    out: list[str] = []
    for value in values:
        if isinstance(value, str) and value.startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        if isinstance(value, dict):
            out += known_values(*value.values())
        elif isinstance(value, str) and len(value) >= 6:  # shorter ones are common words
            out.append(value)
    return out


def cluster_values(server_url: str | None, kubeconfig_path: str | None) -> dict[str, str]:
    """A cluster's API server (its URL, host:port and host) and kubeconfig path, each with
    what it is, for ``redact``: a host that did not resolve is then named ``<api-server>``."""
    out: dict[str, str] = {}
    if server_url:
        parts = urlsplit(server_url)
        for value in (server_url, parts.netloc, parts.hostname):
            if value and len(value) >= 4:  # "k3s" alone is in "v1.36.2+k3s1"
                out[value] = API_SERVER
    if kubeconfig_path:
        out[kubeconfig_path] = FILE
    return out


def redact(text: str | None, hide: Mapping[str, str] | Iterable[str] = ()) -> str | None:
    """``text`` without endpoints, addresses, paths or ``hide``'s values (a mapping: value
    to its label; plain values are labelled ``<hidden>``)."""
    if not text:
        return text
    labels = hide if isinstance(hide, Mapping) else dict.fromkeys(hide, HIDDEN)
    text = _hide_known(text, labels)
    for needle, pattern, shown in _STEPS:
        if needle in text:  # a substring test first: `node-pool list` shows 1,000 pools
            text = pattern.sub(shown, text)
    return _ADDRESS_LIKE.sub(_address, text)


def _hide_known(text: str, labels: Mapping[str, str]) -> str:
    for value in sorted(labels, key=len, reverse=True):  # longest first: a path's parent
        if value in text:
            # Whole values only: host 10.0.0.1 is not the start of 10.0.0.10.
            pattern = rf"(?<![\w.-]){re.escape(value)}(?![\w-]|\.\w)"
            text = re.sub(pattern, labels[value], text)
    return text


def _host(match: re.Match[str]) -> str:
    """Without its port; a host already labelled (``<api-server>``) keeps its label."""
    shown = match.group(1)
    return f"host='{shown if shown.startswith('<') else ENDPOINT}'"


# (a substring each match holds, the pattern, what is shown instead), in this order: a URL
# before the paths and addresses inside it.
_STEPS: tuple[tuple[str, re.Pattern[str], Any], ...] = (
    ("://", _URL, ENDPOINT), ("host='", _HOST, _host),
    ("Failed to resolve '", _RESOLVE, f"Failed to resolve '{HOST}'"),
    ("lookup ", _LOOKUP, f"lookup {HOST}"), ("/", _PATH, FILE))


def _address(match: re.Match[str]) -> str:
    token = match.group(0)
    core = token if token.endswith("::") else token.rstrip(":")  # "dial tcp 10.0.0.1:443:"
    return ADDRESS + token[len(core):] if _is_address(core) else token


def _is_address(token: str) -> bool:
    """An IP address, with or without a port (``10.0.0.1:6443``, ``[2001:db8::1]:6443``)."""
    if token.startswith("["):
        token = token[1:token.index("]")]
    elif token.count(":") == 1 and token.rsplit(":", 1)[1].isdigit():
        token = token.rsplit(":", 1)[0]  # IPv4 with its port (v6 takes brackets for one)
    try:
        ipaddress.ip_address(token.split("%")[0])
    except ValueError:
        return False
    return True
