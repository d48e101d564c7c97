"""Names, tags and labels shared by every cloud.

Tag keys are ``anycloud.sh/<what>``. Not every cloud accepts that spelling:

* GCP label keys and values allow only ``[a-z0-9_-]`` (keys start with a letter, both at most
  63 characters), so ``anycloud.sh/attempt`` becomes ``anycloud-sh_attempt``:
  ``.`` -> ``-`` and ``/`` -> ``_``.
* Azure tag names may not contain ``/`` (nor ``<>%&\\?``), so ``anycloud.sh/attempt`` becomes
  ``anycloud.sh_attempt``.
* AWS tags take the key as is.
"""

from __future__ import annotations

import hashlib
import re

TAG_PREFIX = "anycloud.sh/"
ATTEMPT = "anycloud.sh/attempt"
NODE_POOL = "anycloud.sh/node-pool"
CLUSTER = "anycloud.sh/cluster"
PROVIDER = "anycloud.sh/provider"
ACCELERATOR = "anycloud.sh/accelerator"
INGRESS_ENTRY = "anycloud.sh/ingress-entry"
INGRESS_POOL = "anycloud.sh/ingress-pool"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "anycloud"

_DNS1123 = re.compile(r"[^a-z0-9-]+")


def node_name(attempt_id: str) -> str:
    """The Node name we issue for an attempt (DNS-1123 label, <= 63 chars)."""
    slug = _DNS1123.sub("-", attempt_id.lower()).strip("-")
    digest = hashlib.sha256(attempt_id.encode()).hexdigest()[:8]
    if not slug:
        return f"anycloud-{digest}"
    name = f"anycloud-{slug}"
    if len(name) > 63:
        # Keep it unique after truncation.
        name = f"{name[:54].rstrip('-')}-{digest}"
    return name


def resource_slug(value: str, limit: int = 40) -> str:
    """A lowercase [a-z0-9-] fragment for cloud resource names."""
    slug = _DNS1123.sub("-", value.lower()).strip("-") or "x"
    return slug[:limit].rstrip("-")


def ownership_tags(
    *, cluster_id: str, pool_id: str, attempt_id: str | None = None
) -> dict[str, str]:
    tags = {CLUSTER: cluster_id, NODE_POOL: pool_id}
    if attempt_id is not None:
        tags[ATTEMPT] = attempt_id
    return tags


def gcp_label_key(key: str) -> str:
    return key.replace(".", "-").replace("/", "_")


def gcp_label_value(value: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


def gcp_labels(tags: dict[str, str]) -> dict[str, str]:
    return {gcp_label_key(k): gcp_label_value(v) for k, v in tags.items()}


def azure_tag_key(key: str) -> str:
    return key.replace("/", "_")


def azure_tags(tags: dict[str, str]) -> dict[str, str]:
    return {azure_tag_key(k): v for k, v in tags.items()}
