"""Node-pool stacks on the real Pulumi engine: the CLI built from source, the kubernetes
plugin built from source writing bootstrap-token Secrets to the real API server, and the
stand-in aws/gcp/azure-native/random plugins (``automation.simulators.standin``) sending
every cloud call to a simulated cloud this test process serves.

What only this proves: the engine's own steps over a node pool -- its checkpoints and
pending operations, its diff answers, refresh and invokes through a plugin -- and
anycloud's recovery lookups run by the engine, not by the mock engine's imitation of it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from automation.clock import ManualClock
from automation.devcluster.control_plane import ControlPlane
from automation.engine.mock.force_new import rules_for
from automation.engine.processes import end_session
from automation.engine.pulumi_driver import AutomationRunner, pending_creates
from automation.engine.runner import StackKind, StackTarget
from automation.kube.probe import sha256_hex
from automation.simulators.cloud import CloudSimulator, SimVm
from automation.simulators.cloud_api import CloudService
from automation.simulators.standin.install import install, standin_environment
from stacks.config import AttemptSpec, CloudCredentialRef, ClusterRef, NodePoolStackConfig

pytestmark = [pytest.mark.kube, pytest.mark.engine, pytest.mark.slow]

REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
VM_TYPE = {"aws": "m7i.large", "gcp": "n2-standard-4", "azure": "Standard_D4s_v5"}
CREDENTIAL = {"aws": {"profile": "team"}, "gcp": {"project": "p-123456", "key_file": "/k.json"},
              "azure": {"subscription_id": "s-1", "tenant_id": "t", "client_id": "c"}}


class StandIn:
    def __init__(self, root: Path, plane: ControlPlane, environ: dict[str, str]) -> None:
        self.cloud = CloudSimulator(ManualClock(datetime(2026, 12, 1, tzinfo=UTC)),
                                    root / "cloud.json")
        self.service = CloudService(self.cloud)
        self.engine_env = {**self.service.env, **standin_environment(environ)}
        self.runner = AutomationRunner(root / "home", engine_env=self.engine_env)
        self.plane = plane
        self.issued = datetime.now(UTC).replace(microsecond=0)  # the tokens' issue time

    def target(self, provider: str, attempts: int, pool: str = "np-1",
               vm_type: str | None = None, joined: bool = False) -> StackTarget:
        """``joined``: every attempt's Node has joined (its token consumed: the VM's user
        data no longer carries one, and changes to it are ignored)."""
        cluster = ClusterRef(id="cl-standin", server_url="https://203.0.113.10:6443",
                             ca_sha256=sha256_hex(self.plane.ca_pem),
                             kubeconfig_path=str(self.plane.kubeconfig))
        config = NodePoolStackConfig(
            pool_id=pool, pool_name=pool, cluster=cluster,
            credential=CloudCredentialRef(provider=provider, **CREDENTIAL[provider]),  # type: ignore[arg-type]
            provider=provider, region=REGION[provider], vm_type=vm_type or VM_TYPE[provider],  # type: ignore[arg-type]
            attempts=tuple(AttemptSpec(id=f"at-{pool}-{i}", token_issued_at=self.issued,
                                       needs_token=not joined) for i in range(attempts)))
        return StackTarget(kind=StackKind.NODE_POOL, key=pool, config=config)

    def running(self) -> list[SimVm]:
        return [v for v in self.cloud.vms.values() if v.state == "running"]

    def live_network(self) -> list[str]:
        return sorted(r["type"] for r in self.cloud.resources.values() if r["state"] == "live")


@pytest.fixture
def standin(control_plane: ControlPlane, engine_env: dict[str, str],
            tmp_path: Path) -> Iterator[StandIn]:
    install(engine_env)
    world = StandIn(tmp_path, control_plane, engine_env)
    yield world
    world.service.close()


def _tokens(plane: ControlPlane, pool: str) -> list[str]:
    """The bootstrap-token Secrets of ``pool`` on the API server."""
    done = plane.kubectl("get", "secrets", "-n", "kube-system", "-l",
                         f"anycloud.sh/node-pool={pool}", "-o", "json")
    return sorted(item["metadata"]["name"] for item in json.loads(done.stdout)["items"])


def test_a_type_change_previews_as_the_provider_answers(standin: StandIn) -> None:
    """``preview --diff`` on the real engine: an AWS instance type is changed in place
    (stop, modify, start), an image change replaces the VM (force-new ``ami``)."""
    target = standin.target("aws", attempts=1, pool="np-diff")
    standin.runner.up(target)
    bigger = standin.target("aws", attempts=1, pool="np-diff", vm_type="m7i.xlarge")
    shown = standin.runner.preview(bigger, diff=True)
    assert shown.summary.update == 1 and shown.summary.replace == 0
    assert 'instanceType: "m7i.large" => "m7i.xlarge"' in shown.diff
    standin.runner.destroy(target)


DRIVER = """
import sys
from pathlib import Path
from automation.engine.pulumi_driver import AutomationRunner
from automation.engine.runner import StackKind, StackTarget
from stacks.config import NodePoolStackConfig
import json
config = NodePoolStackConfig.model_validate_json(Path(sys.argv[2]).read_text())
target = StackTarget(kind=StackKind.NODE_POOL, key=config.pool_id, config=config)
AutomationRunner(Path(sys.argv[1]), engine_env=json.loads(sys.argv[3])).up(target)
"""


def _pending(home: Path, target: StackTarget) -> list[str]:
    path = home / "state" / ".pulumi" / "stacks" / "anycloud" / f"{target.stack_name}.json"
    try:
        latest = json.loads(path.read_text())["checkpoint"].get("latest") or {}
    except (OSError, ValueError, KeyError):
        return []
    return pending_creates(latest)


def test_an_up_killed_once_the_cloud_bought_a_vm_buys_nothing_twice(
        standin: StandIn, engine_env: dict[str, str], tmp_path: Path) -> None:
    """SIGKILL of the process driving the engine, the ``pulumi`` CLI and its plugins (a
    crashed machine) the moment the cloud has bought the first VM and before the engine
    hears of it: the state keeps the create in flight. The next run is refused as locked;
    once unlocked, anycloud's recovery looks the VM up by its attempt tag through the
    stand-in's ``ec2.getInstances`` invoke, run by the real engine, imports it, and the
    update buys only what was never bought."""
    target = standin.target("aws", attempts=2, pool="np-crash")
    spec = tmp_path / "config.json"
    spec.write_text(target.config.model_dump_json())
    home = standin.runner.home
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(home), str(spec), json.dumps(standin.engine_env)],
        env=engine_env, start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    killed: list[str] = []

    def crash(vm: SimVm) -> None:
        if not killed:
            killed.append(vm.attempt_id)
            end_session(proc.pid)

    standin.cloud.on_vm_created.append(crash)
    proc.wait(timeout=180)
    standin.cloud.on_vm_created.remove(crash)
    assert killed, proc.stderr.read().decode() if proc.stderr else ""
    in_flight = _pending(home, target)
    assert any(urn.endswith(f"vm-{killed[0]}-instance") for urn in in_flight), in_flight
    bought = [a for verb, a in standin.cloud.journal if verb == "create"]
    assert bought.count(killed[0]) == 1

    # The killed run's lock (this host, a pid that is gone) is removed by the next run.
    standin.runner.up(target)
    assert _pending(home, target) == []
    bought = [a for verb, a in standin.cloud.journal if verb == "create"]
    assert sorted(bought) == ["at-np-crash-0", "at-np-crash-1"]  # each VM bought once
    assert len(standin.running()) == 2
    assert standin.runner.preview(target).summary.changes == 0
    standin.runner.destroy(target)
    assert standin.running() == []


def _lose_the_state_and_adopt(standin: StandIn, target: StackTarget) -> StackTarget:
    """Issue 34's scenario on the real engine: the ledger saw a ready pool applied (its
    Nodes joined), the backend lost its state. Everything that would act refuses with
    STATE_MISSING and buys nothing; adopt finds the network (AWS by its tags, Azure by name,
    GCP by the id its name makes) and each VM by its attempt through the stand-in's invokes
    and reads, and imports them in rounds (an AWS route-table association once its subnet
    and table are known). Returns the target as the ledger sees it."""
    import shutil

    from automation.engine.expectation import StateMissing
    from automation.engine.runner import Expected

    seen = target.model_copy(update={"expect": Expected(
        applied=True, attempts=tuple(a.id for a in target.config.attempts))})
    vms = {v.id for v in standin.running()}
    network = len(standin.live_network())
    shutil.rmtree(standin.runner.home / "state")
    for act in (standin.runner.up, standin.runner.destroy):
        with pytest.raises(StateMissing) as err:
            act(seen)
        assert err.value.code == "STATE_MISSING"
    assert {v.id for v in standin.running()} == vms  # nothing bought, nothing released

    adopted = standin.runner.adopt(seen)
    # Every VM and the whole network imported, nothing left to create.
    assert (adopted.summary.same, adopted.summary.create) == (len(vms) + network, 0), \
        adopted.diff
    planned = standin.runner.preview(seen).summary
    assert (planned.create, planned.replace, planned.delete) == (0, 0, 0), planned
    assert {v.id for v in standin.running()} == vms
    return seen


def test_the_policy_pack_refuses_a_violating_pool_inside_the_real_preview(
        standin: StandIn) -> None:
    """The pack, loaded by the engine's own ``preview --policy-pack``, sees the pool's VM as
    the engine registers it and stops an arm64 type: nothing is bought."""
    target = standin.target("aws", attempts=1, pool="np-policy", vm_type="m7g.large")
    result = standin.runner.preview(target)
    assert [(f.policy, f.enforcement) for f in result.mandatory_violations] == [
        ("vm-type-x86-64", "mandatory")]
    assert "m7g.large" in result.mandatory_violations[0].message
    refused = standin.runner.up(target)
    assert refused.mandatory_violations and standin.cloud.vms == {}


def _engine_blind(value: Any, type_: str) -> Any:
    """A console value with what differs by engine alone left out: an autoname (the real
    engine's provider sends the name its check drew to the cloud; under the mock engine the
    cloud sees only the program's inputs) and a number's spelling (1 or 1.0)."""
    if isinstance(value, dict):
        autoname = rules_for(type_).name_property
        return {k: _engine_blind(v, type_) for k, v in value.items()
                if not (k == autoname and isinstance(v, str)
                        and re.search(r"-?[0-9a-f]{7,8}$", v))}
    if isinstance(value, list):
        return [_engine_blind(v, type_) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# A known difference (README, "Node pools on the real engine"): a map holding one secret
# value is secret as a whole under the mock engine, only that value under the real one, so
# the console shows a GCP VM's non-secret metadata keys, and an Azure VM's osProfile without
# its password and custom data, only after a real engine's create.
KNOWN_DIFFERENCES = {"gcp:compute/instance:Instance": ("metadata",),
                     "azure-native:compute:VirtualMachine": ("osProfile",)}


def _inventory(cloud: CloudSimulator) -> list[tuple[str, str, str]]:
    """What the cloud holds, engine-blind: each live resource's type, its VM's attempt (or
    ``-``) and its inputs as the console shows them (no secret)."""
    vms = {v.id: v for v in cloud.vms.values() if v.state == "running"}
    live = [rid for rid, r in cloud.resources.items() if r["state"] == "live"]
    types = {**{rid: cloud.resources[rid]["type"] for rid in live},
             **{rid: vm.resource_type for rid, vm in vms.items()}}
    return sorted(
        (types[rid], vms[rid].attempt_id if rid in vms else "-",
         json.dumps(_engine_blind({k: v for k, v in cloud.live[rid].items()
                                   if k not in KNOWN_DIFFERENCES.get(types[rid], ())},
                                  types[rid]), sort_keys=True))
        for rid in types)


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_pools_life_leaves_the_same_cloud_on_the_mock_engine_and_the_real_one(
        standin: StandIn, provider: str, tmp_path: Path) -> None:
    """A pool's life on the real engine, and the differential test: one scenario -- a pool
    of 2, grown to 3, a service opening its port (the network updated in place), back to 1
    that has joined, its state lost and adopted, destroyed -- on the mock engine and on the
    real engine (the mock engine's adopt has tests of its own), each over a simulated cloud
    of its own. After every step both clouds hold the same resources with the same inputs, and
    both engines' outputs (what the reconciler records) are the same; every difference would
    be a defect of the imitation (or a known difference named in the README)."""
    from automation.engine.mock.runner import MockEngineRunner

    mock_cloud = CloudSimulator(ManualClock(datetime(2026, 12, 1, tzinfo=UTC)),
                                tmp_path / "mock-cloud.json")
    mock = MockEngineRunner(tmp_path / "mock-home", cloud=mock_cloud)
    pool = f"np-life-{provider}"
    steps = [standin.target(provider, attempts=n, pool=pool) for n in (2, 3)]
    serving = steps[-1].config.model_copy(update={"hosts_service": True})
    steps.append(steps[-1].model_copy(update={"config": serving}))
    # Back to 1 VM, whose Node has joined (its token consumed, its user data kept).
    joined = standin.target(provider, attempts=1, pool=pool, joined=True).config
    one = serving.model_copy(update={"attempts": joined.attempts})
    steps.append(steps[-1].model_copy(update={"config": one}))
    for i, target in enumerate(steps):
        real_result = standin.runner.up(target)
        mock_result = mock.up(target)
        assert real_result.engine == "pulumi" and mock_result.engine == "mock"
        real_inv, mock_inv = _inventory(standin.cloud), _inventory(mock_cloud)
        assert real_inv == mock_inv, f"step {i}: " + "\n".join(
            f"real only {r}" for r in real_inv if r not in mock_inv) + "\n" + "\n".join(
            f"mock only {r}" for r in mock_inv if r not in real_inv)
        # What the reconciler records from each engine's outputs: the same VMs, addresses,
        # images and network.
        assert real_result.outputs == mock_result.outputs, f"step {i}"
        attempts = [a.id for a in target.config.attempts]
        assert sorted(v.attempt_id for v in standin.running()) == attempts
        # Each VM's bootstrap token, written by the real kubernetes plugin, until it joined.
        waiting = [a for a in target.config.attempts if a.needs_token]
        assert len(_tokens(standin.plane, pool)) == len(waiting), f"step {i}"

    last = steps[-1]
    vm = standin.running()[0]
    assert standin.runner.lookup_vms(last, [vm.attempt_id]) == {vm.attempt_id: "running"}
    # Converged: the engine's own diff, through the stand-in's Diff, finds nothing to do.
    assert standin.runner.preview(last).summary.changes == 0
    # A person changes the VM's type at the console: the refresh reads it back as drift.
    standin.cloud.console_change_vm_type(vm.attempt_id, "weird.type")
    prop = {"aws": "instanceType", "gcp": "machineType", "azure": "hardwareProfile"}[provider]
    expected = [("update", True)]
    if provider == "aws":  # and opens SSH on the pool's security group
        (group,) = [rid for rid, r in standin.cloud.resources.items()
                    if r["type"] == "aws:ec2/securityGroup:SecurityGroup" and r["state"] == "live"]
        standin.cloud.console_add_rule(group, "ingress", {
            "protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]})
        expected = [("update", True), ("update", False)]
    drift = standin.runner.check_drift(last)
    assert sorted((d.op, any(p.startswith(prop) for p in d.properties)) for d in drift) == sorted(
        expected), drift
    if provider == "aws":
        (rule,) = [d for d in drift if d.type == "aws:ec2/securityGroup:SecurityGroup"]
        assert any(p.startswith("ingress") for p in rule.properties), rule

    seen = _lose_the_state_and_adopt(standin, last)
    standin.runner.destroy(seen)
    mock.destroy(last)
    assert _inventory(standin.cloud) == _inventory(mock_cloud) == []
    assert standin.running() == [] and _tokens(standin.plane, pool) == []
