"""BootstrapToken: a per-VM, short-lived Kubernetes bootstrap token usable only to join.

The Secret ``kube-system/bootstrap-token-<id>`` (type ``bootstrap.kubernetes.io/token``)
authenticates as ``system:bootstrappers:k3s:default-node-token`` -- the group ``k3s token
create`` uses for agent joins (docs.k3s.io/cli/token) -- and may not sign ConfigMaps.

Id and secret come from ``pulumi_random`` rather than ``secrets``: a value drawn in the
program would change on every ``up``; a RandomString is drawn once (crypto/rand in the
provider), kept in state as a secret, and redrawn only when its keepers change. Keepers are
the attempt id and the token generation, so a retried attempt (generation + 1) gets a new
token; and because the Pulumi resource name is per attempt, the Secret is *replaced* (old one
deleted first), never added beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components import naming
from components.join_script import k3s_secure_token

K3S_NODE_GROUP = "system:bootstrappers:k3s:default-node-token"
SECRET_TYPE = "bootstrap.kubernetes.io/token"
NAMESPACE = "kube-system"
TOKEN_ID_LEN = 6
TOKEN_SECRET_LEN = 16


@dataclass(frozen=True)
class TokenSpec:
    cluster_id: str
    pool_id: str
    attempt_id: str
    ca_sha256: str
    generation: int = 0
    ttl_minutes: int = 30
    # When the control plane issued this generation. Expiration = issued_at + ttl, so it is
    # stable across runs. Without it, the first run's clock is used and later drift ignored.
    issued_at: datetime | None = None


def expiration(spec: TokenSpec, now: datetime | None = None) -> str:
    start = spec.issued_at or now or datetime.now(UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return (
        (start + timedelta(minutes=spec.ttl_minutes)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


class BootstrapToken(pulumi.ComponentResource):
    token_id: pulumi.Output[str]
    token_secret: pulumi.Output[str]
    # K10<ca>::<id>.<secret>, what the agent's config.yaml carries. Always secret.
    join_token: pulumi.Output[str]
    secret_name: pulumi.Output[str]

    def __init__(
        self, name: str, spec: TokenSpec, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("anycloud:cluster:BootstrapToken", name, None, opts)
        keepers = {"attempt": spec.attempt_id, "generation": str(spec.generation)}
        # One draw gives both halves ([a-z0-9] only, the bootstrap-token alphabet):
        # 6 characters of id, then 16 of secret. One resource per token keeps big pools cheap.
        drawn = random.RandomString(
            f"{name}-random",
            length=TOKEN_ID_LEN + TOKEN_SECRET_LEN,
            special=False,
            upper=False,
            lower=True,
            numeric=True,
            keepers=keepers,
            opts=pulumi.ResourceOptions(parent=self, additional_secret_outputs=["result"]),
        )
        value: pulumi.Output[str] = pulumi.Output.secret(drawn.result)
        tid: pulumi.Output[str] = value.apply(lambda v: v[:TOKEN_ID_LEN])
        tsecret: pulumi.Output[str] = value.apply(lambda v: v[TOKEN_ID_LEN:])

        labels = {
            naming.MANAGED_BY: naming.MANAGER,
            **naming.ownership_tags(
                cluster_id=spec.cluster_id, pool_id=spec.pool_id, attempt_id=spec.attempt_id
            ),
        }
        pulumi_opts = pulumi.ResourceOptions(
            parent=self,
            # Replace, never add: the old token is gone before the new one exists.
            delete_before_replace=True,
            replace_on_changes=["metadata.name", "stringData"],
            additional_secret_outputs=["data", "stringData", "metadata"],
            ignore_changes=[] if spec.issued_at else ["stringData.expiration"],
        )
        secret = k8s.core.v1.Secret(
            f"{name}-k8s-secret",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=tid.apply(lambda i: f"bootstrap-token-{i}"),
                namespace=NAMESPACE,
                labels=labels,
            ),
            type=SECRET_TYPE,
            string_data={
                "description": f"anycloud join token for attempt {spec.attempt_id}",
                "token-id": tid,
                "token-secret": tsecret,
                "expiration": expiration(spec),
                "usage-bootstrap-authentication": "true",
                "usage-bootstrap-signing": "false",
                "auth-extra-groups": K3S_NODE_GROUP,
            },
            opts=pulumi_opts,
        )

        self.token_id = tid
        self.token_secret = tsecret
        self.secret_name = secret.metadata.apply(lambda m: m.name or "")
        self.join_token = pulumi.Output.secret(
            pulumi.Output.all(tid, tsecret).apply(
                lambda parts: k3s_secure_token(spec.ca_sha256, parts[0], parts[1])
            )
        )
        # Nothing secret in the component's outputs.
        self.register_outputs({})
