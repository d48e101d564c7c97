"""The pack's registry: ``build_policies`` lists every rule, with its name, description,
enforcement level and config schema, from this one place.

The rules are pure validate functions over wire-format (camelCase) inputs, with the
pulumi-policy signature ``(args, report_violation)``, kept by concern: ``network``,
``vm_baseline``, ``join_script``, ``kubernetes_objects``, ``cost_allocation``. The real pack
(``__main__.py``) and the offline check (``policies.offline.check_resources``) run the very
same functions, built here. ``Clock`` and ``utc_now`` (from ``policies.common``) are
re-exported for them.
"""

from __future__ import annotations

from collections.abc import Callable

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policies import config as cfg
from policies.common import Clock, utc_now
from policies.cost_allocation import cost_allocation_tags
from policies.join_script import k3s_checksum_pinned, pool_labels_and_taint
from policies.kubernetes_objects import (
    daemonset_image_digest,
    gpu_workload_requests,
    make_bootstrap_token_rule,
)
from policies.network import no_public_ingress
from policies.vm_baseline import (
    aws_imdsv2,
    gpus_per_pool,
    no_cloud_credential,
    no_ssh_key,
    vm_type_x86_64,
    vms_per_pool,
)

__all__ = ["Clock", "build_policies", "utc_now"]

_DESCRIPTIONS: dict[str, str] = {
    cfg.NO_PUBLIC_INGRESS: "No ingress to pool VMs except TCP 80 from Cloudflare's ranges.",
    cfg.NO_SSH_KEY: "No SSH key, key pair or password login on pool VMs.",
    cfg.NO_CLOUD_CREDENTIAL: "No cloud credential (instance profile, service account, "
    "managed identity) on pool VMs.",
    cfg.AWS_IMDSV2: "AWS pool VMs require IMDSv2 tokens with a hop limit of 1.",
    cfg.VM_TYPE_X86_64: "Pool VM types are x86_64 types from the catalog.",
    cfg.DAEMONSET_IMAGE_DIGEST: "DaemonSet images are pinned by digest.",
    cfg.K3S_CHECKSUM_PINNED: "User data verifies the k3s binary against a pinned SHA-256.",
    cfg.POOL_LABELS_AND_TAINT: "Pool VMs carry the anycloud.sh tags, node labels and pool taint.",
    cfg.GPU_WORKLOAD_REQUESTS: "Work on a GPU pool requests whole GPUs under the nvidia runtime; "
    "work on a CPU pool requests none.",
    cfg.BOOTSTRAP_TOKEN: "Bootstrap tokens expire within the maximum TTL and are stored as "
    "secrets.",
    cfg.COST_ALLOCATION_TAGS: "Every billable resource of a pool carries anycloud.sh/cluster and "
    "anycloud.sh/node-pool, so its cost is attributed to the pool.",
    cfg.VM_COUNT_GUARDRAIL: "Advisory: VMs per pool stay under the configured threshold.",
    cfg.GPU_COUNT_GUARDRAIL: "Advisory: GPUs per pool stay under the configured threshold.",
}


def build_policies(clock: Clock = utc_now) -> list[Policy]:
    """Every policy of the pack, with its default enforcement level and config schema."""
    resource_rules: dict[str, Callable[[ResourceValidationArgs, ReportViolation], None]] = {
        cfg.NO_PUBLIC_INGRESS: no_public_ingress,
        cfg.NO_SSH_KEY: no_ssh_key,
        cfg.NO_CLOUD_CREDENTIAL: no_cloud_credential,
        cfg.AWS_IMDSV2: aws_imdsv2,
        cfg.VM_TYPE_X86_64: vm_type_x86_64,
        cfg.DAEMONSET_IMAGE_DIGEST: daemonset_image_digest,
        cfg.K3S_CHECKSUM_PINNED: k3s_checksum_pinned,
        cfg.POOL_LABELS_AND_TAINT: pool_labels_and_taint,
        cfg.GPU_WORKLOAD_REQUESTS: gpu_workload_requests,
        cfg.BOOTSTRAP_TOKEN: make_bootstrap_token_rule(clock),
        cfg.COST_ALLOCATION_TAGS: cost_allocation_tags,
    }
    stack_rules: dict[str, Callable[[StackValidationArgs, ReportViolation], None]] = {
        cfg.VM_COUNT_GUARDRAIL: vms_per_pool,
        cfg.GPU_COUNT_GUARDRAIL: gpus_per_pool,
    }

    def schema(name: str) -> PolicyConfigSchema | None:
        props = cfg.CONFIG_SCHEMAS.get(name)
        return PolicyConfigSchema(properties=props) if props else None

    def level(name: str) -> EnforcementLevel:
        return EnforcementLevel(cfg.DEFAULT_LEVELS[name])

    policies: list[Policy] = [
        ResourceValidationPolicy(
            name=name,
            description=_DESCRIPTIONS[name],
            validate=rule,
            enforcement_level=level(name),
            config_schema=schema(name),
        )
        for name, rule in resource_rules.items()
    ]
    policies += [
        StackValidationPolicy(
            name=name,
            description=_DESCRIPTIONS[name],
            validate=rule,
            enforcement_level=level(name),
            config_schema=schema(name),
        )
        for name, rule in stack_rules.items()
    ]
    return policies
