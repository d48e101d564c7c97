"""Seed 003's GPU work rule as one pure function (automation/kube/gpu_work.py), the rule the
AgentPool operator and the nodepool provisioner both apply."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from automation.errors import InvalidInput
from automation.kube.gpu_work import SEED_RULE, gpu_quantity, place_gpu_work


def _spec(*gpus: Any, init: Any = None, runtime: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [
        {"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": g}}} if g is not None
        else {"name": f"c{i}"} for i, g in enumerate(gpus)]}
    if init is not None:
        spec["initContainers"] = [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": init}}}]
    if runtime is not None:
        spec["runtimeClassName"] = runtime
    return spec


@pytest.mark.parametrize("raw, want", [
    (1, Decimal(1)), ("2", Decimal(2)), ("500m", Decimal("0.5")), ("1000m", Decimal(1)),
    (1.0, Decimal(1)), ("1k", Decimal(1000)), ("x", None), ("1.5.2", None), (True, None)])
def test_quantities(raw: Any, want: Decimal | None) -> None:
    assert gpu_quantity(raw) == want


def test_the_rule_is_the_seeds_words() -> None:
    assert "must request whole nvidia.com/gpu devices" in SEED_RULE
    assert "run under the nvidia RuntimeClass" in SEED_RULE
    assert "work on a CPU node pool must request none" in SEED_RULE


def test_a_gpu_pool_gets_the_runtime_and_selector_and_counts_init_containers_apart() -> None:
    spec = _spec(1, 1, None, init=2)  # effective: max(2, 1 + 1) = 2
    place_gpu_work(spec, gpus=2, pool="gpu", field="f")
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["nodeSelector"] == {"anycloud.sh/accelerator": "nvidia"}
    with pytest.raises(InvalidInput, match="no more than one Node advertises") as err:
        place_gpu_work(_spec(1, 2), gpus=2, pool="gpu", field="f")
    assert (err.value.field, err.value.value) == (
        "f.containers[].resources.limits.nvidia.com/gpu", 3)


@pytest.mark.parametrize("spec, field", [
    (_spec("0.5"), "f.containers[0].resources.limits.nvidia.com/gpu"),
    (_spec(None, "1500m"), "f.containers[1].resources.limits.nvidia.com/gpu"),
    (_spec(1, init="250m"), "f.initContainers[0].resources.limits.nvidia.com/gpu"),
    (_spec(1, runtime="runc"), "f.runtimeClassName"),
    (_spec(None), "f.containers[].resources.limits.nvidia.com/gpu"),
])
def test_a_gpu_pool_refuses(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        place_gpu_work(spec, gpus=8, pool="gpu", field="f")
    assert err.value.field == field


def test_a_cpu_pool_refuses_any_gpu_and_adds_nothing() -> None:
    with pytest.raises(InvalidInput, match="work on a CPU node pool must request none") as err:
        place_gpu_work(_spec(None, 1), gpus=0, pool="cpu", field="f")
    assert (err.value.field, err.value.value) == (
        "f.containers[1].resources.limits.nvidia.com/gpu", 1)
    spec = _spec(None, 0)
    place_gpu_work(spec, gpus=0, pool="cpu", field="f")
    assert "runtimeClassName" not in spec and "nodeSelector" not in spec
