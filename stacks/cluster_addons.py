"""Stack program for a cluster's add-ons (once per cluster): the NVIDIA stack."""

from __future__ import annotations

from collections.abc import Callable

import pulumi

from components.nvidia import RUNTIME_CLASS, NvidiaAddons
from components.pins import Pins
from stacks.config import ClusterAddonsStackConfig
from stacks.pins import load_pins
from stacks.providers import kube_provider

CONFIG_KEY = "clusterAddons"  # `anycloud:clusterAddons`, a JSON object
RUNTIME_CLASS_TYPE = "kubernetes:node.k8s.io/v1:RuntimeClass"


def use_existing_runtime_class(
    args: pulumi.ResourceTransformationArgs,
) -> pulumi.ResourceTransformationResult | None:
    """K3s's own RuntimeClass nvidia is used as is: the stack reads it (a ``get``), so the
    object is never written, while the DaemonSet still names it."""
    if args.type_ != RUNTIME_CLASS_TYPE:
        return None
    read = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(id=RUNTIME_CLASS))
    return pulumi.ResourceTransformationResult(args.props, read)


def build_program(config: ClusterAddonsStackConfig, pins: Pins | None = None) -> Callable[[], None]:
    def program() -> None:
        p = pins or load_pins()
        kube = kube_provider(config.cluster)
        NvidiaAddons(
            "nvidia",
            config.cluster.id,
            p.device_plugin,
            pulumi.ResourceOptions(
                providers=[kube],
                transformations=(
                    None if config.manage_runtime_class else [use_existing_runtime_class]
                ),
            ),
        )
        pulumi.export("runtimeClass", "nvidia")
        pulumi.export("devicePluginImage", p.device_plugin.image)

    return program


def program_from_pulumi_config() -> None:
    raw = pulumi.Config("anycloud").require_object(CONFIG_KEY)
    build_program(ClusterAddonsStackConfig.model_validate(raw))()
