"""The bootstrap token a node-pool stack writes, on a real API server.

The stack program is evaluated under the SDK's mock engine (its cloud plugins cannot run
here); the token Secret it registers is then written to the real control plane exactly as
the kubernetes provider would write it (same type, metadata and stringData), and the real
components decide: the API server authenticates the VM's join token, the bootstrap signer
leaves cluster-info alone (the token may not sign), and the token cleaner deletes the Secret
when it expires.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from automation.devcluster.control_plane import ControlPlane, kubeconfig_document
from automation.engine.mock.program import run_program
from automation.kube.probe import sha256_hex
from stacks.config import AttemptSpec
from stacks.node_pool import build_program
from tests.automation.kube import objects
from tests.automation.kube.objects import wait_for
from tests.components.conftest import pool_config

pytestmark = pytest.mark.kube

SECRET_T = "kubernetes:core/v1:Secret"
TTL = timedelta(minutes=30)  # the default token_ttl_minutes
K3S_GROUP = "system:bootstrappers:k3s:default-node-token"


def token_resources(plane: ControlPlane, expires_in: timedelta) -> tuple[Any, str]:
    """The pool's token Secret and its VM's user data, with the real cluster's CA pinned
    and a token issued so that it expires ``expires_in`` from now."""
    config = pool_config("aws")
    config = config.model_copy(update={
        "cluster": config.cluster.model_copy(update={"ca_sha256": sha256_hex(plane.ca_pem)}),
        "attempts": (AttemptSpec(id="at-real", token_issued_at=datetime.now(UTC) - TTL
                                 + expires_in),),
    })
    run = run_program(build_program(config), reveal_secrets=True)
    (secret,) = [r for r in run.of_type(SECRET_T) if r.parent and "BootstrapToken" in r.parent]
    (vm,) = run.of_type("aws:ec2/instance:Instance")
    return secret, str(vm.inputs["userData"])


def as_object(secret: Any) -> dict[str, Any]:
    inputs = secret.inputs
    return {"apiVersion": "v1", "kind": "Secret", "type": inputs["type"],
            "metadata": inputs["metadata"], "stringData": inputs["stringData"]}


def whoami(plane: ControlPlane, token: str, tmp_path: Path) -> dict[str, Any] | None:
    path = tmp_path / "token.kubeconfig"
    path.write_text(json.dumps(kubeconfig_document(plane.server, plane.pki.ca_cert, token=token)))
    done = plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=path, check=False)
    return json.loads(done.stdout)["status"]["userInfo"] if done.returncode == 0 else None


def test_the_join_token_authenticates_as_a_k3s_node_and_expires(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    secret, user_data = token_resources(control_plane, expires_in=timedelta(seconds=12))
    data = secret.inputs["stringData"]
    token = f"{data['token-id']}.{data['token-secret']}"
    # The VM carries K10<sha256 of the cluster CA>::<id>.<secret>: pinned to this cluster.
    joined = re.search(r"K10([0-9a-f]{64})::([a-z0-9]{6}\.[a-z0-9]{16})", user_data)
    assert joined is not None
    assert joined.group(1) == sha256_hex(control_plane.ca_pem)
    assert joined.group(2) == token

    name = secret.inputs["metadata"]["name"]
    control_plane.apply(as_object(secret))
    try:
        user = wait_for("the token to authenticate", lambda: whoami(control_plane, token,
                                                                     tmp_path), timeout=15)
        assert user["username"] == f"system:bootstrap:{data['token-id']}"
        assert {K3S_GROUP, "system:bootstrappers", "system:authenticated"} <= set(
            user["groups"])
        wait_for("the token cleaner to delete the expired token", lambda: objects.get(
            control_plane, "secret", name, "kube-system") is None, timeout=60)
        wait_for("the API server to refuse it", lambda: whoami(
            control_plane, token, tmp_path) is None, timeout=15)
    finally:
        objects.delete(control_plane, "secret", name, namespace="kube-system")


def test_the_join_token_may_not_sign_cluster_info(control_plane: ControlPlane) -> None:
    """usage-bootstrap-signing is false: the bootstrap signer signs cluster-info with a
    signing token written beside it, never with ours."""
    secret, _ = token_resources(control_plane, expires_in=timedelta(minutes=10))
    ours = secret.inputs["stringData"]["token-id"]
    signing = {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
               "metadata": {"name": "bootstrap-token-sign01", "namespace": "kube-system"},
               "stringData": {"token-id": "sign01", "token-secret": "0123456789abcdef",
                              "usage-bootstrap-signing": "true"}}
    info = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": json.dumps(kubeconfig_document(
                "https://203.0.113.10:6443", control_plane.pki.ca_cert))}}
    control_plane.apply(info, signing, as_object(secret))
    try:
        def signed() -> dict[str, str] | None:
            found = objects.get(control_plane, "configmap", "cluster-info", "kube-public") or {}
            data = found.get("data") or {}
            return data if "jws-kubeconfig-sign01" in data else None

        data = wait_for("the bootstrap signer to sign cluster-info", signed, timeout=30)
        assert f"jws-kubeconfig-{ours}" not in data
    finally:
        objects.delete(control_plane, "secret", secret.inputs["metadata"]["name"],
                       "bootstrap-token-sign01", namespace="kube-system")
        objects.delete(control_plane, "configmap", "cluster-info", namespace="kube-public")


def test_the_reconciler_finds_an_attempts_token_by_its_label(control_plane: ControlPlane) -> None:
    """The token id is drawn by the stack; the reconciler deletes an attempt's token through
    the cluster by the attempt label the stack puts on it, and nothing else."""
    from automation.kube.adapter import KubernetesCluster

    config = pool_config("aws")
    later = datetime.now(UTC)
    config = config.model_copy(update={"attempts": (
        AttemptSpec(id="at-one", token_issued_at=later),
        AttemptSpec(id="at-two", token_issued_at=later))})
    run = run_program(build_program(config), reveal_secrets=True)
    secrets = [r for r in run.of_type(SECRET_T) if r.parent and "BootstrapToken" in r.parent]
    assert len(secrets) == 2
    control_plane.apply(*(as_object(s) for s in secrets))
    names = {s.inputs["metadata"]["labels"]["anycloud.sh/attempt"]: s.inputs["metadata"]["name"]
             for s in secrets}
    kube = KubernetesCluster(control_plane.kubeconfig, timeout_seconds=10)
    try:
        assert kube.delete_attempt_tokens("at-one") == 1
        assert objects.get(control_plane, "secret", names["at-one"], "kube-system") is None
        assert objects.get(control_plane, "secret", names["at-two"], "kube-system") is not None
        assert kube.delete_attempt_tokens("at-one") == 0  # nothing left: nothing deleted
    finally:
        kube.close()
        objects.delete(control_plane, "secret", *names.values(), namespace="kube-system")
