"""SimulatedCluster: timed Node behaviour, the port's semantics, RBAC, journal, persistence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from automation.clock import ManualClock
from automation.kube.addons import plan_addons
from automation.kube.port import AddonKind, ClusterForbidden, ClusterPort, ClusterUnavailable
from automation.simulators.cluster import Access, NodeBehaviour, SimulatedCluster

POOL = "np-1"
MIN = timedelta(minutes=1)
FAST = NodeBehaviour(join_after=MIN, ready_after=MIN)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sim(clock: ManualClock) -> SimulatedCluster:
    return SimulatedCluster(clock)


def announce(sim: SimulatedCluster, attempt: str = "a1", gpus: int = 0,
             behaviour: NodeBehaviour = FAST, accelerator: str | None = None) -> str:
    node = f"anycloud-{attempt}"
    sim.announce_vm(attempt, POOL, "c-1", node, gpus, accelerator, behaviour=behaviour)
    return node


def test_it_is_a_cluster_port(sim: SimulatedCluster) -> None:
    port: ClusterPort = sim
    assert port.nodes_claiming(POOL, set()) == []


# -- Nodes over time -----------------------------------------------------------------------


def test_a_vm_joins_after_its_delay_then_becomes_ready(sim: SimulatedCluster,
                                                       clock: ManualClock) -> None:
    start = clock.now()
    name = announce(sim, behaviour=NodeBehaviour(join_after=2 * MIN, ready_after=30 * MIN / 60))
    clock.advance(2 * MIN - timedelta(seconds=1))
    assert sim.nodes_claiming(POOL, {name}) == []
    clock.advance(timedelta(seconds=1))
    (node,) = sim.nodes_claiming(POOL, {name})
    assert (node.name, node.ready, node.gpu_allocatable) == (name, False, 0)
    assert node.created_at == start + 2 * MIN
    assert node.labels == {"anycloud.sh/cluster": "c-1", "anycloud.sh/node-pool": POOL,
                           "anycloud.sh/provider": "aws", "anycloud.sh/attempt": "a1"}
    clock.advance(timedelta(seconds=30))
    assert sim.nodes_claiming(POOL, set())[0].ready is True


def test_a_vm_that_never_joins(sim: SimulatedCluster, clock: ManualClock) -> None:
    announce(sim, behaviour=NodeBehaviour(join_after=None))
    clock.advance(timedelta(hours=5))
    assert sim.nodes_claiming(POOL, {"anycloud-a1"}) == []


def test_a_node_that_stays_not_ready(sim: SimulatedCluster, clock: ManualClock) -> None:
    announce(sim, behaviour=NodeBehaviour(join_after=MIN, ready_after=None))
    clock.advance(timedelta(hours=1))
    (node,) = sim.nodes_claiming(POOL, set())
    assert node.ready is False


def test_gpus_appear_after_ready_plus_their_delay(sim: SimulatedCluster,
                                                  clock: ManualClock) -> None:
    announce(sim, gpus=8, accelerator="nvidia",
             behaviour=NodeBehaviour(join_after=MIN, ready_after=MIN, devices_after=5 * MIN))
    clock.advance(2 * MIN)
    (node,) = sim.nodes_claiming(POOL, set())
    assert (node.ready, node.gpu_allocatable) == (True, 0)  # Ready with zero for a while
    assert node.labels["anycloud.sh/accelerator"] == "nvidia"
    clock.advance(5 * MIN)
    assert sim.nodes_claiming(POOL, set())[0].gpu_allocatable == 8


def test_a_wrong_gpu_count(sim: SimulatedCluster, clock: ManualClock) -> None:
    announce(sim, gpus=8, behaviour=NodeBehaviour(join_after=MIN, ready_after=MIN,
                                                  advertised_gpus=4))
    clock.advance(2 * MIN)
    assert sim.nodes_claiming(POOL, set())[0].gpu_allocatable == 4


def test_devices_drop_later(sim: SimulatedCluster, clock: ManualClock) -> None:
    announce(sim, gpus=1, behaviour=NodeBehaviour(join_after=MIN, ready_after=MIN,
                                                  drop_devices_after=30 * MIN))
    clock.advance(2 * MIN)
    assert sim.nodes_claiming(POOL, set())[0].gpu_allocatable == 1
    clock.advance(30 * MIN)
    node = sim.nodes_claiming(POOL, set())[0]
    assert (node.ready, node.gpu_allocatable) == (True, 0)


def test_a_gpu_vm_whose_agent_joins_without_the_accelerator_label(
    sim: SimulatedCluster, clock: ManualClock
) -> None:
    name = announce(sim, gpus=1, accelerator=None)
    clock.advance(2 * MIN)
    assert "anycloud.sh/accelerator" not in sim.nodes_claiming(POOL, set())[0].labels
    sim.label_node(name, "anycloud.sh/accelerator", "nvidia")
    assert sim.nodes_claiming(POOL, set())[0].labels["anycloud.sh/accelerator"] == "nvidia"
    assert sim.journal == [("patch", "nodes", name)]


def test_default_behaviour_applies_when_none_is_given(sim: SimulatedCluster,
                                                      clock: ManualClock) -> None:
    sim.default_behaviour = NodeBehaviour(join_after=None)
    sim.announce_vm("a1", POOL, "c-1", "anycloud-a1", 0, None)
    clock.advance(timedelta(hours=1))
    assert sim.node_names() == []


def test_direct_knobs_on_a_joined_node(sim: SimulatedCluster, clock: ManualClock) -> None:
    name = announce(sim)
    clock.advance(2 * MIN)
    sim.set_node_ready(name, False)
    sim.set_node_gpus(name, 2)
    node = sim.node(name)
    assert node is not None and (node.ready, node.gpu_allocatable) == (False, 2)
    with pytest.raises(KeyError, match="no Node ghost"):
        sim.set_node_ready("ghost", True)


# -- what claims a pool ----------------------------------------------------------------------


def test_nodes_claiming_by_label_or_issued_name_only(sim: SimulatedCluster,
                                                     clock: ManualClock) -> None:
    mine = announce(sim, "a1")
    sim.announce_vm("b1", "np-2", "c-1", "anycloud-b1", 0, None, behaviour=FAST)
    sim.add_foreign_node("impostor", {"anycloud.sh/node-pool": POOL})
    sim.add_foreign_node("anycloud-a9")  # carries a name we issued, no labels
    sim.add_foreign_node("management")
    clock.advance(2 * MIN)
    got = sim.nodes_claiming(POOL, {mine, "anycloud-a9", "never-joined"})
    assert [n.name for n in got] == ["anycloud-a1", "anycloud-a9", "impostor"]
    assert sim.reads == [("list", "nodes", f"anycloud.sh/node-pool={POOL}"),
                         ("get", "nodes", "anycloud-a9"), ("get", "nodes", "never-joined")]


def test_observed_nodes_are_copies(sim: SimulatedCluster, clock: ManualClock) -> None:
    announce(sim)
    clock.advance(2 * MIN)
    sim.nodes_claiming(POOL, set())[0].labels["anycloud.sh/node-pool"] = "np-other"
    assert sim.nodes_claiming(POOL, set())[0].labels["anycloud.sh/node-pool"] == POOL


# -- writes ------------------------------------------------------------------------------------


def test_cordon_and_delete(sim: SimulatedCluster, clock: ManualClock) -> None:
    name = announce(sim)
    clock.advance(2 * MIN)
    sim.release_vm("a1")
    assert sim.nodes_claiming(POOL, set())[0].ready is False  # its kubelet is gone
    sim.cordon_node(name)
    assert sim.nodes_claiming(POOL, set())[0].unschedulable is True
    sim.delete_node(name)
    sim.delete_node(name)  # absent: success
    clock.advance(timedelta(hours=1))
    assert sim.node_names() == []  # a released VM's Node never comes back
    assert sim.journal == [("patch", "nodes", name), ("delete", "nodes", name),
                           ("delete", "nodes", name)]


def test_a_deleted_node_of_a_running_vm_registers_again(sim: SimulatedCluster,
                                                        clock: ManualClock) -> None:
    name = announce(sim, behaviour=NodeBehaviour(join_after=MIN, ready_after=MIN,
                                                 reregister_after=30 * MIN / 60))
    clock.advance(2 * MIN)
    sim.delete_node(name)
    assert sim.node_names() == []
    clock.advance(timedelta(seconds=30))
    node = sim.node(name)
    assert node is not None and node.ready is False and not node.unschedulable
    assert node.labels["anycloud.sh/attempt"] == "a1"
    clock.advance(MIN)
    node = sim.node(name)
    assert node is not None and node.ready is True


def test_release_before_join_means_no_node(sim: SimulatedCluster, clock: ManualClock) -> None:
    announce(sim)
    sim.release_vm("a1")
    sim.release_vm("never-announced")  # a VM that never booted has nothing to release
    clock.advance(timedelta(hours=1))
    assert sim.node_names() == []
    assert sim.vm_live("a1") is False


def test_bootstrap_token_secrets(sim: SimulatedCluster) -> None:
    sim.add_token("abc123")
    sim.add_token("def456")
    sim.delete_bootstrap_token("abc123")
    sim.delete_bootstrap_token("abc123")  # absent: success
    assert sim.tokens == {"def456"}
    assert sim.writes_to("secrets") == [("delete", "secrets", "bootstrap-token-abc123")] * 2


def test_namespaces(sim: SimulatedCluster, clock: ManualClock) -> None:
    sim.add_owned_namespace("np-1", POOL)
    sim.add_namespace("taken", {"team": "ml"})
    sim.add_owned_namespace("np-2", "np-2")
    assert sim.namespace_owner("np-1", POOL) == "ours"
    assert sim.namespace_owner("taken", POOL) == "foreign"
    assert sim.namespace_owner("np-2", POOL) == "foreign"
    assert sim.namespace_owner("nope", POOL) == "absent"


def test_a_namespace_without_content_goes_at_once(sim: SimulatedCluster) -> None:
    sim.add_owned_namespace("np-1", POOL)
    sim.delete_namespace("np-1")
    assert sim.namespace_owner("np-1", POOL) == "absent"
    assert sim.service_objects_removed("np-1") is True


def test_a_namespace_is_removed_once_its_termination_ends(sim: SimulatedCluster,
                                                          clock: ManualClock) -> None:
    sim.namespace_delete_delay = 2 * MIN
    sim.add_namespace("svc-1")
    sim.delete_namespace("svc-1")
    assert sim.service_objects_removed("svc-1") is False  # Terminating
    sim.delete_namespace("svc-1")  # again while Terminating: same deadline
    clock.advance(2 * MIN)
    assert sim.service_objects_removed("svc-1") is True
    assert sim.journal == [("delete", "namespaces", "svc-1")] * 2


# -- add-ons -----------------------------------------------------------------------------------


def _ours(cluster: str) -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "nvidia", "labels": {"app.kubernetes.io/managed-by":
                                                      "anycloud",
                                                      "anycloud.sh/cluster": cluster}},
            "handler": "nvidia"}


def _ds(cluster: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "anycloud-nvidia-device-plugin", "namespace": "kube-system",
                         "labels": {"app.kubernetes.io/managed-by": "anycloud",
                                    "anycloud.sh/cluster": cluster}},
            "spec": {"selector": {"matchLabels": {"app": "dp"}},
                     "template": {"spec": {"nodeSelector": {"anycloud.sh/cluster": cluster}}}}}


def _plan(sim: SimulatedCluster, adoptable: tuple[str, ...] = ()) -> Any:
    seen = sim.addon_objects("c-1")
    return plan_addons(seen.runtime_class, seen.daemonset, cluster_id="c-1",
                       adoptable_cluster_ids=adoptable,
                       desired_runtime_class=_ours("c-1"), desired_daemonset=_ds("c-1"))


def test_addon_states_the_rules_can_see(sim: SimulatedCluster) -> None:
    p = _plan(sim)
    assert (p.runtime_class.classification, p.daemonset.classification) == ("absent", "absent")
    sim.apply_addon("runtimeclass", _ours("c-1"))
    sim.apply_addon("daemonset", _ds("c-1"))
    p = _plan(sim)
    assert (p.runtime_class.classification, p.daemonset.classification) == (
        "ours-unchanged", "ours-unchanged")
    sim.edit_addon("daemonset", lambda o: o["spec"]["template"]["spec"]["nodeSelector"]
                   .update({"extra": "x"}))
    assert _plan(sim).daemonset.classification == "ours-edited"
    sim.add_k3s_runtime_class()
    assert _plan(sim).runtime_class.classification == "k3s-builtin"
    sim.add_foreign_addon("daemonset")
    assert _plan(sim).daemonset.classification == "foreign"
    assert sim.journal == [("create", "runtimeclasses", "nvidia"),
                           ("create", "daemonsets",
                            "kube-system/anycloud-nvidia-device-plugin")]


def test_adoption_relabel_and_recreate(sim: SimulatedCluster) -> None:
    sim.set_addon("runtimeclass", _ours("c-old"))
    sim.set_addon("daemonset", _ds("c-old"))
    p = _plan(sim, adoptable=("c-old",))
    assert p.relabel == ("runtimeclass", "daemonset")
    sim.write_addon_labels("c-1", p.relabel)
    p = _plan(sim)
    assert p.runtime_class.classification == "ours-unchanged"
    assert p.daemonset.classification == "ours-edited"  # still selects c-old's Nodes
    sim.delete_addon_object("daemonset")
    assert sim.addon_objects("c-1").daemonset is None
    assert sim.journal == [
        ("patch", "runtimeclasses", "nvidia"),
        ("patch", "daemonsets", "kube-system/anycloud-nvidia-device-plugin"),
        ("delete", "daemonsets", "kube-system/anycloud-nvidia-device-plugin"),
    ]


def test_addon_objects_are_copies_with_server_fields(sim: SimulatedCluster) -> None:
    sim.apply_addon("runtimeclass", _ours("c-1"))
    seen = sim.addon_objects("c-1").runtime_class
    assert seen is not None and seen["metadata"]["uid"] and seen["metadata"]["resourceVersion"]
    seen["handler"] = "changed"
    again = sim.addon_objects("c-1").runtime_class
    assert again is not None and again["handler"] == "nvidia"


def test_a_cpu_pool_pass_touches_no_addon_object(sim: SimulatedCluster,
                                                 clock: ManualClock) -> None:
    # What a CPU pool's pass does through the port: observe Nodes, drop a token, label.
    name = announce(sim)
    sim.add_token("t1")
    clock.advance(2 * MIN)
    sim.nodes_claiming(POOL, {name})
    sim.delete_bootstrap_token("t1")
    touched = {a.resource for a in sim.journal + sim.reads}
    assert touched == {"nodes", "secrets"}
    assert sim.writes_to("runtimeclasses") == sim.writes_to("daemonsets") == []
    sim.addon_objects("c-1")  # a GPU pass would read them: the journal would show it
    assert ("get", "runtimeclasses", "nvidia") in sim.reads


# -- failures ----------------------------------------------------------------------------------


DS_ONLY: tuple[AddonKind, ...] = ("daemonset",)
PORT_CALLS: list[tuple[str, str, Callable[[SimulatedCluster], object]]] = [
    ("list", "nodes", lambda s: s.nodes_claiming(POOL, set())),
    ("patch", "nodes", lambda s: s.cordon_node("n")),
    ("patch", "nodes", lambda s: s.label_node("n", "k", None)),
    ("delete", "nodes", lambda s: s.delete_node("n")),
    ("delete", "secrets", lambda s: s.delete_bootstrap_token("t")),
    ("get", "namespaces", lambda s: s.namespace_owner("ns", POOL)),
    ("delete", "namespaces", lambda s: s.delete_namespace("ns")),
    ("get", "namespaces", lambda s: s.service_objects_removed("ns")),
    ("get", "runtimeclasses", lambda s: s.addon_objects("c-1")),
    ("get", "daemonsets", lambda s: s.addon_objects("c-1")),
    ("patch", "daemonsets", lambda s: s.write_addon_labels("c-1", DS_ONLY)),
    ("delete", "runtimeclasses", lambda s: s.delete_addon_object("runtimeclass")),
    ("create", "daemonsets", lambda s: s.apply_addon("daemonset", _ds("c-1"))),
]


@pytest.mark.parametrize(("verb", "resource", "call"), PORT_CALLS)
def test_rbac_denial(sim: SimulatedCluster, verb: str, resource: str,
                     call: Callable[[SimulatedCluster], object]) -> None:
    sim.deny(verb, resource)
    with pytest.raises(ClusterForbidden) as caught:
        call(sim)
    assert (caught.value.verb, caught.value.resource) == (verb, resource)
    assert f"denies `{verb}` on `{resource}`" in str(caught.value)
    assert sim.journal == []  # a denied write did not happen
    sim.allow(verb, resource)
    call(sim)


@pytest.mark.parametrize(("verb", "resource", "call"), PORT_CALLS)
def test_unreachable(sim: SimulatedCluster, verb: str, resource: str,
                     call: Callable[[SimulatedCluster], object]) -> None:
    sim.set_unreachable(True)
    with pytest.raises(ClusterUnavailable, match="cannot reach the simulated cluster"):
        call(sim)
    sim.set_unreachable(False)
    call(sim)


def test_denied_token_delete_keeps_the_secret(sim: SimulatedCluster) -> None:
    sim.add_token("t1")
    sim.deny("delete", "secrets")
    with pytest.raises(ClusterForbidden, match="in namespace kube-system"):
        sim.delete_bootstrap_token("t1")
    assert sim.tokens == {"t1"}


# -- determinism and persistence --------------------------------------------------------------


def _script(sim: SimulatedCluster, clock: ManualClock) -> None:
    for i in range(3):
        sim.announce_vm(f"a{i}", POOL, "c-1", f"anycloud-a{i}", 1, "nvidia",
                        behaviour=NodeBehaviour(join_after=MIN * (i + 1), ready_after=MIN))
    sim.add_token("t0")
    sim.add_owned_namespace("np-1", POOL)
    sim.apply_addon("runtimeclass", _ours("c-1"))
    clock.advance(2 * MIN)
    sim.delete_bootstrap_token("t0")
    sim.nodes_claiming(POOL, set())


def test_the_same_script_gives_the_same_state() -> None:
    one, two = ManualClock(), ManualClock()
    a, b = SimulatedCluster(one), SimulatedCluster(two)
    _script(a, one)
    _script(b, two)
    assert json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)


def test_save_and_load_keep_everything_including_pending_events(tmp_path: Path,
                                                                clock: ManualClock) -> None:
    sim = SimulatedCluster(clock)
    _script(sim, clock)
    sim.deny("delete", "nodes")
    sim.namespace_delete_delay = 3 * MIN
    sim.default_behaviour = NodeBehaviour(join_after=None)
    path = tmp_path / "cluster.json"
    sim.save(path)
    back = SimulatedCluster.load(path, clock)
    assert back.to_json() == sim.to_json()
    assert back.default_behaviour == NodeBehaviour(join_after=None)
    clock.advance(5 * MIN)  # events saved as pending happen after the reload
    assert [(n.name, n.ready, n.gpu_allocatable) for n in back.nodes_claiming(POOL, set())] == [
        ("anycloud-a0", True, 1), ("anycloud-a1", True, 1), ("anycloud-a2", True, 1)]
    with pytest.raises(ClusterForbidden):
        back.delete_node("anycloud-a0")


def test_a_loaded_cluster_saves_every_change(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "cluster.json"
    SimulatedCluster(clock, path=path).add_token("t1")
    sim = SimulatedCluster.load(path, clock)
    assert sim.tokens == {"t1"}
    sim.delete_bootstrap_token("t1")  # no explicit save
    again = SimulatedCluster.load(path, clock)
    assert again.tokens == set()
    assert again.journal == [("delete", "secrets", "bootstrap-token-t1")]
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]  # no temp files left


def test_load_names_the_file_and_problem(tmp_path: Path, clock: ManualClock) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"cannot load the simulated cluster from .*bad\.json"):
        SimulatedCluster.load(bad, clock)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 0}))
    with pytest.raises(ValueError, match="format 0, expected 1"):
        SimulatedCluster.load(old, clock)


CHURN = textwrap.dedent("""
    import sys
    from pathlib import Path
    from automation.clock import ManualClock
    from automation.simulators.cluster import SimulatedCluster

    path = Path(sys.argv[1])
    sim = SimulatedCluster.load(path, ManualClock())
    print("ready", flush=True)
    i = len(sim.journal)
    while True:
        sim.add_token(f"t{i}")
        sim.delete_bootstrap_token(f"t{i}")
        i += 1
""")


def test_state_survives_sigkill_mid_write(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    SimulatedCluster(ManualClock(), path=path).add_token("seed")
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    seen = 0
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", CHURN, str(path)], env=env,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(0.3)  # let it write many times, then kill it wherever it is
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        sim = SimulatedCluster.load(path, ManualClock())  # never a torn file
        # Every completed save is consistent: the last journalled delete removed its token.
        assert sim.tokens <= {"seed", f"t{len(sim.journal)}"}
        assert all(a == Access("delete", "secrets", f"bootstrap-token-t{i}")
                   for i, a in enumerate(sim.journal))
        assert len(sim.journal) > seen  # each run made progress that survived
        seen = len(sim.journal)
