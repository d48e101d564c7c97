"""The Automation API adapter: options, plugins, error mapping, and the missing engine."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from automation.engine.errors import EngineFailed, EngineMissing, StackLocked, StackMissing
from automation.engine.pulumi_driver import (
    AutomationRunner,
    plugins_for,
    policy_pack,
    policy_pack_dir,
    workspace_options,
)
from automation.engine.runner import StackKind, StackTarget
from automation.engine.secrets import state_settings
from automation.errors import InvalidInput
from stacks.config import (
    AttemptSpec,
    CloudCredentialRef,
    ClusterAddonsStackConfig,
    ClusterRef,
    NodePoolStackConfig,
)

CLUSTER = ClusterRef(id="cl-1", server_url="https://203.0.113.10:6443", ca_sha256="ab" * 32,
                     kubeconfig_path="/etc/anycloud/kubeconfig.yaml")


def pool_target(provider: str = "aws") -> StackTarget:
    region, vm = {"aws": ("us-east-1", "m7i.large"), "gcp": ("us-central1", "n2-standard-4"),
                  "azure": ("eastus", "Standard_D4s_v5")}[provider]
    cred = {"aws": {"profile": "team"}, "gcp": {"project": "p-123456", "key_file": "/k.json"},
            "azure": {"subscription_id": "s", "tenant_id": "t", "client_id": "c"}}[provider]
    config = NodePoolStackConfig(
        pool_id="np-1", pool_name="cpu", cluster=CLUSTER,
        credential=CloudCredentialRef(provider=provider, **cred),  # type: ignore[arg-type]
        provider=provider, region=region, zone=None, vm_type=vm,  # type: ignore[arg-type]
        attempts=(AttemptSpec(id="at-1"),),
    )
    return StackTarget(kind=StackKind.NODE_POOL, key="np-1", config=config)


def test_workspace_options_persistent_dir_backend_and_secrets(tmp_path: Path) -> None:
    state = state_settings(tmp_path, {})
    opts = workspace_options(pool_target(), tmp_path, state)
    assert opts.work_dir == str(tmp_path / "stacks" / "node-pool-np-1")
    assert Path(opts.work_dir).is_dir()
    assert opts.project_settings.name == "anycloud"
    assert opts.project_settings.runtime == "python"
    assert opts.project_settings.backend.url == f"file://{tmp_path / 'state'}?metadata=skip"
    assert opts.secrets_provider == "passphrase"
    assert set(opts.env_vars) == {"PULUMI_CONFIG_PASSPHRASE_FILE", "PULUMI_PYTHON_CMD"}
    assert opts.env_vars["PULUMI_PYTHON_CMD"] == sys.executable
    assert not [k for k in opts.env_vars if k.endswith("SKIP_CHECKPOINTS")]  # crash record kept


@pytest.mark.parametrize(("provider", "cloud_plugin"), [
    ("aws", "aws"), ("gcp", "gcp"), ("azure", "azure-native"),
])
def test_plugins_pinned_to_the_installed_sdks(provider: str, cloud_plugin: str) -> None:
    from importlib.metadata import version

    pins = plugins_for(pool_target(provider), {})
    assert set(pins) == {cloud_plugin, "kubernetes", "random"}
    assert pins["kubernetes"] == "v" + version("pulumi_kubernetes")
    addons = StackTarget(kind=StackKind.CLUSTER_ADDONS, key="cl-1",
                         config=ClusterAddonsStackConfig(cluster=CLUSTER))
    assert set(plugins_for(addons, {})) == {"kubernetes"}


def test_plugin_versions_named_in_the_environment_win() -> None:
    env = {"ANYCLOUD_PULUMI_PLUGINS": "kubernetes=4.25.0-alpha.1768448096, random=v4.16.0"}
    pins = plugins_for(pool_target("aws"), env)
    assert pins["kubernetes"] == "v4.25.0-alpha.1768448096"
    assert pins["random"] == "v4.16.0"
    assert pins["aws"].startswith("v7.")  # not named: the SDK's own


@pytest.mark.parametrize("raw", ["kubernetes", "kubernetes=latest", "k8s=4.1.0",
                                 "kubernetes=4.1.0;aws=7.0.0"])
def test_a_bad_plugin_list_names_the_variable_and_the_rule(raw: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        plugins_for(pool_target("aws"), {"ANYCLOUD_PULUMI_PLUGINS": raw})
    assert caught.value.field == "ANYCLOUD_PULUMI_PLUGINS"
    assert "name=version pairs" in str(caught.value)


def test_policy_pack_dir_is_a_pack_with_an_executable_launcher() -> None:
    import os

    assert (policy_pack_dir() / "PulumiPolicy.yaml").is_file()
    launcher = Path(policy_pack())
    assert launcher.parent == policy_pack_dir()
    assert os.access(launcher, os.X_OK)


@pytest.mark.parametrize(("raised", "expected", "text"), [
    (auto.ConcurrentUpdateError(auto.CommandResult(
        "", "error: the stack is currently locked by 1 lock(s)", 255)),
     StackLocked, "anycloud node-pool unlock np-1"),
    (auto.StackNotFoundError(auto.CommandResult("", "no stack named 'x'", 255)),
     StackMissing, "does not exist"),
    (auto.CommandError(auto.CommandResult(
        "", "error: update failed\n  aws:ec2:Instance vm: InsufficientInstanceCapacity", 255)),
     EngineFailed, "InsufficientInstanceCapacity"),
    (FileNotFoundError(2, "No such file or directory", "pulumi"), EngineMissing,
     "get.pulumi.com"),
])
def test_error_mapping(tmp_path: Path, raised: Exception, expected: type, text: str) -> None:
    runner = AutomationRunner(tmp_path, environ={})
    with pytest.raises(expected) as err, runner._errors(pool_target()):
        raise raised
    assert text in err.value.message


def test_without_the_cli_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A PATH with no pulumi on it, whether or not this machine has the engine installed.
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    runner = AutomationRunner(tmp_path, environ={"PATH": str(bare)})
    with pytest.raises(EngineMissing) as err:
        runner.preview(pool_target())
    assert "`pulumi` command" in err.value.message and "--engine mock" in err.value.message
    assert err.value.exit_code == 1


def test_pending_creates_are_found_in_an_exported_deployment() -> None:
    from automation.engine.pulumi_driver import pending_creates

    vm = "urn:pulumi:node-pool-np-1::anycloud::anycloud:vm:AwsPoolVM$aws:ec2/instance:Instance::vm"
    deployment = {
        "resources": [],
        "pending_operations": [
            {"resource": {"urn": vm, "type": "aws:ec2/instance:Instance"}, "type": "creating"},
            {"resource": {"urn": "urn:x::y"}, "type": "updating"},
        ],
    }
    assert pending_creates(deployment) == [vm]
    assert pending_creates({"resources": []}) == []


def test_up_refuses_to_run_over_pending_creates_it_cannot_look_up(tmp_path: Path) -> None:
    """A create in flight with no lookup (nothing anycloud makes: a bucket) stops the run,
    naming it, and nothing in the state changes (crash recovery:
    ``automation.engine.recovery``)."""
    bucket = "urn:pulumi:s::anycloud::aws:s3/bucket:Bucket::bucket"

    class Exported:
        deployment = {"pending_operations": [
            {"resource": {"urn": bucket, "type": "aws:s3/bucket:Bucket", "custom": True},
             "type": "creating"}]}

    class Stack:
        def export_stack(self) -> Exported:
            return Exported()

        def import_stack(self, _: object) -> None:
            raise AssertionError("the state was changed")

    with pytest.raises(EngineFailed) as err:
        AutomationRunner(tmp_path)._settle_pending_creates(pool_target(), Stack(), None)
    assert err.value.code == "PENDING_CREATES"
    assert f"UNRESOLVED {bucket}: no lookup for aws:s3/bucket:Bucket" in err.value.message
    assert "Nothing was changed" in err.value.message


def test_adopt_that_cannot_tell_changes_nothing(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Adopting a lost state imports all or nothing: one VM the lookup cannot tell about
    (two instances carry its attempt tag) refuses the whole adopt, naming it, before any
    resource is made or imported (the real engine's adopt: ``test_real_engine.py``)."""
    from types import SimpleNamespace

    from automation.engine.recovery import Answer

    stack_urn = "urn:pulumi:node-pool-np-1::anycloud::pulumi:pulumi:Stack::anycloud-np-1"
    vm = "urn:pulumi:node-pool-np-1::anycloud::aws:ec2/instance:Instance::vm-at-1"
    made: list[str] = []

    def create(urn: str, type_: str, custom: bool, inputs: dict[str, object]) -> object:
        new = SimpleNamespace(urn=urn, type=type_, custom=custom, inputs=inputs,
                              parent=stack_urn if urn != stack_urn else None, provider=None)
        return SimpleNamespace(resource_pre_event=SimpleNamespace(
            metadata=SimpleNamespace(op="create", new=new)))

    class Stack:
        def export_stack(self) -> object:
            return SimpleNamespace(deployment={"resources": []})

        def preview(self, on_event: object, color: str) -> None:
            assert callable(on_event)
            on_event(create(stack_urn, "pulumi:pulumi:Stack", False, {}))
            on_event(create(vm, "aws:ec2/instance:Instance", True,
                            {"tags": {"anycloud.sh/attempt": "at-1"}}))

        def up(self, **_: object) -> None:
            made.append("up")

        def import_stack(self, _: object) -> None:
            made.append("import")

    runner = AutomationRunner(tmp_path, environ={})
    monkeypatch.setattr(runner, "_stack", lambda target, tmp=None: Stack())
    monkeypatch.setattr(runner, "_lookup_cloud", lambda target, some, tmp: {
        vm: Answer("unknown", detail="2 instances carry anycloud.sh/attempt=at-1: i-1, i-2")})
    with pytest.raises(EngineFailed) as err:
        runner.adopt(pool_target())
    assert err.value.code == "ADOPT_FAILED" and made == []
    assert f"UNRESOLVED {vm}: the aws lookup by attempt at-1 could not tell: 2 instances" \
        in err.value.message
    assert "Nothing was changed" in err.value.message


@pytest.mark.parametrize(("kind", "hint"), [
    (StackKind.NODE_POOL, "anycloud node-pool unlock np-1"),
    (StackKind.INGRESS_RELEASE, "anycloud node-pool unlock np-1"),  # the pool unlocks both
    (StackKind.CLUSTER_ADDONS, "anycloud cluster unlock np-1"),
])
def test_a_locked_stack_names_the_command_that_unlocks_it(tmp_path: Path, kind: StackKind,
                                                          hint: str) -> None:
    target = pool_target().model_copy(update={"kind": kind})
    locked = auto.ConcurrentUpdateError(auto.CommandResult("", "locked by 1 lock(s)", 255))
    with pytest.raises(StackLocked) as err, AutomationRunner(tmp_path, environ={})._errors(target):
        raise locked
    assert hint in err.value.message


def test_adopt_in_rounds_puts_the_state_back_when_a_later_round_cannot_tell(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A route-table association names a subnet the preview cannot know until the subnet is
    imported: it waits a round. When its own lookup then cannot tell, the state the first
    round changed is put back as it was (one import of the export taken before)."""
    from types import SimpleNamespace

    from automation.engine.recovery import UNKNOWN_VALUE, Answer

    stack_urn = "urn:pulumi:node-pool-np-1::anycloud::pulumi:pulumi:Stack::anycloud-np-1"
    subnet = "urn:pulumi:node-pool-np-1::anycloud::aws:ec2/subnet:Subnet::subnet"
    rta = ("urn:pulumi:node-pool-np-1::anycloud::aws:ec2/routeTableAssociation:"
           "RouteTableAssociation::rta")
    calls: list[tuple[str, object]] = []
    looked_up: list[list[str]] = []

    def create(urn: str, type_: str, inputs: dict[str, object]) -> object:
        new = SimpleNamespace(urn=urn, type=type_, custom=True, inputs=inputs, parent=stack_urn,
                              provider=None)
        return SimpleNamespace(resource_pre_event=SimpleNamespace(
            metadata=SimpleNamespace(op="create", new=new)))

    class Stack:
        imported = False

        def export_stack(self) -> object:
            if not self.imported:  # the lost state, as adopt found it
                return SimpleNamespace(deployment={"resources": []})
            return SimpleNamespace(deployment={"resources": [{"urn": stack_urn},
                                                             {"urn": subnet}]})

        def preview(self, on_event: Any, color: str) -> None:
            if not self.imported:
                on_event(create(subnet, "aws:ec2/subnet:Subnet", {"tags": {"a": "b"}}))
            known = "subnet-1" if self.imported else UNKNOWN_VALUE
            on_event(create(rta, "aws:ec2/routeTableAssociation:RouteTableAssociation",
                            {"subnetId": known, "routeTableId": "rtb-1"}))

        def import_stack(self, exported: Any) -> None:
            self.imported = any(r["urn"] == subnet for r in exported.deployment["resources"])
            calls.append(("import", "round" if self.imported else "before"))

        def refresh(self, **_: object) -> None:
            calls.append(("refresh", None))

        def up(self, **_: object) -> None:
            calls.append(("up", None))

    stack = Stack()

    def lookup(target: object, some: list[Any], tmp: object) -> dict[str, Answer]:
        looked_up.append([p.urn for p in some])
        return {p.urn: Answer("found", "subnet-1") if p.urn == subnet
                else Answer("unknown", detail="throttled") for p in some}

    runner = AutomationRunner(tmp_path, environ={})
    monkeypatch.setattr(runner, "_stack", lambda target, tmp=None: stack)
    monkeypatch.setattr(runner, "_lookup_cloud", lookup)
    with pytest.raises(EngineFailed) as err:
        runner.adopt(pool_target())
    assert err.value.code == "ADOPT_FAILED" and "throttled" in err.value.message
    assert looked_up == [[subnet], [rta]]  # the association waited for its subnet
    assert calls[0] == ("import", "round") and calls[-1] == ("import", "before")
