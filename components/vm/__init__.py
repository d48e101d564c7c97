"""PoolVM: one VM per attempt, one implementation per cloud.

Every implementation: named and tagged with attempt, pool and cluster ids; a public address;
no SSH key or key pair; no instance profile / service account / managed identity; an x86_64
image (a CUDA-ready one for NVIDIA VM types); user data that is secret both as an input
(``Output.secret``) and in the VM's state (``additional_secret_outputs``).

User data carries the attempt's bootstrap token, so a new token (retry) replaces the VM
(``replace_on_changes``), while an attempt whose token was already consumed keeps its VM
(``keep_user_data`` -> ``ignore_changes``).

The image is the attempt's, never "the newest" at each run: the stack program resolves the
newest image only for an attempt that has none recorded, and builds every other attempt's VM
from the image recorded for it (``pool_vm(image=...)``), so publishing a newer image changes
no existing VM. Each VM exposes the image it was built from (``image``) for the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import pulumi

from components import naming
from components.pins import ImagePins

if TYPE_CHECKING:
    from components.network.aws import AwsIsolatedNetwork
    from components.network.azure import AzureIsolatedNetwork
    from components.network.gcp import GcpIsolatedNetwork
    from components.vm.aws import AwsPoolVM
    from components.vm.azure import AzurePoolVM
    from components.vm.gcp import GcpPoolVM


@dataclass(frozen=True)
class VmSpec:
    cluster_id: str
    pool_id: str
    attempt_id: str
    vm_type: str
    region: str
    zone: str | None
    images: ImagePins
    user_data: pulumi.Input[str]
    gpu_count: int = 0
    gpu_model: str | None = None
    # True once the attempt's Node exists: its token is gone, keep the VM as it is.
    keep_user_data: bool = False
    # True once the attempt's VM was created (its image is recorded): what would replace it
    # to change is left as it was created.
    created: bool = False

    @property
    def node_name(self) -> str:
        return naming.node_name(self.attempt_id)

    @property
    def tags(self) -> dict[str, str]:
        return naming.ownership_tags(
            cluster_id=self.cluster_id, pool_id=self.pool_id, attempt_id=self.attempt_id
        )

    @property
    def gpu(self) -> bool:
        return self.gpu_count > 0


def user_data_options(spec: VmSpec, wire_key: str) -> pulumi.ResourceOptions:
    """Options keeping ``wire_key`` secret in state, and replace/keep per the token's life."""
    if spec.keep_user_data:
        return pulumi.ResourceOptions(
            additional_secret_outputs=[wire_key], ignore_changes=[wire_key]
        )
    return pulumi.ResourceOptions(
        additional_secret_outputs=[wire_key], replace_on_changes=[wire_key]
    )


class PoolVM(Protocol):
    vm_id: pulumi.Output[str]
    public_ip: pulumi.Output[str]
    node_name: str
    # The image the VM was built from: an AMI id, a GCP image selfLink, an Azure image URN
    # (publisher:offer:sku:version).
    image: pulumi.Output[str]


def pool_vm(
    provider: Literal["aws", "gcp", "azure"],
    name: str,
    spec: VmSpec,
    network: AwsIsolatedNetwork | GcpIsolatedNetwork | AzureIsolatedNetwork,
    opts: pulumi.ResourceOptions | None = None,
    image: pulumi.Input[str] | None = None,
) -> AwsPoolVM | GcpPoolVM | AzurePoolVM:
    """``image``: the image to build the VM from (the attempt's recorded image, or the newest
    one the program resolved once for the pool): an AMI id on AWS, an image selfLink on GCP,
    on Azure the URN recorded for the attempt (a new Azure VM takes ``latest``: see
    ``AzurePoolVM``). None: the component looks the newest image up itself."""
    if provider == "aws":
        from components.network.aws import AwsIsolatedNetwork
        from components.vm.aws import AwsPoolVM

        assert isinstance(network, AwsIsolatedNetwork)
        return AwsPoolVM(name, spec, network, opts, ami=image)
    if provider == "gcp":
        from components.network.gcp import GcpIsolatedNetwork
        from components.vm.gcp import GcpPoolVM

        assert isinstance(network, GcpIsolatedNetwork)
        return GcpPoolVM(name, spec, network, opts, image=image)
    if provider == "azure":
        from components.network.azure import AzureIsolatedNetwork
        from components.vm.azure import AzurePoolVM

        assert isinstance(network, AzureIsolatedNetwork)
        assert image is None or isinstance(image, str)
        return AzurePoolVM(name, spec, network, opts, recorded_image=image)
    raise ValueError(f"unsupported provider {provider!r}")
