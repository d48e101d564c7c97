"""GCP pool network: custom-mode VPC, one subnetwork, deny-all ingress, allow egress."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components import naming
from components.network import HTTP_PORT, NetworkSpec

# Lower number wins. The edge rule must beat the explicit deny.
EDGE_PRIORITY = 1000
DENY_PRIORITY = 65534


class GcpIsolatedNetwork(pulumi.ComponentResource):
    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    subnet_self_link: pulumi.Output[str]

    def __init__(
        self, name: str, spec: NetworkSpec, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("anycloud:network:GcpIsolatedNetwork", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        base = f"anycloud-{naming.resource_slug(spec.pool_id, 40)}"

        net = gcp.compute.Network(
            f"{name}-vpc",
            name=base,
            auto_create_subnetworks=False,
            description=f"anycloud pool {spec.pool_id} (cluster {spec.cluster_id})",
            opts=child,
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=f"{base}-subnet",
            network=net.id,
            region=spec.region,
            ip_cidr_range=spec.subnet_cidr,
            opts=child,
        )
        # The implied GCP ingress rule already denies; the explicit one makes the intent
        # visible and outranks any broader allow someone adds at a lower priority.
        for family, everywhere in (("v4", "0.0.0.0/0"), ("v6", "::/0")):
            gcp.compute.Firewall(
                f"{name}-deny-ingress-{family}",
                name=f"{base}-deny-ingress-{family}",
                network=net.id,
                direction="INGRESS",
                priority=DENY_PRIORITY,
                denies=[gcp.compute.FirewallDenyArgs(protocol="all")],
                source_ranges=[everywhere],
                opts=child,
            )
        gcp.compute.Firewall(
            f"{name}-allow-egress",
            name=f"{base}-allow-egress",
            network=net.id,
            direction="EGRESS",
            priority=DENY_PRIORITY,
            allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
            destination_ranges=["0.0.0.0/0"],
            opts=child,
        )
        if spec.hosts_service:
            # One rule per address family: GCP rejects mixed IPv4/IPv6 source ranges.
            for family, ranges in (("v4", spec.edge.ipv4), ("v6", spec.edge.ipv6)):
                gcp.compute.Firewall(
                    f"{name}-edge-http-{family}",
                    name=f"{base}-edge-http-{family}",
                    network=net.id,
                    direction="INGRESS",
                    priority=EDGE_PRIORITY,
                    allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(HTTP_PORT)])],
                    source_ranges=list(ranges),
                    opts=child,
                )

        self.network_id = net.id
        self.subnet_id = subnet.id
        self.subnet_self_link = subnet.self_link
        self.register_outputs({"networkId": net.id, "subnetId": subnet.id})
