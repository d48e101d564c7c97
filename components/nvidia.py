"""NvidiaAddons: the cluster-wide NVIDIA RuntimeClass and device-plugin DaemonSet.

Add-ons are never uninstalled (``retain_on_delete``): deleting the cluster record forgets
its connection, and without GPU Nodes the DaemonSet selects nothing.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components import naming
from components.pins import DevicePluginPin

RUNTIME_CLASS = "nvidia"
DAEMONSET_NAME = "anycloud-nvidia-device-plugin"
NAMESPACE = "kube-system"


# The add-on objects are ours: an edit made by any other field manager (`kubectl edit`,
# `kubectl set env`) is overwritten on the next apply instead of failing it with a
# server-side apply conflict.
FORCE_APPLY = {"pulumi.com/patchForce": "true"}


def addon_labels(cluster_id: str) -> dict[str, str]:
    return {naming.MANAGED_BY: naming.MANAGER, naming.CLUSTER: cluster_id}


def node_affinity(cluster_id: str) -> k8s.core.v1.AffinityArgs:
    return k8s.core.v1.AffinityArgs(
        node_affinity=k8s.core.v1.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                node_selector_terms=[
                    k8s.core.v1.NodeSelectorTermArgs(
                        match_expressions=[
                            k8s.core.v1.NodeSelectorRequirementArgs(
                                key=naming.CLUSTER, operator="In", values=[cluster_id]
                            ),
                            k8s.core.v1.NodeSelectorRequirementArgs(
                                key=naming.ACCELERATOR, operator="In", values=["nvidia"]
                            ),
                        ]
                    )
                ]
            )
        )
    )


class NvidiaAddons(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        cluster_id: str,
        device_plugin: DevicePluginPin,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("anycloud:cluster:NvidiaAddons", name, None, opts)
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        labels = addon_labels(cluster_id)

        self.runtime_class = k8s.node.v1.RuntimeClass(
            f"{name}-runtimeclass",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=RUNTIME_CLASS, labels=labels,
                                                annotations=FORCE_APPLY),
            handler="nvidia",
            opts=keep,
        )
        pod_labels = {"app.kubernetes.io/name": DAEMONSET_NAME, **labels}
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-device-plugin",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=DAEMONSET_NAME, namespace=NAMESPACE, labels=labels, annotations=FORCE_APPLY
            ),
            spec=k8s.apps.v1.DaemonSetSpecArgs(
                selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"app.kubernetes.io/name": DAEMONSET_NAME}
                ),
                update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=pod_labels),
                    spec=k8s.core.v1.PodSpecArgs(
                        node_selector={naming.CLUSTER: cluster_id, naming.ACCELERATOR: "nvidia"},
                        affinity=node_affinity(cluster_id),
                        # Node-pool taints only. Never an operator-Exists toleration without
                        # a key: that would also tolerate the management Node's taint.
                        tolerations=[
                            k8s.core.v1.TolerationArgs(
                                key=naming.NODE_POOL, operator="Exists", effect="NoSchedule"
                            )
                        ],
                        priority_class_name="system-node-critical",
                        # The plugin needs the NVIDIA runtime to reach NVML on the host.
                        runtime_class_name=RUNTIME_CLASS,
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name="nvidia-device-plugin-ctr",
                                image=device_plugin.image,
                                env=[
                                    k8s.core.v1.EnvVarArgs(name="FAIL_ON_INIT_ERROR", value="false")
                                ],
                                security_context=k8s.core.v1.SecurityContextArgs(
                                    allow_privilege_escalation=False,
                                    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                                ),
                                volume_mounts=[
                                    k8s.core.v1.VolumeMountArgs(
                                        name="device-plugin",
                                        mount_path="/var/lib/kubelet/device-plugins",
                                    )
                                ],
                            )
                        ],
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name="device-plugin",
                                host_path=k8s.core.v1.HostPathVolumeSourceArgs(
                                    path="/var/lib/kubelet/device-plugins"
                                ),
                            )
                        ],
                    ),
                ),
            ),
            opts=keep,
        )
        self.register_outputs({})
