"""Explicit provider resources built from the credential *reference* in the stack config.

No secret ever sits in the config: the GCP key file and the Azure client secret are read
when the stack runs (the GCP provider reads the key file itself, so only its path reaches
the state; the Azure secret is wrapped as a Pulumi secret). A credential the server holds
sealed (``credential.secret_env``) passes neither: the engine's environment carries the
secret and the provider plugin reads it there (``automation.stack_targets.secret_env``).
"""

from __future__ import annotations

import os

import pulumi

from components import naming
from stacks.config import CloudCredentialRef, ClusterRef, NodePoolStackConfig

AZURE_CLIENT_SECRET_ENV = "AZURE_CLIENT_SECRET"


def cloud_provider(config: NodePoolStackConfig) -> pulumi.ProviderResource:
    cred: CloudCredentialRef = config.credential
    if cred.provider != config.provider:
        raise ValueError(
            f"credential is for {cred.provider!r} but the pool is on {config.provider!r}"
        )
    if config.provider == "aws":
        import pulumi_aws as aws

        return aws.Provider(
            "aws",
            region=config.region,
            profile=cred.profile,
            assume_roles=(
                [aws.ProviderAssumeRoleArgs(role_arn=cred.role_arn)] if cred.role_arn else None
            ),
            default_tags=aws.ProviderDefaultTagsArgs(
                tags=naming.ownership_tags(cluster_id=config.cluster.id, pool_id=config.pool_id)
            ),
        )
    if config.provider == "gcp":
        import pulumi_gcp as gcp

        return gcp.Provider(
            "gcp",
            project=cred.project,
            region=config.region,
            credentials=cred.key_file,
        )
    if config.provider == "azure":
        import pulumi_azure_native as azure

        # A sealed credential's secret is in ARM_CLIENT_SECRET, which the provider reads.
        secret = None if cred.secret_env else os.environ.get(AZURE_CLIENT_SECRET_ENV)
        return azure.Provider(
            "azure",
            subscription_id=cred.subscription_id,
            tenant_id=cred.tenant_id,
            client_id=cred.client_id,
            client_secret=pulumi.Output.secret(secret) if secret else None,
            location=config.region,
        )
    raise ValueError(f"unsupported provider {config.provider!r}")


def kube_provider(cluster: ClusterRef) -> pulumi.ProviderResource:
    import pulumi_kubernetes as k8s

    if not cluster.kubeconfig_path:
        # Without it the provider would use whatever cluster $KUBECONFIG points at, and
        # bootstrap tokens could land in the wrong cluster.
        raise ValueError(f"cluster {cluster.id}: kubeconfig_path is required")
    return k8s.Provider(
        "cluster",
        # A path: the provider reads the file when it runs; its content never enters state.
        kubeconfig=cluster.kubeconfig_path,
        context=cluster.kube_context,
    )
