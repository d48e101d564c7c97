"""IsolatedNetwork: one outbound-only network per pool, one implementation per cloud.

Every implementation: its own network (nothing shared with another pool, no peering), one
subnet, egress open, no inbound rule at all -- except, when the pool hosts a Service, exactly
one rule admitting TCP 80 from the edge ranges (Cloudflare), on the network as a whole.
Where a cloud cannot hold IPv4 and IPv6 sources in one rule (GCP, Azure) that one rule is
written as one object per address family.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import pulumi

from components.pins import EdgeRanges

if TYPE_CHECKING:
    from components.network.aws import AwsIsolatedNetwork
    from components.network.azure import AzureIsolatedNetwork
    from components.network.gcp import GcpIsolatedNetwork

HTTP_PORT = 80


@dataclass(frozen=True)
class NetworkSpec:
    cluster_id: str
    pool_id: str
    region: str
    zone: str | None
    hosts_service: bool
    edge: EdgeRanges
    cidr: str = "10.0.0.0/16"
    subnet_cidr: str = "10.0.1.0/24"


class IsolatedNetwork(Protocol):
    """What the VMs and the stack need from a pool network."""

    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]


def isolated_network(
    provider: Literal["aws", "gcp", "azure"],
    name: str,
    spec: NetworkSpec,
    opts: pulumi.ResourceOptions | None = None,
) -> AwsIsolatedNetwork | GcpIsolatedNetwork | AzureIsolatedNetwork:
    # Import per cloud: touching one provider SDK costs ~1 s.
    if provider == "aws":
        from components.network.aws import AwsIsolatedNetwork

        return AwsIsolatedNetwork(name, spec, opts)
    if provider == "gcp":
        from components.network.gcp import GcpIsolatedNetwork

        return GcpIsolatedNetwork(name, spec, opts)
    if provider == "azure":
        from components.network.azure import AzureIsolatedNetwork

        return AzureIsolatedNetwork(name, spec, opts)
    raise ValueError(f"unsupported provider {provider!r}")
