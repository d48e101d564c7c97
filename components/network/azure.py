"""Azure pool network: its own resource group, VNet, subnet and NSG (on the subnet)."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from components import naming
from components.network import HTTP_PORT, NetworkSpec

EDGE_PRIORITY = 100
DENY_PRIORITY = 4096


class AzureIsolatedNetwork(pulumi.ComponentResource):
    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    resource_group_name: pulumi.Output[str]
    location: str

    def __init__(
        self, name: str, spec: NetworkSpec, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("anycloud:network:AzureIsolatedNetwork", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = naming.azure_tags(
            naming.ownership_tags(cluster_id=spec.cluster_id, pool_id=spec.pool_id)
        )
        base = f"anycloud-{naming.resource_slug(spec.pool_id, 40)}"

        rg = azure.resources.ResourceGroup(
            f"{name}-rg",
            resource_group_name=base,
            location=spec.region,
            tags=tags,
            opts=child,
        )
        # Named, not autonamed: a name is what finds a resource again in its group when the
        # stack's state is lost (an autoname's random suffix is lost with it).
        vnet = azure.network.VirtualNetwork(
            f"{name}-vnet",
            virtual_network_name=f"{base}-vnet",
            resource_group_name=rg.name,
            location=spec.region,
            address_space=azure.network.AddressSpaceArgs(address_prefixes=[spec.cidr]),
            tags=tags,
            opts=child,
        )
        rules = [
            azure.network.SecurityRuleArgs(
                name="deny-internet-inbound",
                priority=DENY_PRIORITY,
                direction="Inbound",
                access="Deny",
                protocol="*",
                source_address_prefix="Internet",
                source_port_range="*",
                destination_address_prefix="*",
                destination_port_range="*",
            )
        ]
        if spec.hosts_service:
            # One rule per address family; NSG rules do not mix IPv4 and IPv6 prefixes.
            for offset, (family, ranges) in enumerate(
                (("v4", spec.edge.ipv4), ("v6", spec.edge.ipv6))
            ):
                rules.append(
                    azure.network.SecurityRuleArgs(
                        name=f"allow-edge-http-{family}",
                        priority=EDGE_PRIORITY + offset,
                        direction="Inbound",
                        access="Allow",
                        protocol="Tcp",
                        source_address_prefixes=list(ranges),
                        source_port_range="*",
                        destination_address_prefix="*",
                        destination_port_range=str(HTTP_PORT),
                    )
                )
        nsg = azure.network.NetworkSecurityGroup(
            f"{name}-nsg",
            network_security_group_name=f"{base}-nsg",
            resource_group_name=rg.name,
            location=spec.region,
            security_rules=rules,
            tags=tags,
            opts=child,
        )
        subnet = azure.network.Subnet(
            f"{name}-subnet",
            subnet_name=f"{base}-subnet",
            resource_group_name=rg.name,
            virtual_network_name=vnet.name,
            address_prefix=spec.subnet_cidr,
            network_security_group=azure.network.NetworkSecurityGroupArgs(id=nsg.id),
            opts=child,
        )

        self.network_id = vnet.id
        self.subnet_id = subnet.id
        self.resource_group_name = rg.name
        self.location = spec.region
        self.register_outputs(
            {"networkId": vnet.id, "subnetId": subnet.id, "resourceGroupName": rg.name}
        )
