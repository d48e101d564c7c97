"""Stack program for one node pool: network (with the port-80 rule once the pool hosts a
Service), one VM + token per attempt. The pool's ingress release is a stack of its own
(``stacks/ingress_release.py``), installed through the cluster add-on mechanism."""

from __future__ import annotations

from collections.abc import Callable

import pulumi

from components import naming
from components.bootstrap_token import BootstrapToken, TokenSpec
from components.join_script import JoinSpec, render
from components.network import NetworkSpec, isolated_network
from components.pins import Pins
from components.vm import VmSpec, pool_vm
from stacks.config import AttemptSpec, NodePoolStackConfig
from stacks.pins import load_pins
from stacks.providers import cloud_provider, kube_provider

CONFIG_KEY = "pool"  # `anycloud:pool`, a JSON object: NodePoolStackConfig


def _user_data(
    config: NodePoolStackConfig, attempt: AttemptSpec, pins: Pins, token: BootstrapToken | None
) -> pulumi.Output[str]:
    spec = JoinSpec(
        provider=config.provider,
        server_url=config.cluster.server_url,
        ca_sha256=config.cluster.ca_sha256,
        cluster_id=config.cluster.id,
        pool_id=config.pool_id,
        attempt_id=attempt.id,
        k3s=pins.k3s,
        accelerator=config.accelerator,
    )
    if token is None:
        # Token already consumed (Node exists); the VM ignores user-data changes.
        return pulumi.Output.secret(render(spec, ""))
    return pulumi.Output.secret(token.join_token.apply(lambda t: render(spec, t)))


def _newest_image(
    config: NodePoolStackConfig, pins: Pins, opts: pulumi.InvokeOutputOptions
) -> pulumi.Output[str] | None:
    """The newest image of the pool's pin, concrete: an AMI id, a GCP image selfLink. None on
    Azure: no function lists an image's versions, a new VM takes ``latest`` and reports the
    version Azure chose (``components.vm.azure``)."""
    wanted = pins.images.for_vm(config.provider, config.gpu_count > 0)
    if config.provider == "aws":
        from components.pins import AwsImage
        from components.vm.aws import find_ami

        assert isinstance(wanted, AwsImage)
        return find_ami(wanted, opts)
    if config.provider == "gcp":
        from components.pins import GcpImage
        from components.vm.gcp import find_image

        assert isinstance(wanted, GcpImage)
        return find_image(wanted, opts)
    return None


def build_program(config: NodePoolStackConfig, pins: Pins | None = None) -> Callable[[], None]:
    """The pool's Pulumi program; run it with the Automation API or the mock engine."""

    def program() -> None:
        p = pins or load_pins()
        cloud = cloud_provider(config)
        kube = kube_provider(config.cluster)
        on_cloud = pulumi.ResourceOptions(providers=[cloud])
        on_cluster = pulumi.ResourceOptions(providers=[kube])

        network = isolated_network(
            config.provider,
            "network",
            NetworkSpec(
                cluster_id=config.cluster.id,
                pool_id=config.pool_id,
                region=config.region,
                zone=config.zone,
                hosts_service=config.hosts_service,
                edge=p.edge,
            ),
            on_cloud,
        )

        # Images are the attempts': the newest one is looked up (once for the pool) only for
        # attempts with none recorded; the others are built from their own.
        newest = None
        if any(a.image is None for a in config.attempts):
            newest = _newest_image(config, p, pulumi.InvokeOutputOptions(provider=cloud))

        attempts: dict[str, dict[str, pulumi.Output[str] | str]] = {}
        for attempt in config.attempts:
            token = None
            if attempt.needs_token:
                token = BootstrapToken(
                    f"token-{attempt.id}",
                    TokenSpec(
                        cluster_id=config.cluster.id,
                        pool_id=config.pool_id,
                        attempt_id=attempt.id,
                        ca_sha256=config.cluster.ca_sha256,
                        generation=attempt.token_generation,
                        ttl_minutes=config.token_ttl_minutes,
                        issued_at=attempt.token_issued_at,
                    ),
                    on_cluster,
                )
            vm = pool_vm(
                config.provider,
                f"vm-{attempt.id}",
                VmSpec(
                    cluster_id=config.cluster.id,
                    pool_id=config.pool_id,
                    attempt_id=attempt.id,
                    vm_type=config.vm_type,
                    region=config.region,
                    zone=config.zone,
                    images=p.images,
                    user_data=_user_data(config, attempt, p, token),
                    gpu_count=config.gpu_count,
                    gpu_model=config.gpu_model,
                    keep_user_data=not attempt.needs_token,
                    created=attempt.image is not None,
                ),
                network,
                on_cloud,
                image=attempt.image or newest,
            )
            attempts[attempt.id] = {
                "vmId": vm.vm_id,
                "publicIp": vm.public_ip,
                "nodeName": naming.node_name(attempt.id),
                # What the reconciler records on the attempt and passes back (AttemptSpec).
                "image": vm.image,
            }

        pulumi.export("networkId", network.network_id)
        pulumi.export("attempts", attempts)

    return program


def program_from_pulumi_config() -> None:
    """Entry for the plain `pulumi` CLI: `pulumi config set --path anycloud:pool ...`."""
    raw = pulumi.Config("anycloud").require_object(CONFIG_KEY)
    build_program(NodePoolStackConfig.model_validate(raw))()
