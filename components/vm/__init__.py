"""PoolVM: one VM per attempt, one implementation per cloud.

Every implementation: named and tagged with attempt, pool and cluster ids; a public address;
no SSH key or key pair; no instance profile / service account / managed identity; an x86_64
image (a CUDA-ready one for NVIDIA VM types); user data that is secret both as an input
(``Output.secret``) and in the VM's state (``additional_secret_outputs``).

User data carries the attempt's bootstrap token, so a new token (retry) replaces the VM
(``replace_on_changes``), while an attempt whose token was already consumed keeps its VM
(``keep_user_data`` -> ``ignore_changes``).
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


def pool_vm(
    provider: Literal["aws", "gcp", "azure"],
    name: str,
    spec: VmSpec,
    network: AwsIsolatedNetwork | GcpIsolatedNetwork | AzureIsolatedNetwork,
    opts: pulumi.ResourceOptions | None = None,
    image: pulumi.Input[str] | None = None,
) -> AwsPoolVM | GcpPoolVM | AzurePoolVM:
    """``image``: a pool-wide image id resolved once (AWS AMI); other clouds name theirs."""
    if provider == "aws":
        from components.network.aws import AwsIsolatedNetwork
        from components.vm.aws import AwsPoolVM

        assert isinstance(network, AwsIsolatedNetwork)
        return AwsPoolVM(name, spec, network, opts, ami=image)
    if provider == "gcp":
        from components.network.gcp import GcpIsolatedNetwork
        from components.vm.gcp import GcpPoolVM

        assert isinstance(network, GcpIsolatedNetwork)
        return GcpPoolVM(name, spec, network, opts)
    if provider == "azure":
        from components.network.azure import AzureIsolatedNetwork
        from components.vm.azure import AzurePoolVM

        assert isinstance(network, AzureIsolatedNetwork)
        return AzurePoolVM(name, spec, network, opts)
    raise ValueError(f"unsupported provider {provider!r}")
