"""GCP PoolVM: a Compute Engine instance with no service account and no SSH keys."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from components import naming
from components.network.gcp import GcpIsolatedNetwork
from components.pins import GcpImage
from components.vm import VmSpec, user_data_options


def default_zone(region: str) -> str:
    # Instances are zonal; without a pool zone use the region's "a" zone.
    return f"{region}-a"


def find_image(image: GcpImage, opts: pulumi.InvokeOutputOptions) -> pulumi.Output[str]:
    """The newest image of the pinned family, as a concrete selfLink. A family given to the
    instance itself is resolved by GCP at create time, and a later run would see another
    image (and replace the VM): the VM takes the concrete image, looked up once per pool and
    only for attempts with no recorded image."""
    return gcp.compute.get_image_output(
        family=image.family, project=image.project, opts=opts
    ).self_link


def _nat_ip(nics: Sequence[gcp.compute.outputs.InstanceNetworkInterface]) -> str:
    configs = nics[0].access_configs if nics else None
    return (configs[0].nat_ip or "") if configs else ""


class GcpPoolVM(pulumi.ComponentResource):
    vm_id: pulumi.Output[str]
    public_ip: pulumi.Output[str]
    node_name: str
    image: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: VmSpec,
        network: GcpIsolatedNetwork,
        opts: pulumi.ResourceOptions | None = None,
        image: pulumi.Input[str] | None = None,
    ) -> None:
        super().__init__("anycloud:vm:GcpPoolVM", name, None, opts)
        # A VM that exists keeps the boot disk it was created with: any change under bootDisk
        # replaces the instance, and disk labels alone are not worth a new VM (VMs created
        # before the disks were labelled keep running unlabelled until replaced).
        keep_boot_disk = ["bootDisk.initializeParams.labels"] if spec.created else None
        if image is None:
            pin = spec.images.gcp_gpu if spec.gpu else spec.images.gcp_cpu
            image = find_image(pin, pulumi.InvokeOutputOptions(parent=self))
        accelerators: list[gcp.compute.InstanceGuestAcceleratorArgs] = []
        if spec.gpu and spec.gpu_model and spec.vm_type.startswith("n1-"):
            # Only N1 takes attachable GPUs; A2/A3/G2 machine types include theirs.
            accelerators.append(
                gcp.compute.InstanceGuestAcceleratorArgs(type=spec.gpu_model, count=spec.gpu_count)
            )
        instance = gcp.compute.Instance(
            f"{name}-instance",
            name=spec.node_name,
            machine_type=spec.vm_type,
            zone=spec.zone or default_zone(spec.region),
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                auto_delete=True,
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=image,
                    size=100 if spec.gpu else 40,
                    # Disks are billed apart from the instance and carry their own labels.
                    labels=naming.gcp_labels(spec.tags),
                ),
            ),
            network_interfaces=[
                gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=network.subnet_self_link,
                    # An empty access config = an ephemeral public address.
                    access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()],
                )
            ],
            guest_accelerators=accelerators or None,
            scheduling=gcp.compute.InstanceSchedulingArgs(
                on_host_maintenance="TERMINATE" if spec.gpu else "MIGRATE",
                automatic_restart=True,
            ),
            # No service_account block: the VM gets no Google credential at all.
            metadata={
                # cloud-init on Ubuntu reads #cloud-config from the "user-data" key.
                "user-data": pulumi.Output.secret(spec.user_data),
                "block-project-ssh-keys": "true",
                "enable-oslogin": "false",
            },
            labels=naming.gcp_labels(spec.tags),
            opts=pulumi.ResourceOptions.merge(
                pulumi.ResourceOptions(parent=self, ignore_changes=keep_boot_disk),
                user_data_options(spec, "metadata"),
            ),
        )
        self.node_name = spec.node_name
        self.vm_id = instance.instance_id
        self.public_ip = instance.network_interfaces.apply(_nat_ip)
        self.image = pulumi.Output.from_input(image)
        self.register_outputs(
            {
                "vmId": instance.instance_id,
                "publicIp": self.public_ip,
                "nodeName": spec.node_name,
                "image": self.image,
            }
        )
