"""Azure PoolVM: a VM (with its NIC and public IP) with no identity and no SSH key.

Image: azure-native has no function that lists a marketplace image's versions, so a new VM
takes the pinned reference (version ``latest``), which Azure resolves once, when it creates
the VM, and reports as ``storageProfile.imageReference.exactVersion``: the VM exports that
concrete image (``publisher:offer:sku:<exactVersion>``) for its attempt's record. The input
``latest`` never changes, so a newer version changes no existing VM; once the attempt's
image is recorded, the reference is also kept as created whatever the pin becomes
(``ignore_changes``).
"""

from __future__ import annotations

import base64

import pulumi
import pulumi_azure_native as azure
import pulumi_random as random

from components import naming
from components.network.azure import AzureIsolatedNetwork
from components.pins import AzureImage
from components.vm import VmSpec, user_data_options

ADMIN_USER = "anycloud"


def public_ip_name(node_name: str) -> str:
    return f"{node_name}-ip"


def image_urn(image: AzureImage, exact_version: str | None) -> str:
    """The concrete image a VM was built from, as ``az vm create --image`` takes it; empty
    while Azure has not said which version ``latest`` was."""
    version = exact_version or (image.version if image.version != "latest" else None)
    return f"{image.publisher}:{image.offer}:{image.sku}:{version}" if version else ""


class AzurePoolVM(pulumi.ComponentResource):
    vm_id: pulumi.Output[str]
    public_ip: pulumi.Output[str]
    node_name: str
    image: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: VmSpec,
        network: AzureIsolatedNetwork,
        opts: pulumi.ResourceOptions | None = None,
        recorded_image: str | None = None,
    ) -> None:
        """``recorded_image``: the URN recorded for the attempt (its VM exists)."""
        super().__init__("anycloud:vm:AzurePoolVM", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = naming.azure_tags(spec.tags)
        zones = [spec.zone] if spec.zone else None

        # Azure demands a password or an SSH key for Linux. We give neither out: a random
        # password that is never exported, password SSH off in cloud-init, sshd disabled
        # by the join script, and the NSG admits no SSH anyway.
        password = random.RandomPassword(
            f"{name}-admin",
            length=32,
            special=True,
            override_special="-_=+#%",
            min_lower=2,
            min_upper=2,
            min_numeric=2,
            min_special=2,
            opts=child,
        )
        custom_data = pulumi.Output.secret(spec.user_data).apply(
            lambda ud: base64.b64encode(ud.encode()).decode()
        )
        image = spec.images.azure_gpu if spec.gpu else spec.images.azure_cpu
        vm = azure.compute.VirtualMachine(
            f"{name}-vm",
            vm_name=spec.node_name,
            resource_group_name=network.resource_group_name,
            location=network.location,
            zones=zones,
            hardware_profile=azure.compute.HardwareProfileArgs(vm_size=spec.vm_type),
            # NIC and public IP are declared on the VM (network API 2020-11-01): Azure
            # creates them with it and deletes them with it (deleteOption), and the SDK
            # registers one resource instead of three (each azure-native resource carries
            # ~60 API-version aliases that cost ~25 ms apiece to evaluate).
            network_profile=azure.compute.NetworkProfileArgs(
                network_api_version="2020-11-01",
                network_interface_configurations=[
                    azure.compute.VirtualMachineNetworkInterfaceConfigurationArgs(
                        name=f"{spec.node_name}-nic",
                        primary=True,
                        delete_option="Delete",
                        ip_configurations=[
                            azure.compute.VirtualMachineNetworkInterfaceIPConfigurationArgs(
                                name="primary",
                                primary=True,
                                subnet=azure.compute.SubResourceArgs(id=network.subnet_id),
                                public_ip_address_configuration=(
                                    azure.compute.VirtualMachinePublicIPAddressConfigurationArgs(
                                        name=public_ip_name(spec.node_name),
                                        delete_option="Delete",
                                        public_ip_allocation_method="Static",
                                        sku=azure.compute.PublicIPAddressSkuArgs(
                                            name="Standard", tier="Regional"
                                        ),
                                    )
                                ),
                            )
                        ],
                    )
                ],
            ),
            os_profile=azure.compute.OSProfileArgs(
                computer_name=spec.node_name,
                admin_username=ADMIN_USER,
                admin_password=password.result,
                custom_data=custom_data,
                linux_configuration=azure.compute.LinuxConfigurationArgs(
                    disable_password_authentication=False,
                    provision_vm_agent=True,
                ),
            ),
            storage_profile=azure.compute.StorageProfileArgs(
                image_reference=azure.compute.ImageReferenceArgs(
                    publisher=image.publisher,
                    offer=image.offer,
                    sku=image.sku,
                    version=image.version,
                ),
                os_disk=azure.compute.OSDiskArgs(
                    create_option="FromImage",
                    delete_option="Delete",
                    disk_size_gb=100 if spec.gpu else 40,
                    managed_disk=azure.compute.ManagedDiskParametersArgs(
                        storage_account_type="StandardSSD_LRS"
                    ),
                ),
            ),
            # No `identity`: the VM gets no managed identity.
            tags=tags,
            opts=pulumi.ResourceOptions.merge(
                pulumi.ResourceOptions.merge(child, user_data_options(spec, "osProfile")),
                pulumi.ResourceOptions(
                    ignore_changes=["storageProfile.imageReference"] if recorded_image else None
                ),
            ),
        )
        # Read the address Azure assigned once the VM (and so its IP) exists; unknown in a
        # preview of a new VM.
        address = azure.network.get_public_ip_address_output(
            resource_group_name=network.resource_group_name,
            public_ip_address_name=public_ip_name(spec.node_name),
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[vm]),
        )
        self.node_name = spec.node_name
        self.vm_id = vm.vm_id
        self.public_ip = address.ip_address.apply(lambda ip: ip or "")
        self.image = (
            pulumi.Output.from_input(recorded_image)
            if recorded_image
            else vm.storage_profile.apply(
                lambda sp: image_urn(
                    image, sp.image_reference.exact_version if sp and sp.image_reference else None
                )
            )
        )
        self.register_outputs(
            {
                "vmId": vm.vm_id,
                "publicIp": self.public_ip,
                "nodeName": spec.node_name,
                "image": self.image,
            }
        )
