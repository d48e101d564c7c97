"""Crash recovery's decisions, and its VM lookups for the three clouds under the mock engine.

The lookup program is the one the real engine runs (``cloud_lookup_program``: the providers'
own invokes through the pool's provider); here the SDK's mock engine runs it and the
simulated cloud answers the invokes as the providers do (``VmLookupAnswers``).
"""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from automation.clock import ManualClock
from automation.engine.errors import EngineFailed
from automation.engine.mock.program import run_program
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.recovery import (
    NETWORK_TYPES,
    Answer,
    PendingCreate,
    adopted,
    answers_from_outputs,
    cloud_lookup_program,
    pending_creates_in,
    settle,
    unread_imports,
)
from automation.engine.runner import StackTarget
from automation.simulators.cloud import CloudSimulator
from automation.simulators.vm_lookup import VmLookupAnswers
from stacks.providers import cloud_provider
from tests.automation.engine.test_mock_runner import with_attempts
from tests.automation.engine.test_pulumi_driver import pool_target

VM_TYPES = {"aws": "aws:ec2/instance:Instance", "gcp": "gcp:compute/instance:Instance",
            "azure": "azure-native:compute:VirtualMachine"}
TOKENS = {"aws": "aws:ec2/getInstances:getInstances",
          "gcp": "gcp:compute/getInstance:getInstance",
          "azure": "azure-native:compute:getVirtualMachine"}
STACK = "urn:pulumi:s::anycloud::pulumi:pulumi:Stack::anycloud-s"


def vm_creates(runner: MockEngineRunner, target: StackTarget,
               cloud: str) -> dict[str, PendingCreate]:
    """Each VM of the stack as the create a killed ``up`` would have left in flight (its
    inputs as recorded), by attempt id."""
    out = {}
    for urn, rec in runner.load_state(target)["resources"].items():
        if rec["type"] == VM_TYPES[cloud]:
            p = PendingCreate(urn=urn, type=rec["type"], custom=True, inputs=rec["inputs"])
            assert p.attempt_id is not None
            out[p.attempt_id] = p
    return out


def look_up(cloud: CloudSimulator, target: StackTarget,
            pending: list[PendingCreate]
            ) -> tuple[dict[str, Answer], list[tuple[str, dict[str, Any]]]]:
    program = cloud_lookup_program(pending, lambda: cloud_provider(target.config))
    answering = VmLookupAnswers(cloud)
    run = run_program(program, cloud=answering, stack="lookup")
    return answers_from_outputs(run.outputs, pending), answering.asked


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_vm_lookup_finds_the_live_vm_and_confirms_the_released_one_absent(
        tmp_path: Path, provider: str) -> None:
    clock = ManualClock()
    cloud = CloudSimulator(clock, tmp_path / "cloud.json", delete_latency=timedelta(seconds=30))
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(provider), "at-1", "at-2", "at-3")
    runner.up(target)
    creates = vm_creates(runner, target, provider)
    ids = {v.attempt_id: v.id for v in cloud.vms.values()}
    # at-2 released and gone; at-3 being released (it still exists: import it, the engine
    # then owns its deletion).
    cloud.delete_resource(VM_TYPES[provider], ids["at-2"])
    clock.advance(timedelta(seconds=31))
    cloud.delete_resource(VM_TYPES[provider], ids["at-3"])

    answers, invokes = look_up(cloud, target, list(creates.values()))

    assert answers[creates["at-1"].urn] == Answer("found", ids["at-1"])
    assert answers[creates["at-2"].urn] == Answer("absent")
    assert answers[creates["at-3"].urn] == Answer("found", ids["at-3"])
    # Through the provider's own lookup, once per VM.
    assert [token for token, _ in invokes] == [TOKENS[provider]] * 3
    if provider == "aws":  # by tag: instance ids are the cloud's
        assert {a["instanceTags"]["anycloud.sh/attempt"] for _, a in invokes} == {
            "at-1", "at-2", "at-3"}
        assert "terminated" not in invokes[0][1]["instanceStateNames"]


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_provider_that_cannot_answer_leaves_the_vm_unknown(
        tmp_path: Path, provider: str) -> None:
    cloud = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(provider), "at-1")
    runner.up(target)
    creates = vm_creates(runner, target, provider)
    cloud.faults.uncertain.append("at-1")

    answers, _ = look_up(cloud, target, [creates["at-1"]])

    answer = answers[creates["at-1"].urn]
    assert answer.state == "unknown" and "RequestLimitExceeded" in answer.detail


def test_aws_two_instances_with_one_attempt_tag_is_not_guessed(tmp_path: Path) -> None:
    """Two live instances tagged with the same attempt: importing either would be a guess."""
    cloud = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target("aws"), "at-1")
    runner.up(target)
    creates = vm_creates(runner, target, "aws")
    (vm,) = cloud.vms.values()
    twin = type(vm)(**{**vm.__dict__, "id": "i-0twin0000000000000"})
    cloud.vms[twin.id] = twin

    answers, _ = look_up(cloud, target, [creates["at-1"]])

    answer = answers[creates["at-1"].urn]
    assert answer.state == "unknown"
    assert vm.id in answer.detail and twin.id in answer.detail


def test_gcp_instance_with_the_name_but_another_attempt_label_is_not_imported(
        tmp_path: Path) -> None:
    cloud = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target("gcp"), "at-1")
    runner.up(target)
    creates = vm_creates(runner, target, "gcp")
    (vm,) = cloud.vms.values()
    vm.attempt_id = "someone-else"

    answers, _ = look_up(cloud, target, [creates["at-1"]])

    answer = answers[creates["at-1"].urn]
    assert answer.state == "unknown" and "not labelled with attempt at-1" in answer.detail


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_vms_left_in_flight_are_settled_from_the_provider_answers(
        tmp_path: Path, provider: str) -> None:
    """The whole decision for a pool's VMs under the mock engine: the live VM is adopted
    under the id the cloud gave it, the released one is cleared, and nothing is left in
    flight; with one VM the provider cannot answer for, nothing is adopted at all."""
    clock = ManualClock()
    cloud = CloudSimulator(clock, tmp_path / "cloud.json", delete_latency=timedelta(seconds=1))
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(provider), "at-1", "at-2")
    runner.up(target)
    creates = vm_creates(runner, target, provider)
    ids = {v.attempt_id: v.id for v in cloud.vms.values()}
    cloud.delete_resource(VM_TYPES[provider], ids["at-2"])
    clock.advance(timedelta(seconds=2))
    # What a killed `up` leaves: both creates in flight, the state without them.
    deployment = {"resources": [], "pending_operations": [
        {"type": "creating", "resource": {"urn": p.urn, "type": p.type, "custom": True,
                                          "inputs": dict(p.inputs)}}
        for p in creates.values()]}

    def lookup_vms(vms: list[PendingCreate]) -> dict[str, Answer]:
        return look_up(cloud, target, vms)[0]

    def no_objects(_: list[tuple[PendingCreate, str]]) -> dict[str, Answer]:
        raise AssertionError("no Kubernetes object is pending")

    outcome = settle(pending_creates_in(deployment), set(), lookup_cloud=lookup_vms,
                     lookup_objects=no_objects)
    after = adopted(deployment, outcome)
    assert outcome.imported == [(creates["at-1"].urn, ids["at-1"])]
    assert outcome.cleared == [creates["at-2"].urn]
    assert [(r["urn"], r["id"]) for r in after["resources"]] == outcome.imported
    assert after["pending_operations"] == []

    cloud.faults.uncertain.append("at-1")
    unsure = settle(pending_creates_in(deployment), set(), lookup_cloud=lookup_vms,
                    lookup_objects=no_objects)
    assert not unsure.complete and unsure.imported == []
    assert f"UNRESOLVED {creates['at-1'].urn}: the {provider} lookup by attempt at-1" in (
        unsure.describe())


# -- the decision ---------------------------------------------------------------------------


def create(urn_tail: str, type_: str, custom: bool = True, inputs: dict[str, Any] | None = None,
           parent: str | None = None) -> PendingCreate:
    return PendingCreate(urn=f"urn:pulumi:s::anycloud::{type_}::{urn_tail}", type=type_,
                         custom=custom, inputs=inputs or {}, parent=parent,
                         provider="urn:pulumi:s::anycloud::pulumi:providers:kubernetes::k::id-1")


COMPONENT = "urn:pulumi:s::anycloud::anycloud:cluster:NvidiaAddons::nvidia"
DS_INPUTS = {"metadata": {"name": "ds", "namespace": "kube-system"}}


def test_settle_imports_found_clears_absent_and_state_only_and_names_the_rest() -> None:
    ds = create("ds", "kubernetes:apps/v1:DaemonSet", inputs=DS_INPUTS, parent=COMPONENT)
    rc = create("rc", "kubernetes:node.k8s.io/v1:RuntimeClass",
                inputs={"metadata": {"name": "nvidia"}}, parent=COMPONENT)
    component = create("nvidia", "anycloud:cluster:NvidiaAddons", custom=False)
    provider = create("k", "pulumi:providers:kubernetes")
    vm_live = create("vm-a", VM_TYPES["aws"], inputs={"tags": {"anycloud.sh/attempt": "a"}})
    vm_gone = create("vm-b", VM_TYPES["aws"], inputs={"tags": {"anycloud.sh/attempt": "b"}})
    vm_unsure = create("vm-c", VM_TYPES["aws"], inputs={"tags": {"anycloud.sh/attempt": "c"}})
    bucket = create("bucket", "aws:s3/bucket:Bucket")
    asked_vms: list[list[str]] = []
    asked_objects: list[list[tuple[str, str]]] = []

    def lookup_vms(vms: list[PendingCreate]) -> dict[str, Answer]:
        asked_vms.append([p.urn for p in vms])
        return {vm_live.urn: Answer("found", "i-1"), vm_gone.urn: Answer("absent"),
                vm_unsure.urn: Answer("unknown", detail="throttled")}

    def lookup_objects(items: list[tuple[PendingCreate, str]]) -> dict[str, Answer]:
        asked_objects.append([(p.urn, rid) for p, rid in items])
        return {ds.urn: Answer("found", "kube-system/ds"), rc.urn: Answer("absent")}

    out = settle([ds, rc, component, provider, vm_live, vm_gone, vm_unsure, bucket], {COMPONENT},
                 lookup_cloud=lookup_vms, lookup_objects=lookup_objects)

    assert asked_vms == [[vm_live.urn, vm_gone.urn, vm_unsure.urn]]
    assert asked_objects == [[(ds.urn, "kube-system/ds"), (rc.urn, "nvidia")]]
    assert sorted(out.imported) == sorted([(ds.urn, "kube-system/ds"), (vm_live.urn, "i-1")])
    assert sorted(out.cleared) == sorted([component.urn, provider.urn, vm_gone.urn, rc.urn])
    assert sorted(u for u, _ in out.unresolved) == sorted([vm_unsure.urn, bucket.urn])
    assert not out.complete
    assert "throttled" in out.describe() and "no lookup for aws:s3/bucket:Bucket" in out.describe()


def test_settle_does_not_look_up_what_the_state_already_holds_or_cannot_place() -> None:
    ds = create("ds", "kubernetes:apps/v1:DaemonSet", inputs=DS_INPUTS, parent=COMPONENT)

    def refuse(*_: Any) -> dict[str, Answer]:
        raise AssertionError("looked up")

    held = settle([ds], {ds.urn, COMPONENT}, lookup_cloud=refuse, lookup_objects=refuse)
    assert held.complete and held.cleared == [ds.urn] and held.imported == []
    orphan = settle([ds], set(), lookup_cloud=refuse, lookup_objects=refuse)
    assert orphan.unresolved == [(ds.urn, f"its parent {COMPONENT} is not in the state")]


def test_a_complete_settlement_adopts_what_was_found_and_leaves_nothing_in_flight() -> None:
    ds = {"urn": "urn:pulumi:s::anycloud::anycloud:cluster:NvidiaAddons$kubernetes:apps/v1:"
                 "DaemonSet::nvidia-device-plugin",
          "type": "kubernetes:apps/v1:DaemonSet", "custom": True, "inputs": DS_INPUTS,
          "parent": COMPONENT, "retainOnDelete": True,
          "provider": "urn:pulumi:s::anycloud::pulumi:providers:kubernetes::cluster::uuid-1"}
    top = {"urn": "urn:pulumi:s::anycloud::kubernetes:core/v1:Namespace::ns", "custom": True,
           "type": "kubernetes:core/v1:Namespace", "inputs": {"metadata": {"name": "ns"}},
           "parent": STACK}
    held = [{"urn": COMPONENT, "type": "anycloud:cluster:NvidiaAddons"}]
    deployment = {"resources": held,
                  "pending_operations": [{"type": "creating", "resource": ds},
                                         {"type": "updating", "resource": held[0]},
                                         {"type": "creating", "resource": top}]}
    found = pending_creates_in(deployment)
    assert [p.urn for p in found] == sorted([ds["urn"], top["urn"]])
    by_urn = {p.urn: p for p in found}
    assert by_urn[ds["urn"]].kube_id == "kube-system/ds"
    assert by_urn[ds["urn"]].name == "nvidia-device-plugin"
    assert by_urn[top["urn"]].kube_id == "ns"  # cluster-scoped

    outcome = settle(found, {COMPONENT}, lookup_cloud=lambda _: {}, lookup_objects=lambda items: {
        ds["urn"]: Answer("found", "kube-system/ds"), top["urn"]: Answer("absent")})
    after = adopted(deployment, outcome)

    assert after["pending_operations"] == []
    assert after["resources"] == [*held, {**ds, "id": "kube-system/ds"}]
    assert unread_imports(after) == [ds["urn"]]  # until a refresh reads its outputs
    assert deployment["pending_operations"]  # the original is left as it was
    with pytest.raises(ValueError):
        adopted(deployment, settle(found, set(), lookup_cloud=lambda _: {},
                                   lookup_objects=lambda _: {}))


# Provider errors as each provider prints them; only its own not-found shape is an absence.
_ERRORS = [
    ("gcp", "googleapi: Error 404: The resource 'projects/p/zones/z/instances/vm' was not "
            "found, notFound", "absent"),
    ("gcp", "Error reading Instance: googleapi: Error 404: The resource 'projects/p' was "
            "not found, notFound", "absent"),
    ("gcp", "googleapi: Error 403: Required 'compute.instances.get' permission, forbidden",
     "unknown"),
    ("gcp", "instance vm not found in cache", "unknown"),
    ("azure", "GET https://management.azure.com/subscriptions/s/resourceGroups/g/providers/"
              "Microsoft.Compute/virtualMachines/vm\n------\nRESPONSE 404: 404 Not Found\n"
              "ERROR CODE: ResourceNotFound\n------\n{\"error\": {\"code\": "
              "\"ResourceNotFound\", \"message\": \"The Resource ... was not found.\"}}",
     "absent"),
    ("azure", "RESPONSE 404: 404 Not Found\nERROR CODE: ResourceGroupNotFound\nResource group "
              "'g' could not be found.", "absent"),
    ("azure", "(ResourceNotFound) The Resource 'Microsoft.Compute/virtualMachines/vm' under "
              "resource group 'g' was not found.", "absent"),
    ("azure", "AADSTS700016: Application with identifier 'app' was not found in the "
              "directory 'tenant'.", "unknown"),
    ("azure", "RESPONSE 403: 403 Forbidden\nERROR CODE: AuthorizationFailed", "unknown"),
    ("aws", "InvalidInstanceID.NotFound: The instance ID 'i-1' does not exist", "unknown"),
]


@pytest.mark.parametrize(("cloud", "message", "state"), _ERRORS)
def test_only_the_providers_own_not_found_error_means_absent(
        monkeypatch: pytest.MonkeyPatch, cloud: str, message: str, state: str) -> None:
    from automation.engine import recovery

    def failing(p: PendingCreate, attempt: str, invoke: Any) -> Answer:
        raise RuntimeError(message)

    monkeypatch.setitem(recovery._LOOKUPS, cloud, failing)
    key = "labels" if cloud == "gcp" else "tags"
    p = PendingCreate(urn="urn:pulumi:s::anycloud::vm::vm", type=VM_TYPES[cloud], custom=True,
                      inputs={key: {"anycloud.sh/attempt": "at-1"}})
    assert p.attempt_id == "at-1"
    answer = recovery.lookup_cloud(p, invoke=None)
    assert answer.state == state
    if state == "unknown":
        assert answer.detail == message  # the provider's own words, for the user


# -- a pool's network left in flight --------------------------------------------------------


def killed_while_creating(cloud: CloudSimulator, state: dict[str, Any],
                          urns: list[str]) -> dict[str, Any]:
    """The state file a run killed while creating ``urns`` leaves: each create in flight
    with its inputs as the provider checked them (autonames included, as the engine
    records them), none of them a resource of the state."""
    from pulumi.runtime.mocks import MockResourceArgs

    out = copy.deepcopy(state)
    ops = []
    for urn in urns:
        rec = out["resources"].pop(urn)
        checked = cloud.check(MockResourceArgs(typ=rec["type"], name=rec["name"],
                                               inputs=rec["inputs"], custom=True))
        ops.append({"type": "creating", "record": {k: v for k, v in rec.items() if k != "id"},
                    "resource": {"urn": urn, "type": rec["type"], "custom": True,
                                 "inputs": {**rec["inputs"], **checked}, "parent": None,
                                 "provider": None}})
    out["pending_operations"] = ops
    return out


def network_of(runner: MockEngineRunner, target: StackTarget) -> dict[str, str]:
    """The pool's network resources in the stack's state: URN → the cloud's id."""
    return {urn: rec["id"] for urn, rec in runner.load_state(target)["resources"].items()
            if rec["type"] in NETWORK_TYPES}


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_network_left_in_flight_is_found_and_kept_not_bought_again(
        tmp_path: Path, provider: str) -> None:
    """Killed while creating the whole network: each resource is looked up the way its
    cloud identifies it and recorded under the id the cloud holds. Nothing is created again
    (AWS would buy a second VPC; GCP would refuse the name with 409, forever)."""
    cloud = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(provider), "at-1")
    runner.up(target)
    network = network_of(runner, target)
    assert len(network) >= 4
    runner._save_state(target, killed_while_creating(cloud, runner.load_state(target), [*network]))
    held = len(cloud.resources)

    result = runner.up(target)

    assert network_of(runner, target) == network
    assert result.summary.create == 0 and len(cloud.resources) == held
    assert not runner.load_state(target).get("pending_operations")


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_network_resource_never_made_is_cleared_and_made_once(
        tmp_path: Path, provider: str) -> None:
    """The create of one resource (the last one: the security group or a firewall rule)
    never reached the cloud: confirmed absent, cleared, and the next update makes it."""
    cloud = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(provider), "at-1")
    runner.up(target)
    network = network_of(runner, target)
    types = {urn: runner.load_state(target)["resources"][urn]["type"] for urn in network}
    last = {"aws": "aws:ec2/securityGroup:SecurityGroup", "gcp": "gcp:compute/firewall:Firewall",
            "azure": "azure-native:network:NetworkSecurityGroup"}[provider]
    lost = next(urn for urn in sorted(network) if types[urn] == last)
    cloud.delete_resource(last, network[lost])
    runner._save_state(target, killed_while_creating(cloud, runner.load_state(target), [*network]))

    result = runner.up(target)

    assert result.summary.create == 1
    after = network_of(runner, target)
    assert {u: i for u, i in after.items() if u != lost} == {
        u: i for u, i in network.items() if u != lost}
    assert cloud.resources[after[lost]]["state"] == "live"


def test_two_aws_vpcs_with_the_pools_tags_are_not_guessed(tmp_path: Path) -> None:
    """A VPC bought twice (an earlier, unprotected crash): importing either would be a
    guess, so nothing changes and the stack stops, naming both."""
    cloud = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target("aws"), "at-1")
    runner.up(target)
    network = network_of(runner, target)
    vpc = next(urn for urn in network if urn.endswith("-vpc"))
    twin = "vpc-0twin00000000000"
    cloud.resources[twin] = {**cloud.resources[network[vpc]]}
    cloud.live[twin] = copy.deepcopy(cloud.live[network[vpc]])
    killed = killed_while_creating(cloud, runner.load_state(target), [vpc])
    runner._save_state(target, killed)

    with pytest.raises(EngineFailed) as failed:
        runner.up(target)

    assert failed.value.code == "PENDING_CREATES"
    assert "2 Vpcs tagged" in failed.value.message and twin in failed.value.message
    assert runner.load_state(target) == killed


@pytest.mark.parametrize(("message", "state"), [
    ("reading EC2 Internet Gateway: no matching EC2 Internet Gateway found", "absent"),
    ("no matching EC2 Route Table found", "absent"),
    ("multiple EC2 Internet Gateways matched; use additional constraints to reduce matches "
     "to a single EC2 Internet Gateway", "unknown"),
    ("UnauthorizedOperation: You are not authorized to perform this operation.", "unknown"),
])
def test_aws_single_result_lookups_mean_absent_only_when_nothing_matched(
        monkeypatch: pytest.MonkeyPatch, message: str, state: str) -> None:
    from automation.engine import recovery

    def failing(p: PendingCreate, invoke: Any) -> Answer:
        raise RuntimeError(message)

    monkeypatch.setattr(recovery, "_lookup_aws_network", failing)
    p = PendingCreate(urn="urn:pulumi:s::anycloud::igw::igw",
                      type="aws:ec2/internetGateway:InternetGateway", custom=True,
                      inputs={"tags": {"anycloud.sh/node-pool": "np-1"}})
    assert p.kind == "cloud"
    assert recovery.lookup_cloud(p, invoke=None).state == state


def test_a_gcp_resource_is_read_by_the_id_its_name_and_project_make() -> None:
    def p(type_: str, **inputs: Any) -> PendingCreate:
        return PendingCreate(urn=f"urn:pulumi:s::anycloud::{type_}::x", type=type_,
                             custom=True, inputs=inputs)

    fw = p("gcp:compute/firewall:Firewall", name="anycloud-np-1-allow-egress")
    assert fw.kind == "cloud-read"
    assert fw.gcp_id("my-project") == (
        "projects/my-project/global/firewalls/anycloud-np-1-allow-egress")
    assert p("gcp:compute/network:Network", name="n").gcp_id("p") == "projects/p/global/networks/n"
    assert p("gcp:compute/subnetwork:Subnetwork", name="s", region="us-central1").gcp_id(
        "p") == "projects/p/regions/us-central1/subnetworks/s"
    assert fw.gcp_id(None) is None  # no project: unresolved, never guessed
    out = settle([fw], set(), lookup_cloud=lambda _: {}, lookup_objects=lambda _: {},
                 project=None)
    assert not out.complete and "GCP project" in out.describe()


def test_a_read_that_fails_naming_nothing_is_tried_once_more() -> None:
    # A read changes nothing, and one may fail for a moment under load (CI: a scratch-stack
    # read of a RuntimeClass failed once with an empty message): the second answer counts;
    # two such failures leave the object unknown, named by the failure's type when it
    # says nothing.
    from automation.engine.recovery import LOOKUPS_OUTPUT, PendingCreate, read_each

    p = PendingCreate(urn="urn:pulumi:s::anycloud::kubernetes:node.k8s.io/v1:RuntimeClass::n",
                      type="kubernetes:node.k8s.io/v1:RuntimeClass", custom=True, inputs={})
    calls: list[int] = []

    def flaky(items: list[tuple[PendingCreate, str]]) -> dict[str, Any]:
        calls.append(len(items))
        if len(calls) == 1:
            raise EngineFailed("")
        return {LOOKUPS_OUTPUT: {p.urn: {"state": "found", "id": "nvidia"}}}

    found = read_each([(p, "nvidia")], flaky, EngineFailed)
    assert (found[p.urn].state, found[p.urn].id, calls) == ("found", "nvidia", [1, 1])

    def failing(items: list[tuple[PendingCreate, str]]) -> dict[str, Any]:
        calls.append(len(items))
        raise EngineFailed("")

    calls.clear()
    unknown = read_each([(p, "nvidia")], failing, EngineFailed)
    assert (unknown[p.urn].state, unknown[p.urn].detail, calls) == (
        "unknown", "EngineFailed", [1, 1])


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_replacement_left_in_flight_is_found_beside_the_vm_it_replaces(
        tmp_path: Path, provider: str) -> None:
    """A VM replaced create-before-delete (a new bootstrap token) with the engine killed once
    the cloud bought the new one: the state holds the old VM under the URN and the new one's
    create in flight. Clearing the record as "already held" left the new VM running with
    nothing to delete it (two VMs for one attempt, found by the real engine's crash test).
    It is looked up with the held VM excluded: on AWS the new instance is imported and the
    old one marked for the next update to delete; GCP and Azure name a VM by its attempt, so
    only the held one can answer, and the record is cleared."""
    cloud = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(provider), "at-1")
    runner.up(target)
    p = vm_creates(runner, target, provider)["at-1"]
    (old,) = cloud.vms.values()
    if provider == "aws":  # the replacement AWS bought: another instance, same attempt tag
        new = type(old)(**{**old.__dict__, "id": "i-0new00000000000000"})
        cloud.vms[new.id] = new

    def lookup(some: list[PendingCreate]) -> dict[str, Answer]:
        return look_up(cloud, target, some)[0]

    held = {"urn": p.urn, "type": p.type, "custom": True, "id": old.id, "inputs": {}}
    deployment = {"resources": [held],
                  "pending_operations": [{"type": "creating", "resource": {
                      "urn": p.urn, "type": p.type, "custom": True, "inputs": dict(p.inputs)}}]}
    outcome = settle([p], {p.urn}, lookup_cloud=lookup, lookup_objects=lambda _: {},
                     recorded_ids={p.urn: [old.id]})
    after = adopted(deployment, outcome)

    assert after["pending_operations"] == []
    if provider == "aws":
        assert outcome.imported == [(p.urn, new.id)]
        assert [(r["id"], r.get("delete", False)) for r in after["resources"]] == [
            (old.id, True), (new.id, False)]
    else:
        assert outcome.cleared == [p.urn] and after["resources"] == [held]
    # Without the held ids (the mock engine's own records), the record is cleared unlooked.
    assert settle([p], {p.urn}, lookup_cloud=lambda _: {}, lookup_objects=lambda _: {}
                  ).cleared == [p.urn]
