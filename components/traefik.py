"""TraefikIngress: a pinned Traefik release for one pool that hosts a Service.

Installed as a K3s ``helm.cattle.io/v1`` HelmChart (the helm-controller runs the install Job)
by the pool's ingress release stack (``stacks/ingress_release.py``), through the cluster
add-on mechanism. The release runs as a DaemonSet on the pool's elected entry Node only,
binds host port 80, tolerates only that pool's taint, and serves only routes labelled for
that pool. Destroying the stack (the pool is deleted) deletes the HelmChart, and the
helm-controller's finalizer uninstalls the release.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components import naming
from components.pins import TraefikPin

HELM_NAMESPACE = "kube-system"


def release_name(pool_id: str) -> str:
    return f"anycloud-ingress-{naming.resource_slug(pool_id, 36)}"


def traefik_values(cluster_id: str, pool_id: str) -> dict[str, Any]:
    route_selector = f"{naming.INGRESS_POOL}={pool_id}"
    labels = {
        naming.MANAGED_BY: naming.MANAGER,
        naming.CLUSTER: cluster_id,
        naming.NODE_POOL: pool_id,
    }
    return {
        "deployment": {"kind": "DaemonSet", "labels": labels, "podLabels": labels},
        "commonLabels": labels,
        "nodeSelector": {naming.INGRESS_ENTRY: pool_id, naming.NODE_POOL: pool_id},
        # This pool's taint only; nothing that matches the management Node's taint.
        "tolerations": [
            {
                "key": naming.NODE_POOL,
                "operator": "Equal",
                "value": pool_id,
                "effect": "NoSchedule",
            }
        ],
        "ports": {"web": {"hostPort": 80}},
        # No Service: ServiceLB would otherwise claim port 80 on other Nodes.
        "service": {"enabled": False},
        # Several pools' releases coexist: none may claim the cluster's default class.
        "ingressClass": {"enabled": False},
        "providers": {
            "kubernetesCRD": {"labelSelector": route_selector, "allowCrossNamespace": False},
            "kubernetesIngress": {
                "labelSelector": route_selector,
                "publishedService": {"enabled": False},
            },
        },
    }


class TraefikIngress(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        cluster_id: str,
        pool_id: str,
        chart: TraefikPin,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("anycloud:cluster:TraefikIngress", name, None, opts)
        release = release_name(pool_id)
        values = traefik_values(cluster_id, pool_id)
        self.helm_chart = k8s.apiextensions.CustomResource(
            f"{name}-helmchart",
            api_version="helm.cattle.io/v1",
            kind="HelmChart",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=release,
                namespace=HELM_NAMESPACE,
                labels={
                    naming.MANAGED_BY: naming.MANAGER,
                    naming.CLUSTER: cluster_id,
                    naming.NODE_POOL: pool_id,
                },
            ),
            spec={
                "repo": chart.repo,
                "chart": chart.chart,
                "version": chart.version,
                "targetNamespace": release,
                "createNamespace": True,
                # The install (and uninstall) Job on the management Node, as the seed asks.
                # helm-controller (pkg/controllers/chart/chart.go) gives a bootstrap chart's
                # Job the nodeSelector node-role.kubernetes.io/control-plane=true, hostNetwork
                # (it reaches the API server on 127.0.0.1) and tolerations of the
                # control-plane, etcd, CriticalAddonsOnly and not-ready taints; HelmChart has
                # no other field that places the Job. Without it the Job may run on any
                # untainted agent of the cluster.
                "bootstrap": True,
                "valuesContent": yaml.safe_dump(values, sort_keys=False),
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
