"""The anycloud.sh label/tag keys and how each cloud spells them.

Canonical keys are the Kubernetes label keys (``anycloud.sh/node-pool``). Clouds that refuse
those characters get a fixed, reversible-enough mapping, which the components must use too:

- AWS: the canonical key as is.
- GCP labels allow only ``[a-z0-9_-]`` (keys must start with a letter, both at most 63
  chars): ``.`` becomes ``-`` and ``/`` becomes ``_``, so ``anycloud.sh/node-pool`` is
  ``anycloud-sh_node-pool``. Values are lower-cased, any other character becomes ``-``.
- Azure tag names may not contain ``/`` (nor ``<>%&\\?``): the policy accepts the canonical key
  and ``anycloud.sh_node-pool`` (``/`` becomes ``_``).
"""

from __future__ import annotations

import re

PREFIX = "anycloud.sh/"
CLUSTER = PREFIX + "cluster"
NODE_POOL = PREFIX + "node-pool"
ATTEMPT = PREFIX + "attempt"
PROVIDER = PREFIX + "provider"

POOL_TAG_KEYS = (CLUSTER, NODE_POOL, ATTEMPT)


def gcp_label_key(key: str) -> str:
    """``anycloud.sh/node-pool`` -> ``anycloud-sh_node-pool``."""
    return key.replace(".", "-").replace("/", "_")


def gcp_label_value(value: str) -> str:
    """Lower-case; characters GCP refuses in label values become ``-``; at most 63 chars."""
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


def azure_tag_key(key: str) -> str:
    """``anycloud.sh/node-pool`` -> ``anycloud.sh_node-pool`` (Azure refuses ``/`` in names)."""
    return key.replace("/", "_")


def accepted_keys(provider: str, key: str) -> tuple[str, ...]:
    """The spellings of a canonical key the policy accepts on a provider's VM."""
    if provider == "gcp":
        return (gcp_label_key(key),)
    if provider == "azure":
        return (key, azure_tag_key(key))
    return (key,)
