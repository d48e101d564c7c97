"""Worker pod rendering (automation/agentpools/pods.py): labels, owner reference, the
--pool argument, the agent ConfigMap mount, node pool placement (exactly one pool's taint)
and the GPU runtime class; pure, no cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from automation.agentpools.pods import (
    AGENT_POOL_LABEL,
    CONFIG_MOUNT,
    TEMPLATE_HASH_LABEL,
    NodePoolRef,
    config_maps,
    owned_by,
    pod_name,
    render_pod,
    template_hash,
)
from automation.errors import InvalidInput
from tests.automation.agentpools.cases import example

UID = "0b7c6f0e-5a41-4e4b-9d65-3c1a3c2a9f10"


def pool(file: str = "shell-pool.yaml", **spec: Any) -> dict[str, Any]:
    doc = example(file)
    doc["metadata"]["uid"] = UID
    doc["spec"].update(spec)
    return doc


def agent(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def test_labels_owner_and_name() -> None:
    src = pool()
    pod = render_pod(src, suffix=lambda: "abcde")
    meta = pod["metadata"]
    assert meta["name"] == "shell-abcde" and meta["namespace"] == "default"
    digest = meta["labels"].pop(TEMPLATE_HASH_LABEL)
    assert len(digest) == 12 and int(digest, 16) >= 0
    # The template's labels kept (the seed's `kubectl get pods -l group=anycloud-agent`).
    assert meta["labels"] == {"app": "anycloud-agent-shell", "group": "anycloud-agent",
                              "type": "shell", AGENT_POOL_LABEL: "shell",
                              "app.kubernetes.io/managed-by": "anycloud"}
    assert meta["ownerReferences"] == [{
        "apiVersion": "anycloud.sh/v1", "kind": "AgentPool", "name": "shell", "uid": UID,
        "controller": True, "blockOwnerDeletion": True}]
    assert owned_by(pod, UID) and not owned_by(pod, "another-uid")
    assert src == pool(), "the AgentPool object itself is never changed"
    # Two renders, two names.
    assert render_pod(src)["metadata"]["name"] != render_pod(src)["metadata"]["name"]


def own_mount(src: dict[str, Any]) -> dict[str, Any]:
    """The template mounts a ConfigMap of its own at /run/anycloud (as ours once did)."""
    spec = src["spec"]["template"]["spec"]
    spec["containers"][0]["volumeMounts"] = [{"name": "anycloud-config",
                                              "mountPath": "/run/anycloud"}]
    spec["volumes"] = [{"name": "anycloud-config",
                        "configMap": {"name": "anycloud-agent-config"}}]
    return src


def test_template_hash_follows_what_the_pod_is_made_from() -> None:
    src = own_mount(pool(nodePool="np"))
    base = template_hash(render_pod(src, node_pool=NodePoolRef("np_1")))
    assert template_hash(render_pod(src, node_pool=NodePoolRef("np_1"))) == base
    assert template_hash(render_pod(src, node_pool=NodePoolRef("np_2"))) != base
    # The template mounts its own ConfigMap: the operator's is not used, nothing changes.
    assert template_hash(render_pod(src, node_pool=NodePoolRef("np_1"), config_map="other")) == base
    bare = pool()
    assert template_hash(render_pod(bare, config_map="a")) != \
        template_hash(render_pod(bare, config_map="b"))
    src["spec"]["template"]["spec"]["containers"][0]["image"] = "anycloud/agent:2"
    assert template_hash(render_pod(src, node_pool=NodePoolRef("np_1"))) != base
    src = own_mount(pool(nodePool="np"))
    src["spec"]["autoscaler"]["maxReplicas"] = 9  # the bounds are not the template
    assert template_hash(render_pod(src, node_pool=NodePoolRef("np_1"))) == base


def test_long_pool_names_give_dns_label_pod_names() -> None:
    name = pod_name("p" * 63, "abcde")
    assert len(name) <= 63 and name.endswith("-abcde")


def test_the_templates_config_mount_is_kept_and_pool_argument_not_repeated() -> None:
    pod = render_pod(own_mount(pool()))
    c = agent(pod)
    assert c["args"] == ["--pool=shell"]
    mounts = [m for m in c["volumeMounts"] if m["mountPath"] == CONFIG_MOUNT]
    assert mounts == [{"name": "anycloud-config", "mountPath": "/run/anycloud"}]
    assert config_maps(pod) == ["anycloud-agent-config"]
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["ANYCLOUD_AGENT_SLOTS"]["value"] == "1"


def test_missing_pool_argument_and_config_mount_are_added() -> None:
    src = pool()
    spec = src["spec"]["template"]["spec"]
    spec["containers"][0].pop("args")
    src["spec"]["autoscaler"]["defaultSlotsPerAgent"] = 3
    pod = render_pod(src, config_map="team-config")
    c = agent(pod)
    assert c["args"] == ["--pool=shell"]
    assert {"name": "anycloud-config", "mountPath": CONFIG_MOUNT, "readOnly": True} \
        in c["volumeMounts"]
    assert {"name": "anycloud-config", "configMap": {"name": "team-config"}} \
        in pod["spec"]["volumes"]
    assert {e["name"]: e.get("value") for e in c["env"]}["ANYCLOUD_AGENT_SLOTS"] == "3"


def test_pool_argument_naming_another_pool_is_a_template_error() -> None:
    src = pool()
    src["spec"]["template"]["spec"]["containers"][0]["args"] = ["--pool", "gpu-pool"]
    with pytest.raises(InvalidInput) as err:
        render_pod(src)
    assert err.value.field == "spec.template.spec.containers[0].args[0]"
    src["spec"]["template"]["spec"]["containers"][0]["args"] = ["--pool=default/shell"]
    assert agent(render_pod(src))["args"] == ["--pool=default/shell"]


def test_operator_labels_in_the_template_are_refused() -> None:
    src = pool()
    src["spec"]["template"]["metadata"]["labels"][AGENT_POOL_LABEL] = "other"
    with pytest.raises(InvalidInput, match="set by the operator"):
        render_pod(src)


def test_cpu_pool_gets_no_gpu_runtime_and_no_placement() -> None:
    pod = render_pod(pool("cpu-pool.yaml"))
    assert "runtimeClassName" not in pod["spec"]
    assert "nodeSelector" not in pod["spec"] and "tolerations" not in pod["spec"]


def test_a_gpu_template_without_a_node_pool_is_scheduled_as_written() -> None:
    # The seed's GKE pool: its own accelerator selector and toleration, no runtime class.
    src = pool("gpu-pool.yaml")
    spec = src["spec"]["template"]["spec"]
    spec.pop("runtimeClassName", None)
    spec["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
    pod = render_pod(src)
    assert "runtimeClassName" not in pod["spec"]
    assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator":
                                           "nvidia-tesla-a100"}
    assert pod["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_a_gpu_template_on_our_gpu_node_pool_gets_the_nvidia_runtime_and_selector() -> None:
    src = pool("gpu-pool.yaml", nodePool="gpu-a10")
    spec = src["spec"]["template"]["spec"]
    spec.pop("runtimeClassName", None)
    spec.pop("nodeSelector", None)
    pod = render_pod(src, node_pool=NodePoolRef("np_1", gpus=1))
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["spec"]["nodeSelector"] == {"anycloud.sh/node-pool": "np_1",
                                           "anycloud.sh/accelerator": "nvidia"}


def test_a_gpu_request_on_a_cpu_node_pool_is_refused() -> None:
    with pytest.raises(InvalidInput, match="'cpu-big' is a CPU node pool") as err:
        render_pod(pool("gpu-pool.yaml", nodePool="cpu-big"), node_pool=NodePoolRef("np_2"))
    assert err.value.field == ("spec.template.spec.containers[0].resources.limits."
                               "nvidia.com/gpu")
    assert err.value.value == 1
    assert "work on a CPU node pool must request none" in err.value.rule


def _gpu_template(limits: Any, requests: Any = None) -> dict[str, Any]:
    src = pool("gpu-pool.yaml", nodePool="gpu-a10")
    spec = src["spec"]["template"]["spec"]
    spec.pop("runtimeClassName", None)
    spec.pop("nodeSelector", None)
    spec["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": limits},
        "requests": {"nvidia.com/gpu": limits if requests is None else requests}}
    return src


@pytest.mark.parametrize("amount", ["0.5", "500m", 0.5, "1.5", "half"])
def test_a_fractional_gpu_request_on_a_gpu_node_pool_is_refused(amount: Any) -> None:
    with pytest.raises(InvalidInput, match=r"whole nvidia\.com/gpu devices") as err:
        render_pod(_gpu_template(amount), node_pool=NodePoolRef("np_1", gpus=4))
    assert err.value.field.startswith("spec.template.spec.containers[0].resources.")
    assert err.value.value == amount


def test_gpu_requests_must_equal_limits() -> None:
    with pytest.raises(InvalidInput, match="requests == limits") as err:
        render_pod(_gpu_template(2, requests=1), node_pool=NodePoolRef("np_1", gpus=4))
    assert err.value.field == ("spec.template.spec.containers[0].resources.requests."
                               "nvidia.com/gpu")
    src = _gpu_template(1)
    del src["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    with pytest.raises(InvalidInput, match=r"must be set equal to resources\.requests"):
        render_pod(src, node_pool=NodePoolRef("np_1", gpus=4))


def test_more_gpus_than_one_node_advertises_is_refused() -> None:
    with pytest.raises(InvalidInput, match="no more than one Node advertises") as err:
        render_pod(_gpu_template(8), node_pool=NodePoolRef("np_1", gpus=4))
    assert err.value.value == 8
    # The larger of the biggest init container and the regular containers' total counts.
    src = _gpu_template(1)
    src["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "warm", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 2}}}]
    pod = render_pod(src, node_pool=NodePoolRef("np_1", gpus=2))
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    with pytest.raises(InvalidInput, match="no more than one Node advertises") as err:
        render_pod(src, node_pool=NodePoolRef("np_1", gpus=1))
    assert err.value.field == ("spec.template.spec.initContainers[0].resources.limits."
                               "nvidia.com/gpu")


def test_another_runtime_class_on_a_gpu_node_pool_is_refused() -> None:
    src = _gpu_template(1)
    src["spec"]["template"]["spec"]["runtimeClassName"] = "runc"
    with pytest.raises(InvalidInput, match="nvidia RuntimeClass") as err:
        render_pod(src, node_pool=NodePoolRef("np_1", gpus=1))
    assert (err.value.field, err.value.value) == ("spec.template.spec.runtimeClassName", "runc")


def test_work_without_gpus_on_a_gpu_node_pool_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"whole nvidia\.com/gpu devices"):
        render_pod(pool(nodePool="gpu-a10"), node_pool=NodePoolRef("np_1", gpus=1))


def test_a_fractional_gpu_on_a_cpu_node_pool_is_refused() -> None:
    with pytest.raises(InvalidInput):
        render_pod(_gpu_template("500m"), node_pool=NodePoolRef("np_2"))


def test_the_broker_address_is_given_and_no_configmap_is_needed() -> None:
    src = pool("shell-pool.yaml")
    pod = render_pod(src, config_map=None, broker="http://anycloud-broker.anycloud.svc:50051")
    agent = pod["spec"]["containers"][0]
    assert {"name": "ANYCLOUD_BROKER", "value": "http://anycloud-broker.anycloud.svc:50051"} \
        in agent["env"]
    assert config_maps(pod) == [] and not any(
        m["mountPath"] == CONFIG_MOUNT for m in agent.get("volumeMounts") or [])
    # A template that sets the address itself, or mounts a ConfigMap of its own, keeps it.
    spec = src["spec"]["template"]["spec"]
    spec["containers"][0]["env"] = [{"name": "ANYCLOUD_BROKER", "value": "mine:1"}]
    spec["containers"][0]["volumeMounts"] = [{"name": "v", "mountPath": "/run/velda"}]
    spec["volumes"] = [{"name": "v", "configMap": {"name": "velda-config"}}]
    pod = render_pod(src, config_map=None, broker="http://other:50051")
    env = [e for e in pod["spec"]["containers"][0]["env"] if e["name"] == "ANYCLOUD_BROKER"]
    assert env == [{"name": "ANYCLOUD_BROKER", "value": "mine:1"}]
    assert config_maps(pod) == ["velda-config"]


def test_node_pool_adds_exactly_its_selector_and_taint_toleration() -> None:
    pod = render_pod(pool(nodePool="gpu-a10"), node_pool=NodePoolRef("np_1234"))
    assert pod["spec"]["nodeSelector"] == {"anycloud.sh/node-pool": "np_1234"}
    assert pod["spec"]["tolerations"] == [{"key": "anycloud.sh/node-pool", "operator": "Equal",
                                           "value": "np_1234", "effect": "NoSchedule"}]


def test_node_pool_needs_its_id() -> None:
    with pytest.raises(ValueError, match="node_pool"):
        render_pod(pool(nodePool="gpu-a10"))


@pytest.mark.parametrize("toleration", [
    {"operator": "Exists"},
    {"key": "anycloud.sh/node-pool", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "anycloud.sh/node-pool", "operator": "Equal", "value": "np_other",
     "effect": "NoSchedule"},
])
def test_template_tolerating_other_node_pools_is_refused(toleration: dict[str, Any]) -> None:
    src = pool(nodePool="gpu-a10")
    src["spec"]["template"]["spec"]["tolerations"] = [toleration]
    with pytest.raises(InvalidInput) as err:
        render_pod(src, node_pool=NodePoolRef("np_1234"))
    assert err.value.field == "spec.template.spec.tolerations[0]"


def test_template_selecting_another_node_pool_is_refused() -> None:
    src = pool(nodePool="gpu-a10")
    src["spec"]["template"]["spec"]["nodeSelector"] = {"anycloud.sh/node-pool": "np_other"}
    with pytest.raises(InvalidInput, match="left out"):
        render_pod(src, node_pool=NodePoolRef("np_1234"))


narrow = st.fixed_dictionaries({
    "key": st.sampled_from(["nvidia.com/gpu", "dedicated", "example.com/spot"]),
    "operator": st.sampled_from(["Exists", "Equal"]),
    "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
})


@given(pool_id=st.from_regex(r"np_[a-z0-9]{4,12}", fullmatch=True),
       extra=st.lists(narrow, max_size=3), gpu=st.booleans())
def test_placement_tolerates_exactly_one_node_pool_taint(
        pool_id: str, extra: list[dict[str, Any]], gpu: bool) -> None:
    src = pool("gpu-pool.yaml" if gpu else "shell-pool.yaml", nodePool="my-pool")
    spec = src["spec"]["template"]["spec"]
    spec["tolerations"] = copy.deepcopy(extra)
    spec.pop("nodeSelector", None)
    pod = render_pod(src, node_pool=NodePoolRef(pool_id, gpus=1 if gpu else 0))
    ours = [t for t in pod["spec"]["tolerations"]
            if t.get("key") in ("anycloud.sh/node-pool", None, "")]
    assert ours == [{"key": "anycloud.sh/node-pool", "operator": "Equal", "value": pool_id,
                     "effect": "NoSchedule"}]
    # The template's other tolerations are kept as they were.
    assert [t for t in pod["spec"]["tolerations"] if t not in ours] == extra
    selector = pod["spec"]["nodeSelector"]
    assert selector["anycloud.sh/node-pool"] == pool_id
    assert (selector.get("anycloud.sh/accelerator") == "nvidia") == gpu
    assert (pod["spec"].get("runtimeClassName") == "nvidia") == gpu


def test_no_kubernetes_token_is_mounted_for_sessions_to_read_unless_the_template_asks() -> None:
    # Sessions run as another user than the agent, but a projected service-account token is
    # readable by any user of the pod: the agent needs none (POD_NAMESPACE is given).
    assert render_pod(pool())["spec"]["automountServiceAccountToken"] is False
    asked = pool()
    asked["spec"]["template"]["spec"]["automountServiceAccountToken"] = True
    assert render_pod(asked)["spec"]["automountServiceAccountToken"] is True
