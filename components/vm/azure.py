"""Azure PoolVM: a VM (with its NIC and public IP) with no identity and no SSH key."""

from __future__ import annotations

import base64

import pulumi
import pulumi_azure_native as azure
import pulumi_random as random

from components import naming
from components.network.azure import AzureIsolatedNetwork
from components.vm import VmSpec, user_data_options

ADMIN_USER = "anycloud"


def public_ip_name(node_name: str) -> str:
    return f"{node_name}-ip"


class AzurePoolVM(pulumi.ComponentResource):
    vm_id: pulumi.Output[str]
    public_ip: pulumi.Output[str]
    node_name: str

    def __init__(
        self,
        name: str,
        spec: VmSpec,
        network: AzureIsolatedNetwork,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
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
            opts=pulumi.ResourceOptions.merge(child, user_data_options(spec, "osProfile")),
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
        self.register_outputs(
            {"vmId": vm.vm_id, "publicIp": self.public_ip, "nodeName": spec.node_name}
        )
