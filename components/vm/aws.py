"""AWS PoolVM: an EC2 instance with IMDSv2 only, no key pair, no instance profile."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.network.aws import AwsIsolatedNetwork
from components.pins import AwsImage
from components.vm import VmSpec, user_data_options


def find_ami(image: AwsImage, opts: pulumi.InvokeOutputOptions) -> pulumi.Output[str]:
    """The newest image matching the pin. Looked up once per pool and only for attempts with
    no recorded image: a VM is built from its attempt's AMI for the attempt's whole life."""
    return aws.ec2.get_ami_output(
        most_recent=True,
        owners=list(image.owners),
        filters=[
            aws.ec2.GetAmiFilterArgs(name="name", values=[image.name]),
            aws.ec2.GetAmiFilterArgs(name="architecture", values=[image.architecture]),
            aws.ec2.GetAmiFilterArgs(name="state", values=["available"]),
        ],
        opts=opts,
    ).id


class AwsPoolVM(pulumi.ComponentResource):
    vm_id: pulumi.Output[str]
    public_ip: pulumi.Output[str]
    node_name: str
    image: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: VmSpec,
        network: AwsIsolatedNetwork,
        opts: pulumi.ResourceOptions | None = None,
        ami: pulumi.Input[str] | None = None,
    ) -> None:
        super().__init__("anycloud:vm:AwsPoolVM", name, None, opts)
        if ami is None:
            image = spec.images.aws_gpu if spec.gpu else spec.images.aws_cpu
            ami = find_ami(image, pulumi.InvokeOutputOptions(parent=self))
        instance = aws.ec2.Instance(
            f"{name}-instance",
            ami=ami,
            instance_type=spec.vm_type,
            subnet_id=network.subnet_id,
            vpc_security_group_ids=[network.security_group_id],
            associate_public_ip_address=True,
            # No key_name and no iam_instance_profile: nothing to log in with, no cloud
            # credential reachable from the VM.
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=1,
            ),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                volume_size=100 if spec.gpu else 40,
                volume_type="gp3",
                encrypted=True,
                delete_on_termination=True,
            ),
            user_data=pulumi.Output.secret(spec.user_data),
            user_data_replace_on_change=not spec.keep_user_data,
            tags={**spec.tags, "Name": spec.node_name},
            volume_tags=spec.tags,
            opts=pulumi.ResourceOptions.merge(
                pulumi.ResourceOptions(parent=self), user_data_options(spec, "userData")
            ),
        )
        self.node_name = spec.node_name
        self.vm_id = instance.id
        self.public_ip = instance.public_ip
        self.image = pulumi.Output.from_input(ami)
        self.register_outputs(
            {
                "vmId": instance.id,
                "publicIp": instance.public_ip,
                "nodeName": spec.node_name,
                "image": self.image,
            }
        )
