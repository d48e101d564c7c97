"""AWS pool network: VPC, subnet in the pool's zone, IGW + route table, security group."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components import naming
from components.network import HTTP_PORT, NetworkSpec


class AwsIsolatedNetwork(pulumi.ComponentResource):
    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]

    def __init__(
        self, name: str, spec: NetworkSpec, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("anycloud:network:AwsIsolatedNetwork", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = naming.ownership_tags(cluster_id=spec.cluster_id, pool_id=spec.pool_id)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.cidr,
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags={**tags, "Name": f"anycloud-{spec.pool_id}"},
            opts=child,
        )
        subnet = aws.ec2.Subnet(
            f"{name}-subnet",
            vpc_id=vpc.id,
            cidr_block=spec.subnet_cidr,
            availability_zone=spec.zone,
            # Public addresses for outbound traffic; the security group admits nothing.
            map_public_ip_on_launch=True,
            tags=tags,
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=child)
        rt = aws.ec2.RouteTable(
            f"{name}-rt",
            vpc_id=vpc.id,
            routes=[
                aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id),
            ],
            tags=tags,
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-rta", subnet_id=subnet.id, route_table_id=rt.id, opts=child
        )

        ingress: list[aws.ec2.SecurityGroupIngressArgs] = []
        if spec.hosts_service:
            # The single inbound rule: HTTP from the edge only, for the whole pool.
            ingress.append(
                aws.ec2.SecurityGroupIngressArgs(
                    description="HTTP from Cloudflare edge",
                    protocol="tcp",
                    from_port=HTTP_PORT,
                    to_port=HTTP_PORT,
                    cidr_blocks=list(spec.edge.ipv4),
                    ipv6_cidr_blocks=list(spec.edge.ipv6),
                )
            )
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=vpc.id,
            description=f"anycloud pool {spec.pool_id}: outbound only",
            # Inline rules make this resource authoritative: anything added out of band
            # is removed on the next update.
            ingress=ingress,
            egress=[
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1",
                    from_port=0,
                    to_port=0,
                    cidr_blocks=["0.0.0.0/0"],
                    ipv6_cidr_blocks=["::/0"],
                )
            ],
            tags=tags,
            opts=child,
        )

        self.network_id = vpc.id
        self.subnet_id = subnet.id
        self.security_group_id = sg.id
        self.register_outputs(
            {"networkId": vpc.id, "subnetId": subnet.id, "securityGroupId": sg.id}
        )
