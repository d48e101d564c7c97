"""BootstrapToken: one short-lived, join-only token per attempt, secret, replaced on retry."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from automation.engine.mock.program import run_program
from stacks.config import AttemptSpec
from stacks.node_pool import build_program

SECRET_T = "kubernetes:core/v1:Secret"
PROVIDERS = ("aws", "gcp", "azure")


def _tokens(run: Any) -> list[Any]:
    return [r for r in run.of_type(SECRET_T) if r.parent and "BootstrapToken" in r.parent]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_token_per_attempt_that_needs_one(h: Any, provider: str) -> None:
    run = h.run_pool(provider)
    (token,) = _tokens(run)
    assert token.inputs["stringData"]["description"].endswith("attempt at-0001")
    assert token.inputs["metadata"]["labels"]["anycloud.sh/attempt"] == "at-0001"


def test_token_secret_is_join_only_and_expires(h: Any) -> None:
    (token,) = _tokens(h.run_pool("aws"))
    data = token.inputs["stringData"]
    assert token.inputs["type"] == "bootstrap.kubernetes.io/token"
    assert token.inputs["metadata"]["namespace"] == "kube-system"
    assert re.fullmatch(r"[a-z0-9]{6}", data["token-id"])
    assert re.fullmatch(r"[a-z0-9]{16}", data["token-secret"])
    assert token.inputs["metadata"]["name"] == f"bootstrap-token-{data['token-id']}"
    assert data["usage-bootstrap-authentication"] == "true"
    assert data["usage-bootstrap-signing"] == "false"
    assert data["auth-extra-groups"] == "system:bootstrappers:k3s:default-node-token"
    assert data["expiration"] == "2026-11-30T21:30:00Z"  # issued 21:00 + 30 min default


def test_token_values_are_secret_everywhere(h: Any) -> None:
    run = h.run_pool("aws")
    (token,) = _tokens(run)
    assert "stringData" in token.secret_inputs
    assert {"stringData", "data"} <= set(token.options["additionalSecretOutputs"])
    for rand in run.resources:
        if rand.type.startswith("random:"):
            assert "result" in rand.options["additionalSecretOutputs"]
    # The token never reaches the stack outputs.
    secret = token.inputs["stringData"]["token-secret"]
    assert secret not in json.dumps(run.outputs)


def test_retry_replaces_the_token_instead_of_adding_one(h: Any) -> None:
    def run_gen(gen: int) -> Any:
        cfg = h.pool_config(
            "aws",
            attempts=(AttemptSpec(id="at-0001", token_generation=gen, token_issued_at=h.ISSUED),),
        )
        return run_program(build_program(cfg), reveal_secrets=True)

    first, again, retried = run_gen(0), run_gen(0), run_gen(1)
    (t0,), (t0b,), (t1,) = _tokens(first), _tokens(again), _tokens(retried)
    # Same logical resource (one per attempt) ...
    assert t0.urn == t1.urn
    # ... stable across runs of the same generation, a new value after a retry.
    assert t0.inputs["stringData"]["token-id"] == t0b.inputs["stringData"]["token-id"]
    assert t0.inputs["stringData"]["token-id"] != t1.inputs["stringData"]["token-id"]
    # The old Secret is deleted before the new one is created.
    assert t1.options["deleteBeforeReplace"] is True
    assert "metadata.name" in t1.options["replaceOnChanges"]
    rand = [r for r in retried.resources if r.type.startswith("random:")]
    assert rand and all(
        r.inputs["keepers"] == {"attempt": "at-0001", "generation": "1"} for r in rand
    )


def test_user_data_carries_this_attempts_token(h: Any) -> None:
    run = h.run_pool("aws")
    (token,) = _tokens(run)
    data = token.inputs["stringData"]
    vm = next(v for v in run.of_type(h.VM_TYPES["aws"]) if "at-0001" in v.name)
    assert f"K10{h.CA}::{data['token-id']}.{data['token-secret']}" in h.user_data_of(vm)
    other = next(v for v in run.of_type(h.VM_TYPES["aws"]) if "at-0002" in v.name)
    assert data["token-secret"] not in h.user_data_of(other)


def test_token_written_through_the_cluster_provider(h: Any) -> None:
    run = h.run_pool("aws")
    (token,) = _tokens(run)
    assert token.provider is not None and "pulumi:providers:kubernetes::cluster" in token.provider
    provider = run.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "/etc/anycloud/kubeconfig"
    assert provider.inputs["context"] == "anycloud"
