"""From ledger records to stack targets: the typed config each stack program takes, for the
services (plan, preview) and the reconciler (up, destroy) alike."""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from automation.app import App
from automation.engine.runner import Expected, StackKind, StackTarget
from automation.errors import NotFound
from automation.ledger import schema
from automation.ledger.records import by_ref, could_name
from automation.models import LIVE_POOL_STATES
from automation.sealing import owner

if TYPE_CHECKING:
    from automation.catalog.store import VmType

DEFAULT_TOKEN_TTL_MINUTES = 30
LIVE_ATTEMPTS = ("pending", "creating", "running")


def token_ttl_minutes() -> int:
    return int(os.environ.get("ANYCLOUD_TOKEN_TTL_MINUTES", DEFAULT_TOKEN_TTL_MINUTES))


def cluster_ref(cluster: Any) -> Any:
    from stacks.config import ClusterRef

    return ClusterRef(
        id=cluster["id"], server_url=cluster["server_url"], ca_sha256=cluster["ca_sha256"] or "",
        kubeconfig_path=cluster["kubeconfig_path"], kube_context=cluster["kube_context"],
    )


def _pool_row(conn: Any, ref: str) -> Any:
    """A pool by id (any state) or by the name of a live one; NotFound otherwise."""
    pools = schema.node_pools
    if not could_name(ref):
        raise NotFound("node pool", ref, field="node_pool")
    live_by_name = sa.and_(by_ref(pools, ref), pools.c.state.in_(list(LIVE_POOL_STATES)))
    pool = conn.execute(sa.select(pools).where(sa.or_(pools.c.id == ref, live_by_name))
                        ).mappings().first()
    if pool is None:
        raise NotFound("node pool", ref, field="node_pool")
    return pool


def pool_target(app: App, ref: str, *, planned: bool = True,
                unreleased: bool = False) -> StackTarget:
    """The pool's stack as the ledger says it should be. A pool with no attempts yet is
    planned (``planned=True``) with the attempts it would create. ``unreleased``: the
    attempts being released too, whose VMs may still exist: what ``adopt`` looks up, so
    that the next ``up`` (without them) deletes what it found."""
    from stacks.config import AttemptSpec, CloudCredentialRef, NodePoolStackConfig

    with app.ledger.read() as conn:
        pool = _pool_row(conn, ref)
        cluster = conn.execute(sa.select(schema.clusters).where(
            schema.clusters.c.id == pool["cluster_id"])).mappings().one()
        cred = conn.execute(sa.select(schema.credentials).where(
            schema.credentials.c.id == pool["credential_id"])).mappings().one()
        attempts = conn.execute(
            sa.select(schema.vm_attempts).where(
                schema.vm_attempts.c.pool_id == pool["id"],
                schema.vm_attempts.c.state.in_(
                    (*LIVE_ATTEMPTS, "releasing") if unreleased else LIVE_ATTEMPTS),
            ).order_by(schema.vm_attempts.c.id)
        ).mappings().all()
        releasing = conn.execute(sa.select(sa.func.count()).where(
            schema.vm_attempts.c.pool_id == pool["id"],
            schema.vm_attempts.c.state == "releasing")).scalar_one()
        sealed = conn.execute(sa.select(schema.sealed_secrets.c.sealed).where(
            schema.sealed_secrets.c.owner == owner("credential", cred["id"]))
        ).scalar_one_or_none()
    vm = app.catalog.providers[pool["provider"]].vm_type(pool["vm_type"])
    specs = tuple(
        AttemptSpec(id=a["id"], needs_token=a["token_removed_at"] is None,
                    token_generation=a["token_generation"], token_issued_at=a["token_issued_at"],
                    image=a["image"] or None)
        for a in attempts
    )
    if not specs and planned:
        specs = tuple(AttemptSpec(id=f"at-planned-{i + 1}") for i in range(pool["max_vms"]))
    reference = {k: v for k, v in dict(cred["reference"]).items() if k != "client_secret_env"}
    env = secret_env(app, cred, sealed)
    config = NodePoolStackConfig(
        pool_id=pool["id"], pool_name=pool["name"],
        cluster=cluster_ref(app.with_kubeconfig(cluster)),
        credential=CloudCredentialRef(provider=pool["provider"], secret_env=tuple(sorted(env)),
                                      **reference),
        provider=pool["provider"], region=pool["region"], zone=pool["zone"],
        vm_type=pool["vm_type"], gpu_count=vm.gpus if vm else 0,
        gpu_model=vm.gpu_model if vm else None, attempts=specs,
        hosts_service=bool(pool["hosts_service"]), token_ttl_minutes=token_ttl_minutes(),
    )
    # What the engine's state must hold (``automation.engine.expectation``): the VMs the
    # stack reported running, and anything at all while VMs are live or being released.
    running = tuple(a["id"] for a in attempts if a["state"] == "running")
    expect = Expected(applied=pool["applied_digest"] is not None and bool(running or releasing),
                      attempts=running,
                      started=tuple(a["id"] for a in attempts if a["state"] == "creating"))
    return StackTarget(kind=StackKind.NODE_POOL, key=pool["id"], config=config,
                       policy_config=refreshed_type_policy(pool["id"], pool["provider"], vm),
                       expect=expect, secret_env=env)


def secret_env(app: App, cred: Any, sealed: bytes | None) -> dict[str, str]:
    """The environment a stack operation's engine gets the credential's sealed secret in
    (``sealed``: its row's blob; None for a reference, whose secret the engine finds where
    it points: then empty).

    Each is a variable the provider plugin reads itself, so the secret is never a stack
    input, never in the program and never in Pulumi's state: aws AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (a role in the reference is then assumed with
    them); gcp GOOGLE_CREDENTIALS (a key's JSON, which the provider takes there as readily as
    a path); azure ARM_CLIENT_SECRET (azure-native's variable for ``clientSecret``); another
    provider the variable its reference names (``api_key_env``).
    """
    import json

    from automation.sealing import SealingKeyMissing

    if sealed is None:
        return {}
    if app.sealing is None:
        raise SealingKeyMissing(f"a stack operation with credential {cred['name']!r}")
    plain = json.loads(app.sealing.open(sealed, owner("credential", cred["id"])))
    provider = cred["provider"]
    if provider == "aws":
        env = {"AWS_ACCESS_KEY_ID": plain["access_key_id"],
               "AWS_SECRET_ACCESS_KEY": plain["secret_access_key"]}
        if plain.get("session_token"):
            env["AWS_SESSION_TOKEN"] = plain["session_token"]
        return env
    if provider == "gcp":
        return {"GOOGLE_CREDENTIALS": plain["service_account_json"]}
    if provider == "azure":
        return {"ARM_CLIENT_SECRET": plain["client_secret"]}
    return {cred["reference"]["api_key_env"]: plain["api_key"]}


def refreshed_type_policy(pool_id: str, provider: str, vm: VmType | None) -> dict[str, Any] | None:
    """Policy config for a VM type only a live catalog refresh knows: the pack reads the
    shipped catalog, so it is told of the type (x86_64 only: arm64 stays refused) and of its
    GPUs. None when the shipped catalog has the type."""
    from automation.catalog.store import load_catalog
    from policies import config as policy

    if vm is None or load_catalog().providers[provider].vm_type(vm.name) is not None:
        return None
    config: dict[str, Any] = {}
    if vm.arch == "x86_64":
        config[policy.VM_TYPE_X86_64] = {"extraVmTypes": {provider: [vm.name]}}
    if vm.gpus:
        config[policy.GPU_COUNT_GUARDRAIL] = {"gpuPools": {pool_id: vm.gpus}}
    return config or None


def image_warnings(provider: str, gpus: int) -> list[str]:
    """What to warn about the image a pool's VMs would boot: its pin in data/images.toml
    was not checked first-hand (``verified = false``). Empty for a verified pin."""
    if provider not in ("aws", "gcp", "azure"):
        return []
    from stacks.pins import load_pins

    pin = load_pins().images.for_vm(provider, gpus > 0)
    if pin.verified:
        return []
    kind = "GPU" if gpus > 0 else "CPU"
    return [f"the {provider} {kind} image {pin.label} is not verified first-hand "
            "(data/images.toml: verified = false): check that it exists and boots before "
            "relying on the pool"]


def pool_warnings(app: App, ref: str) -> list[str]:
    """Warnings about a pool as the ledger has it (``node-pool create`` and ``plan``)."""
    with app.ledger.read() as conn:
        pool = _pool_row(conn, ref)
    provider = app.catalog.providers.get(pool["provider"])
    vm = provider.vm_type(pool["vm_type"]) if provider else None
    return image_warnings(pool.provider, vm.gpus if vm else 0)


def live_pool_ids(app: App) -> list[str]:
    pools = schema.node_pools
    with app.ledger.read() as conn:
        return list(conn.execute(
            sa.select(pools.c.id).where(pools.c.state.in_(list(LIVE_POOL_STATES)))
            .order_by(pools.c.id)
        ).scalars())


def addons_target(cluster_row: Any, *, adopt_from: Collection[str] = (),
                  manage_runtime_class: bool = True) -> StackTarget:
    """The cluster's NVIDIA add-on stack."""
    from stacks.config import ClusterAddonsStackConfig

    config = ClusterAddonsStackConfig(
        cluster=cluster_ref(cluster_row), adopt_from_cluster_ids=tuple(sorted(adopt_from)),
        manage_runtime_class=manage_runtime_class,
    )
    return StackTarget(kind=StackKind.CLUSTER_ADDONS, key=str(cluster_row["id"]), config=config)


def release_target(cluster_row: Any, pool_id: str) -> StackTarget:
    """A Service pool's ingress release stack (its Traefik HelmChart)."""
    from stacks.config import IngressReleaseStackConfig

    config = IngressReleaseStackConfig(cluster=cluster_ref(cluster_row), pool_id=pool_id)
    return StackTarget(kind=StackKind.INGRESS_RELEASE, key=pool_id, config=config)


def pool_release_target(app: App, ref: str) -> StackTarget | None:
    """The ingress release stack of the pool ``ref``, or None when it hosts no Service."""
    with app.ledger.read() as conn:
        pool = _pool_row(conn, ref)
        if not pool["hosts_service"]:
            return None
        cluster = conn.execute(sa.select(schema.clusters).where(
            schema.clusters.c.id == pool["cluster_id"])).mappings().one()
    return release_target(app.with_kubeconfig(cluster), pool["id"])


def gpu_cluster_rows(app: App) -> list[Any]:
    """Clusters with at least one live GPU pool: the only ones whose add-on stack matters."""
    pools = schema.node_pools
    with app.ledger.read() as conn:
        rows = conn.execute(
            sa.select(pools.c.cluster_id, pools.c.provider, pools.c.vm_type)
            .where(pools.c.state.in_(list(LIVE_POOL_STATES)))
        ).all()
        gpu_clusters = sorted({
            r.cluster_id for r in rows
            if (vm := app.catalog.providers[r.provider].vm_type(r.vm_type)) and vm.gpus
        })
        return list(conn.execute(sa.select(schema.clusters).where(
            schema.clusters.c.id.in_(gpu_clusters)).order_by(schema.clusters.c.id)).mappings())
