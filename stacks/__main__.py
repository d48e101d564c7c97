"""Entry point for the plain `pulumi` CLI (Pulumi.yaml `main: stacks/`).

The stack's config selects the program: `anycloud:pool` (a node pool),
`anycloud:clusterAddons` (cluster add-ons) or `anycloud:ingressRelease` (a pool's ingress
release), each a JSON object of the matching config model.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Pulumi runs this file as a script from stacks/; make the project root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pulumi

from stacks import cluster_addons, ingress_release, node_pool

_config = pulumi.Config("anycloud")
if _config.get_object(node_pool.CONFIG_KEY) is not None:
    node_pool.program_from_pulumi_config()
elif _config.get_object(cluster_addons.CONFIG_KEY) is not None:
    cluster_addons.program_from_pulumi_config()
elif _config.get_object(ingress_release.CONFIG_KEY) is not None:
    ingress_release.program_from_pulumi_config()
else:
    raise pulumi.RunError(
        "set anycloud:pool (node pool), anycloud:clusterAddons (cluster add-ons) or "
        "anycloud:ingressRelease (a pool's ingress release) in the stack config"
    )
