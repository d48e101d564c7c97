"""The mock runner diffs like the engine: replace vs update, ignoreChanges, the order of a
delete-before-replace, and previews that do not know what does not exist yet."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pulumi
import pytest

from automation.engine.errors import EngineFailed
from automation.engine.mock.diff import covers, decide, format_path, parse_path
from automation.engine.mock.model import UNKNOWN
from automation.engine.mock.providers import MockProviders
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import ProgressEvent, StackKind, StackTarget
from stacks.config import AttemptSpec
from tests.automation.engine.test_pulumi_driver import pool_target

ISSUED = datetime(2026, 6, 1, tzinfo=UTC)


def pool(provider: str = "aws", *, zone: str | None = None, generation: int = 0,
         image: str | None = None, needs_token: bool = True,
         ids: tuple[str, ...] = ("at-1",)) -> StackTarget:
    target = pool_target(provider)
    attempts = tuple(AttemptSpec(id=i, token_issued_at=ISSUED, token_generation=generation,
                                 image=image, needs_token=needs_token) for i in ids)
    config = target.config.model_copy(update={"zone": zone, "attempts": attempts})
    return target.model_copy(update={"config": config})


def ops_of(events: list[ProgressEvent], name: str) -> list[str]:
    return [e.op or "" for e in events if e.kind == "resource" and e.name == name]


@pytest.fixture
def runner(tmp_path: Path) -> MockEngineRunner:
    return MockEngineRunner(tmp_path, MockProviders())


# -- property paths -----------------------------------------------------------------------


def test_property_paths_round_trip_and_cover_their_descendants() -> None:
    path = parse_path('tags["anycloud.sh/attempt"]')
    assert path == ("tags", "anycloud.sh/attempt")
    assert format_path(path) == 'tags["anycloud.sh/attempt"]'
    assert parse_path("networkInterfaces[0].subnetwork") == ("networkInterfaces", 0,
                                                             "subnetwork")
    assert covers(parse_path("stringData"), parse_path("stringData.expiration"))
    assert not covers(parse_path("stringData.expiration"), parse_path("stringData"))
    assert covers(parse_path("networkInterfaces[*].subnetwork"),
                  parse_path("networkInterfaces[0].subnetwork"))
    assert covers(parse_path("*"), parse_path("keepers.generation"))


def test_decide_follows_options_and_provider_rules() -> None:
    salt = "s"
    old = {"leaves": {}, "inputs": {}}  # recorded, but every property now differs
    opts: dict[str, Any] = {}
    assert decide(None, "aws:ec2/instance:Instance", True, {}, opts, salt).op == "create"
    assert decide(old, "aws:ec2/instance:Instance", True, {"instanceType": "m7i.xlarge"},
                  opts, salt).op == "update"  # stop, modify, start: in place
    assert decide(old, "aws:ec2/instance:Instance", True, {"ami": "ami-2"},
                  opts, salt).op == "replace"
    # user data replaces only when user_data_replace_on_change is set
    assert decide(old, "aws:ec2/instance:Instance", True, {"userData": "x"},
                  opts, salt).op == "update"
    assert decide(old, "aws:ec2/instance:Instance", True,
                  {"userData": "x", "userDataReplaceOnChange": True}, opts, salt).op == "replace"
    # replaceOnChanges, then ignoreChanges winning over it
    rock = {"replaceOnChanges": ["tags"]}
    assert decide(old, "aws:ec2/vpc:Vpc", True, {"tags": {"a": "b"}}, rock, salt).op == "replace"
    ignored = {"replaceOnChanges": ["tags"], "ignoreChanges": ["tags"]}
    assert decide(old, "aws:ec2/vpc:Vpc", True, {"tags": {"a": "b"}}, ignored, salt).op == "same"
    # an unknown value counts as changed
    assert decide(old, "gcp:compute/instance:Instance", True, {"zone": UNKNOWN},
                  opts, salt).op == "replace"


# -- replace instead of update ------------------------------------------------------------


@pytest.mark.parametrize(("provider", "zone", "vm"), [
    ("aws", "us-east-1b", "vm-at-1-instance"),
    ("gcp", "us-central1-b", "vm-at-1-instance"),
])
def test_a_new_zone_previews_a_replacement_not_an_update(
    runner: MockEngineRunner, provider: str, zone: str, vm: str
) -> None:
    runner.up(pool(provider))
    events: list[ProgressEvent] = []
    result = runner.preview(pool(provider, zone=zone), diff=True, on_progress=events.append)
    assert result.summary.update == 0 and result.summary.replace >= 1
    assert "replace" in ops_of(events, vm)
    assert f"+- {'gcp:compute/instance:Instance' if provider == 'gcp' else 'aws:'}" in (
        result.diff)


def test_a_new_image_replaces_the_vm_and_up_gives_it_a_new_id(runner: MockEngineRunner) -> None:
    first = runner.up(pool(image="ami-0000000000000000a"))
    events: list[ProgressEvent] = []
    preview = runner.preview(pool(image="ami-0000000000000000b"), diff=True,
                             on_progress=events.append)
    assert preview.summary.replace == 1 and preview.summary.update == 0
    assert ops_of(events, "vm-at-1-instance") == ["create-replacement", "replace",
                                                  "delete-replaced"]
    assert "+- ami" in preview.diff
    second = runner.up(pool(image="ami-0000000000000000b"))
    assert second.summary.replace == 1
    old_vm = first.outputs["attempts"]["at-1"]["vmId"]
    assert second.outputs["attempts"]["at-1"]["vmId"] != old_vm
    assert runner.preview(pool(image="ami-0000000000000000b")).summary.changes == 0


def test_instance_type_updates_in_place(runner: MockEngineRunner) -> None:
    runner.up(pool())
    target = pool()
    bigger = target.model_copy(update={"config": target.config.model_copy(
        update={"vm_type": "m7i.2xlarge"})})
    result = runner.preview(bigger)
    assert result.summary.update == 1 and result.summary.replace == 0


def test_an_update_the_cloud_refuses_previews_but_fails_up(runner: MockEngineRunner) -> None:
    """azure-native updates a VM whose zones change; Azure refuses it."""
    runner.up(pool("azure"))
    preview = runner.preview(pool("azure", zone="2"), diff=True)
    assert preview.summary.update == 1 and preview.summary.replace == 0
    assert "refused in place" in preview.diff
    with pytest.raises(EngineFailed, match="PropertyChangeNotAllowed") as err:
        runner.up(pool("azure", zone="2"))
    assert err.value.code == "PROVIDER_ERROR"


# -- ignoreChanges ------------------------------------------------------------------------


def test_ignored_user_data_changes_nothing(runner: MockEngineRunner) -> None:
    """Once the Node exists the token is gone and the user data changes; the VM ignores it
    (``keep_user_data``): no replacement, and user data is not among the changes."""
    runner.up(pool())
    events: list[ProgressEvent] = []
    result = runner.preview(pool(needs_token=False), diff=True, on_progress=events.append)
    assert result.summary.replace == 0
    assert ops_of(events, "vm-at-1-instance") == ["update"]  # userDataReplaceOnChange flips
    lines = result.diff.splitlines()
    assert "    ~ userDataReplaceOnChange" in lines and "    ~ userData" not in lines
    runner.up(pool(needs_token=False))
    assert runner.preview(pool(needs_token=False)).summary.changes == 0


def _secret_program(expiration: str, token: str = "abc") -> Any:
    def program() -> None:
        import pulumi_kubernetes as k8s

        k8s.core.v1.Secret(
            "token",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"bootstrap-token-{token}",
                                                namespace="kube-system"),
            type="bootstrap.kubernetes.io/token",
            string_data={"token-id": token, "expiration": expiration},
            opts=pulumi.ResourceOptions(
                delete_before_replace=True,
                replace_on_changes=["metadata.name", "stringData"],
                ignore_changes=["stringData.expiration"],
            ),
        )
    return program


class _Program(StackTarget):
    """A target running an ad-hoc program (the config carries it)."""

    def program(self) -> Any:
        return self.config


def _target(program: Any) -> StackTarget:
    return _Program(kind=StackKind.CLUSTER_ADDONS, key="t", config=program)


def test_a_nested_ignored_path_wins_over_replace_on_changes_of_its_parent(
    runner: MockEngineRunner
) -> None:
    """The bootstrap token's options: replace on ``stringData``, ignore
    ``stringData.expiration``."""
    now = datetime(2026, 6, 1, tzinfo=UTC)
    runner.up(_target(_secret_program(now.isoformat())))
    later = (now + timedelta(minutes=5)).isoformat()
    assert runner.preview(_target(_secret_program(later))).summary.changes == 0
    runner.up(_target(_secret_program(later)))
    # the state keeps the recorded expiration: still nothing to do
    assert runner.preview(_target(_secret_program(later))).summary.changes == 0
    other = runner.preview(_target(_secret_program(later, token="xyz")))
    assert other.summary.replace == 1


# -- delete before replace ----------------------------------------------------------------


def test_delete_before_replace_orders_the_steps_and_counts_one_replace(
    runner: MockEngineRunner
) -> None:
    """A retry draws a new token: the Secret (deleteBeforeReplace) goes before its
    replacement exists; the random value and the VM are created first."""
    runner.up(pool())
    events: list[ProgressEvent] = []
    result = runner.preview(pool(generation=1), diff=True, on_progress=events.append)
    assert ops_of(events, "token-at-1-k8s-secret") == [
        "delete-replaced", "replace", "create-replacement"]
    assert ops_of(events, "token-at-1-random") == [
        "create-replacement", "replace", "delete-replaced"]
    # one replace each for the random value, the Secret and the VM (its user data)
    assert result.summary.replace == 3 and result.summary.delete == 0
    assert "(replace, delete before replace)" in result.diff
    events = []
    up = runner.up(pool(generation=1), on_progress=events.append)
    assert up.summary.replace == 3
    done = [e.op for e in events if e.state == "done" and e.name == "token-at-1-k8s-secret"]
    assert done == ["delete-replaced", "replace", "create-replacement"]


def test_gcp_named_resources_are_replaced_delete_first(runner: MockEngineRunner) -> None:
    """pulumi-terraform-bridge asks for delete-before-replace when a resource's autonamed
    ``name`` is set explicitly (our GCP VMs): the new VM needs the old one's name."""
    runner.up(pool("gcp"))
    events: list[ProgressEvent] = []
    runner.preview(pool("gcp", zone="us-central1-b"), on_progress=events.append)
    assert ops_of(events, "vm-at-1-instance") == [
        "delete-replaced", "replace", "create-replacement"]


# -- previews do not know what does not exist yet -----------------------------------------


def test_preview_of_a_new_pool_knows_no_ids_or_addresses(runner: MockEngineRunner) -> None:
    result = runner.preview(pool(), diff=True)
    assert result.summary.create > 0
    assert 'subnetId: "[unknown]"' in result.diff  # the subnet does not exist yet
    assert not re.search(r"\bi-[0-9a-f]{17}\b|\b198\.1[89]\.", result.diff)
    run = runner.evaluate(pool(), preview=True)
    vm = run.one("aws:ec2/instance:Instance")
    assert vm.id is None and vm.inputs["subnetId"] == UNKNOWN
    assert run.outputs["attempts"]["at-1"]["vmId"] == UNKNOWN
    assert run.outputs["attempts"]["at-1"]["publicIp"] == UNKNOWN
    # user data carries a token not drawn yet: the policy pack reports it not verified
    assert any(f.enforcement == "advisory" and "not verified" in f.message
               for f in result.policy)


def test_preview_after_up_knows_the_recorded_ids(runner: MockEngineRunner) -> None:
    up = runner.up(pool())
    state = runner.load_state(pool())
    vm_id = up.outputs["attempts"]["at-1"]["vmId"]
    assert any(r["id"] == vm_id for r in state["resources"].values())
    result = runner.preview(pool(ids=("at-1", "at-2")), diff=True)
    assert result.summary.create >= 3 and result.summary.same >= 10
    assert f'subnetId: "{state_subnet(state)}"' in result.diff  # the kept subnet's id
    run = runner.evaluate(pool(ids=("at-1", "at-2")), preview=True,
                          planner=_deployment(runner, pool()))
    attempts = run.outputs["attempts"]
    assert attempts["at-1"]["vmId"] == vm_id and attempts["at-2"]["vmId"] == UNKNOWN
    assert attempts["at-1"]["publicIp"] == up.outputs["attempts"]["at-1"]["publicIp"]


def _deployment(runner: MockEngineRunner, target: StackTarget) -> Any:
    from automation.engine.mock.runner import _Deployment

    return _Deployment(runner, target, runner.load_state(target), execute=False)


def state_subnet(state: dict[str, Any]) -> str:
    return next(r["id"] for r in state["resources"].values()
                if r["type"] == "aws:ec2/subnet:Subnet")


def test_state_keeps_no_secret_value(runner: MockEngineRunner, tmp_path: Path) -> None:
    runner.up(pool())
    text = (tmp_path / "mock-engine" / "node-pool-np-1.json").read_text()
    assert "#cloud-config" not in text and "K10" not in text
    state = runner.load_state(pool())
    vm = next(r for r in state["resources"].values() if r["type"] == "aws:ec2/instance:Instance")
    assert "userData" not in vm["inputs"] and "userData" in vm["leaves"]


# -- outputs the real providers return ------------------------------------------------------


def test_referenced_outputs_reach_the_resources_that_use_them(runner: MockEngineRunner) -> None:
    """azure-native returns ``name`` and GCP ``selfLink``: the subnet and VM that reference
    them get the values, not empty strings."""
    azure = runner.evaluate(pool("azure"))
    subnet = azure.one("azure-native:network:Subnet")
    vnet = azure.one("azure-native:network:VirtualNetwork")
    assert subnet.inputs["resourceGroupName"] == "anycloud-np-1"
    assert subnet.inputs["virtualNetworkName"] == vnet.outputs["name"] != ""
    vm = azure.one("azure-native:compute:VirtualMachine")
    nic = vm.inputs["networkProfile"]["networkInterfaceConfigurations"][0]
    assert nic["ipConfigurations"][0]["subnet"]["id"] == subnet.id
    assert subnet.id.endswith(f"/virtualNetworks/{vnet.outputs['name']}/subnets/"
                              f"{subnet.outputs['name']}")
    gcp = runner.evaluate(pool("gcp"))
    subnetwork = gcp.one("gcp:compute/subnetwork:Subnetwork")
    instance = gcp.one("gcp:compute/instance:Instance")
    assert subnetwork.outputs["selfLink"].startswith("https://www.googleapis.com/compute/v1/")
    assert instance.inputs["networkInterfaces"][0]["subnetwork"] == subnetwork.outputs["selfLink"]
