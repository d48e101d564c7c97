"""Rules 6, 9 and 10: DaemonSet digests, GPU requests of pool workloads, bootstrap tokens."""

from __future__ import annotations

import base64
from datetime import timedelta
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import PolicyConfigError, check_resources
from policies import config as cfg
from policies.kubernetes_objects import (
    effective_gpu_request,
    gpu_workload_requests,
    make_bootstrap_token_rule,
)

DS = "kubernetes:apps/v1:DaemonSet"
DEPLOY = "kubernetes:apps/v1:Deployment"
CRONJOB = "kubernetes:batch/v1:CronJob"
POD = "kubernetes:core/v1:Pod"
SECRET = "kubernetes:core/v1:Secret"
DIGEST = "@sha256:" + "ab" * 32
GPU = cfg.GPU_WORKLOAD_REQUESTS
GPU_CONFIG = {GPU: {"gpuPools": {"gpu-pool": 4}}}
NO_FIXTURE_CHECK = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# --- 6. DaemonSet images -----------------------------------------------------------------------


def daemonset(images: list[str], init: list[str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "anycloud-nvidia-device-plugin", "namespace": "kube-system"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": f"c{i}", "image": img} for i, img in enumerate(images)],
                    "initContainers": [
                        {"name": f"i{i}", "image": img} for i, img in enumerate(init or [])
                    ],
                }
            }
        },
    }


def test_daemonset_pinned_by_digest_passes(s: SimpleNamespace) -> None:
    ds = daemonset([f"nvcr.io/nvidia/k8s-device-plugin:v0.17.0{DIGEST}"], [f"busybox{DIGEST}"])
    assert s.check(cfg.DAEMONSET_IMAGE_DIGEST, DS, ds) == []


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
        "nvcr.io/nvidia/k8s-device-plugin@sha256:abc",
        "nvcr.io/nvidia/k8s-device-plugin@sha256:" + "AB" * 32,  # digests are lower-case hex
        "img@sha512:" + "ab" * 64,
    ],
)
def test_daemonset_unpinned_image(s: SimpleNamespace, image: str) -> None:
    found = s.check(cfg.DAEMONSET_IMAGE_DIGEST, DS, daemonset([image]))
    assert len(found) == 1 and f"containers[0].image={image!r}" in found[0].message
    init = s.check(cfg.DAEMONSET_IMAGE_DIGEST, DS, daemonset([f"x{DIGEST}"], [image]))
    assert len(init) == 1 and "initContainers[0]" in init[0].message


def test_digest_rule_only_covers_daemonsets(s: SimpleNamespace) -> None:
    deploy = daemonset(["nginx:latest"])
    assert s.check(cfg.DAEMONSET_IMAGE_DIGEST, DEPLOY, deploy) == []


# --- 9. GPU workloads --------------------------------------------------------------------------


def container(gpus: Any = None, request: Any = None, name: str = "c") -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus is not None:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    if request is not None:
        resources["requests"] = {"nvidia.com/gpu": request}
    return {"name": name, "image": "x", "resources": resources}


def pod_spec(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    pool: str | None = "gpu-pool",
    runtime: str | None = "nvidia",
    affinity: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers, "initContainers": init or []}
    if runtime:
        spec["runtimeClassName"] = runtime
    if pool and not affinity:
        spec["nodeSelector"] = {"anycloud.sh/node-pool": pool}
    if pool and affinity:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "anycloud.sh/node-pool",
                                    "operator": "In",
                                    "values": [pool],
                                },
                            ]
                        }
                    ],
                }
            }
        }
    spec["tolerations"] = [{"key": "anycloud.sh/node-pool", "value": pool, "effect": "NoSchedule"}]
    return spec


def deployment(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"replicas": 1, "template": {"spec": spec}}}


def test_gpu_pool_whole_gpus_under_nvidia_pass(s: SimpleNamespace) -> None:
    assert (
        s.check(GPU, DEPLOY, deployment(pod_spec([container(1), container("2")])), GPU_CONFIG) == []
    )
    assert s.check(GPU, POD, {"spec": pod_spec([container(4)], affinity=True)}, GPU_CONFIG) == []
    cron = {
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": {"spec": pod_spec([container(1, request=1)])}}},
        }
    }
    assert s.check(GPU, CRONJOB, cron, GPU_CONFIG) == []


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        (pod_spec([container()]), "request=0 must be a whole number from 1 to 4"),
        (pod_spec([container(3), container(2)]), "request=5 must be"),
        (pod_spec([container(1)], init=[container(5)]), "request=5 must be"),
        (pod_spec([container("500m")]), "is not whole"),
        (pod_spec([container(1, request=2)]), "differs from limits=1"),
        (pod_spec([container("lots")]), "'lots' is not a quantity"),
        (pod_spec([container(1)], runtime=None), "runtimeClassName=None must be 'nvidia'"),
        (pod_spec([container(1)], runtime="runc"), "runtimeClassName='runc'"),
    ],
)
def test_gpu_pool_violations(s: SimpleNamespace, spec: dict[str, Any], expect: str) -> None:
    messages = [v.message for v in s.check(GPU, DEPLOY, deployment(spec), GPU_CONFIG)]
    assert any(expect in m for m in messages), messages


def test_init_container_bigger_than_sum_sets_the_request(s: SimpleNamespace) -> None:
    spec = pod_spec([container(1), container(1)], init=[container(3)])
    assert s.check(GPU, DEPLOY, deployment(spec), GPU_CONFIG) == []  # max(3, 2) = 3 <= 4


def test_cpu_pool_requests_no_gpu(s: SimpleNamespace) -> None:
    spec = pod_spec([container(1)], pool="cpu-pool", runtime=None)
    found = s.check(GPU, DEPLOY, deployment(spec), GPU_CONFIG)
    assert len(found) == 1 and "'cpu-pool' is a CPU pool" in found[0].message
    none = pod_spec([container()], pool="cpu-pool", runtime=None)
    assert s.check(GPU, DEPLOY, deployment(none), GPU_CONFIG) == []


def test_workloads_not_targeting_a_pool_are_ignored(s: SimpleNamespace) -> None:
    spec = pod_spec([container(7)], pool=None)
    assert s.check(GPU, DEPLOY, deployment(spec), GPU_CONFIG) == []


def test_gpu_pools_config_is_validated(s: SimpleNamespace) -> None:
    spec = deployment(pod_spec([container(1)]))
    with pytest.raises(PolicyConfigError, match=r"gpuPools\.gpu-pool"):
        s.check(GPU, DEPLOY, spec, {GPU: {"gpuPools": {"gpu-pool": 0}}})


containers_st = st.lists(st.integers(min_value=0, max_value=6), max_size=4)


@NO_FIXTURE_CHECK
@given(init=containers_st, regular=containers_st, per_node=st.integers(1, 8))
def test_gpu_verdict_matches_the_scheduler_formula(
    s: SimpleNamespace, init: list[int], regular: list[int], per_node: int
) -> None:
    spec = pod_spec(
        [container(n or None) for n in regular] or [container()],
        init=[container(n or None) for n in init],
    )
    config = {"gpuPools": {"gpu-pool": per_node}}
    messages = s.run_rule(gpu_workload_requests, s.engine_args(DEPLOY, deployment(spec), config))
    expected = max(max(init, default=0), sum(regular))
    assert (messages == []) is (1 <= expected <= per_node), (expected, messages)


@NO_FIXTURE_CHECK
@given(
    init=st.lists(st.fractions(min_value=0, max_value=8), max_size=4),
    regular=st.lists(st.fractions(min_value=0, max_value=8), max_size=4),
)
def test_effective_request_bounds(init: list[Fraction], regular: list[Fraction]) -> None:
    total = effective_gpu_request(init, regular)
    assert total >= sum(regular) and all(total >= i for i in init)
    assert total in [*init, sum(regular, Fraction(0))]


# --- 10. bootstrap tokens ----------------------------------------------------------------------


def token(expires_in: timedelta | None, now: Any, **over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "token-id": "abcdef",
        "token-secret": "0123456789abcdef",
        "usage-bootstrap-authentication": "true",
    }
    if expires_in is not None:
        data["expiration"] = (now + expires_in).isoformat().replace("+00:00", "Z")
    secret: dict[str, Any] = {
        "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": data,
    }
    secret.update(over)
    return secret


BT = cfg.BOOTSTRAP_TOKEN
SDK_SECRET_OUTPUTS = {"additional_secret_outputs": ["data", "stringData"]}


def test_short_lived_secret_token_passes(s: SimpleNamespace) -> None:
    assert s.check(BT, SECRET, token(timedelta(minutes=30), s.NOW), **SDK_SECRET_OUTPUTS) == []
    # Offline, the mock run's secret_keys say the same.
    assert (
        s.check(BT, SECRET, token(timedelta(minutes=30), s.NOW), secret_keys=["stringData"]) == []
    )


def test_expiration_beyond_max_ttl(s: SimpleNamespace) -> None:
    found = s.check(BT, SECRET, token(timedelta(minutes=61), s.NOW), **SDK_SECRET_OUTPUTS)
    assert len(found) == 1 and "is later than now + 60 min" in found[0].message
    config = {BT: {"maxTokenTtlMinutes": 120}}
    assert (
        s.check(BT, SECRET, token(timedelta(minutes=61), s.NOW), config, **SDK_SECRET_OUTPUTS) == []
    )


def test_clock_is_injected(s: SimpleNamespace) -> None:
    rule = make_bootstrap_token_rule(lambda: s.NOW + timedelta(hours=5))
    args = s.engine_args(SECRET, token(timedelta(hours=5), s.NOW), secret_outputs=["stringData"])
    assert s.run_rule(rule, args) == []
    late = make_bootstrap_token_rule(lambda: s.NOW)
    assert len(s.run_rule(late, args)) == 1


def test_missing_or_bad_expiration(s: SimpleNamespace) -> None:
    found = s.check(BT, SECRET, token(None, s.NOW), **SDK_SECRET_OUTPUTS)
    assert len(found) == 1 and "stringData.expiration is missing" in found[0].message
    bad = token(None, s.NOW)
    bad["stringData"]["expiration"] = "tomorrow"
    assert (
        "'tomorrow' is not an RFC3339" in s.check(BT, SECRET, bad, **SDK_SECRET_OUTPUTS)[0].message
    )
    naive = token(None, s.NOW)
    naive["stringData"]["expiration"] = "2026-11-30T21:10:00"
    assert "no time zone" in s.check(BT, SECRET, naive, **SDK_SECRET_OUTPUTS)[0].message


def test_data_expiration_is_base64(s: SimpleNamespace) -> None:
    later = (s.NOW + timedelta(days=2)).isoformat()
    encoded = {"token-id": "YWJj", "expiration": base64.b64encode(later.encode()).decode()}
    secret = token(None, s.NOW, data=encoded)
    del secret["stringData"]
    found = s.check(BT, SECRET, secret, additional_secret_outputs=["data"])
    assert len(found) == 1 and "data.expiration=" in found[0].message


def test_token_must_be_stored_as_secret(s: SimpleNamespace) -> None:
    found = s.check(BT, SECRET, token(timedelta(minutes=5), s.NOW))
    assert len(found) == 1 and "stringData" in found[0].message and "not secret" in found[0].message
    assert "0123456789abcdef" not in found[0].message  # the token secret is never echoed
    # Per-key secret paths (offline): every key must be covered.
    partial = s.check(
        BT, SECRET, token(timedelta(minutes=5), s.NOW), secret_keys=["stringData.token-secret"]
    )
    assert len(partial) == 1 and "'token-id'" in partial[0].message


def test_redacted_token_offline(s: SimpleNamespace) -> None:
    secret = token(None, s.NOW, stringData="[secret]")
    found = s.check(BT, SECRET, secret, secret_keys=["stringData"])
    assert [(v.verified, v.enforcement_level) for v in found] == [(False, "advisory")]


def test_other_secrets_are_ignored(s: SimpleNamespace) -> None:
    plain = token(None, s.NOW, type="Opaque")
    assert s.check(BT, SECRET, plain) == []


def test_whole_pack_on_a_workload_stack(s: SimpleNamespace) -> None:
    resources = [
        s.resource(DEPLOY, deployment(pod_spec([container(2)])), name="train"),
        s.resource(
            SECRET,
            token(timedelta(minutes=10), s.NOW),
            name="tok",
            additional_secret_outputs=["stringData"],
        ),
        s.resource(DS, daemonset([f"plugin{DIGEST}"]), name="plugin"),
    ]
    assert check_resources(resources, GPU_CONFIG, clock=lambda: s.NOW) == []


def test_our_addon_daemonsets_are_not_workloads(s: SimpleNamespace) -> None:
    ds = deployment(pod_spec([container()], runtime=None))
    assert len(s.check(GPU, DS, ds, GPU_CONFIG)) == 2  # a user DaemonSet on the GPU pool
    ds["metadata"] = {"labels": {"app.kubernetes.io/managed-by": "anycloud"}}
    assert s.check(GPU, DS, ds, GPU_CONFIG) == []
