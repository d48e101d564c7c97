"""Reads the target of a kubeconfig context: the server URL and the CA bundle bytes; and
builds the official client's configuration for the callers that talk through it.

The target is parsed directly rather than through the client, which drops the CA of a
plain-http server and costs half a second to import; the official client still does the
talking (probe.py, ``client_configuration``).
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from automation.kube.port import ClusterUnavailable


@dataclass(frozen=True)
class ContextTarget:
    server_url: str
    ca_pem: bytes | None


def _named(items: Any, name: str, kind: str) -> dict[str, Any]:
    if items is not None and not isinstance(items, list):
        raise ValueError(f"{kind}s must be a list, not {type(items).__name__}")
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            found = item.get(kind) or {}
            if not isinstance(found, dict):
                raise ValueError(f"{kind} {name!r} must be a mapping")
            return found
    raise ValueError(f"no {kind} named {name!r}")


def read_context_target(path: Path, context: str | None = None) -> ContextTarget:
    """Raises ValueError naming what is missing or malformed."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot load kubeconfig {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"cannot load kubeconfig {path}: not a kubeconfig document")
    name = context or doc.get("current-context")
    if not name:
        raise ValueError(f"cannot load kubeconfig {path}: no context given and no current-context")
    try:
        ctx = _named(doc.get("contexts"), name, "context")
        cluster = _named(doc.get("clusters"), str(ctx.get("cluster")), "cluster")
    except ValueError as exc:
        raise ValueError(f"cannot load kubeconfig {path}: {exc}") from exc
    server = cluster.get("server")
    if not server:
        raise ValueError(f"cannot load kubeconfig {path}: context {name!r} has no server")
    ca: bytes | None = None
    if cluster.get("certificate-authority-data"):
        try:
            ca = base64.b64decode(cluster["certificate-authority-data"], validate=True)
        except (binascii.Error, ValueError, TypeError) as exc:  # TypeError: not text
            raise ValueError(f"kubeconfig {path}: certificate-authority-data is not base64") \
                from exc
    elif cluster.get("certificate-authority"):
        if not isinstance(cluster["certificate-authority"], str):
            raise ValueError(f"kubeconfig {path}: certificate-authority must be a file's path")
        ca_path = Path(cluster["certificate-authority"]).expanduser()
        ca_path = ca_path if ca_path.is_absolute() else path.parent / ca_path
        try:
            ca = ca_path.read_bytes()
        except OSError as exc:
            raise ValueError(f"kubeconfig {path}: cannot read certificate-authority {ca_path}") \
                from exc
    return ContextTarget(server_url=str(server), ca_pem=ca)


# What makes a kubeconfig reach outside itself: files on the machine that reads it, or a
# program it runs (exec plugins, auth providers). A kubeconfig sent to the server must carry
# everything inline: the server reads no client's files and runs no client's programs.
_OUTSIDE = {"cluster": ("certificate-authority",),
            "user": ("client-certificate", "client-key", "tokenFile", "exec", "auth-provider")}


def shape_problems(doc: dict[str, Any]) -> list[str]:
    """What breaks a kubeconfig's shape (empty: nothing): clusters, contexts and users must
    each be a list of mappings, each with a name and a mapping under its kind. Said by
    where, never with the values (they may be a token)."""
    found = []
    for kind in ("cluster", "context", "user"):
        items = doc.get(kind + "s")
        if items is None:
            continue
        if not isinstance(items, list):
            found.append(f"{kind}s must be a list, not {type(items).__name__}")
            continue
        for i, item in enumerate(items):
            if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                    and isinstance(item.get(kind) or {}, dict)):
                found.append(f"{kind}s[{i}] must be a mapping with a name and a {kind} mapping")
    return found


def _document(text: str) -> tuple[dict[str, Any], list[str]]:
    """The kubeconfig's document, or why it is none (by kind, never quoting the text)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return {}, [f"not YAML ({exc.__class__.__name__})"]
    if not isinstance(doc, dict) or not doc.get("contexts"):
        return {}, ["not a kubeconfig document (no contexts)"]
    return doc, shape_problems(doc)


def check_document(text: str) -> list[str]:
    """Why a kubeconfig sent to the server is not one (empty: it is): not YAML, no
    contexts, or a broken shape (``users: 5``)."""
    return _document(text)[1]


def check_self_contained(text: str) -> list[str]:
    """Why a kubeconfig sent to the server cannot be used there (empty: it can): not a
    kubeconfig (``check_document``), file references, exec plugins and auth providers, by
    where they are."""
    doc, found = _document(text)
    if found:
        return found
    for kind, keys in _OUTSIDE.items():
        for item in doc.get(kind + "s") or []:
            body = item.get(kind) if isinstance(item, dict) else None
            for key in keys:
                if isinstance(body, dict) and body.get(key):
                    found.append(f"{kind} {item.get('name')!r} uses {key}")
    return found


def client_configuration(kubeconfig: Path | None = None, context: str | None = None) -> Any:
    """The official client's configuration: the kubeconfig's context (KUBECONFIG or
    ~/.kube/config and its current context when not given), or the pod's service account when
    running in a cluster with no kubeconfig."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    path = kubeconfig or (Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
                          if os.environ.get("KUBECONFIG") else Path.home() / ".kube/config")
    try:
        if kubeconfig is None and not path.exists() \
                and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(config_file=str(path), context=context,
                                    client_configuration=cfg, persist_config=False)
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        where = f"kubeconfig {path}" + (f" context {context!r}" if context else "")
        raise ClusterUnavailable(f"cannot load {where}: {exc}") from exc
    cfg.retries = 0  # the next tick retries; urllib3's own retries only delay the answer
    return cfg
