"""What status output must never show: where a cluster is and how anycloud reaches it.

Errors from the Kubernetes client and the engine quote the API server's address, the
kubeconfig's path, and sometimes a credential reference (a profile, a key file). Those stay
in the ledger for operators and are replaced in every status view by ``redact``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable
from typing import Any

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>(),;]+", re.IGNORECASE)
# urllib3's connection errors: HTTPSConnectionPool(host='203.0.113.10', port=6443)
_HOST = re.compile(r"host='[^']*'(, port=\d+)?")
# Our own messages name the file: "cannot load kubeconfig /home/me/.kube/config: ..."
_KUBECONFIG = re.compile(r"(kubeconfig) (?:/|~)[^\s:]*")
ENDPOINT = "<endpoint>"
HIDDEN = "<hidden>"


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


def redact(text: str | None, hide: Iterable[str] = ()) -> str | None:
    if not text:
        return text
    for value in sorted(set(hide), key=len, reverse=True):  # longest first: a path's parent
        text = text.replace(value, HIDDEN)
    text = _URL.sub(ENDPOINT, text)
    text = _KUBECONFIG.sub(rf"\1 {HIDDEN}", text)
    return _HOST.sub(f"host='{ENDPOINT}'", text)
