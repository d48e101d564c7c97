"""The simulated cloud's AWS VMs against moto's EC2, an EC2 written outside this repo.

Every other test of ``CloudSimulator`` checks it against what this repo believes AWS does.
Here the same scenario runs through boto3 against moto (in process, ``mock_aws``) and
through the simulator's socket (``cloud_api.call``, what the stand-in plugins use), and
both must agree on exactly what crash recovery (``recovery._lookup_aws``) relies on:

- RunInstances without a ClientToken buys a new instance on every call;
- a lookup by the ``anycloud.sh/attempt`` tag in the live states finds that attempt's
  instances and no other attempt's;
- after TerminateInstances the instance is ``shutting-down`` (still live) and then
  ``terminated``, which a lookup in the live states no longer counts and a lookup that
  asks for ``terminated`` still finds.

AWS: docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-lifecycle.html (states),
docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html (ClientToken).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from automation.clock import ManualClock
from automation.engine.recovery import AWS_LIVE_STATES
from automation.simulators import cloud_api
from automation.simulators.cloud import CloudSimulator
from automation.simulators.cloud_api import CloudService

ATTEMPT = "anycloud.sh/attempt"
LIVE = list(AWS_LIVE_STATES)  # pending, running, shutting-down, stopping, stopped
EVERY_STATE = [*LIVE, "terminated"]
RELEASE = timedelta(seconds=30)  # the simulator's delete latency
REGION = "us-east-1"


def tags(attempt: str) -> dict[str, str]:
    return {ATTEMPT: attempt, "anycloud.sh/node-pool": "np-1", "anycloud.sh/cluster": "cl-1"}


class Moto:
    name = "moto"

    def __init__(self) -> None:
        import boto3

        self.ec2 = boto3.client("ec2", region_name=REGION)

    def run(self, attempt: str) -> str:
        # What the provider sends, less its ClientToken (a fresh one per call, so it never
        # makes a second call idempotent). moto 5.2.5 keeps a ClientToken but never looks it
        # up: two calls with the same token also buy two instances there, unlike AWS, which
        # answers the first instance again. So nothing here asserts moto on tokens.
        made = self.ec2.run_instances(
            ImageId="ami-1", InstanceType="m7i.large", MinCount=1, MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": [
                {"Key": k, "Value": v} for k, v in tags(attempt).items()]}])
        return str(made["Instances"][0]["InstanceId"])

    def terminate(self, instance: str) -> None:
        self.ec2.terminate_instances(InstanceIds=[instance])

    def ids(self, attempt: str, states: Sequence[str]) -> list[str]:
        found = self.ec2.describe_instances(Filters=[
            {"Name": f"tag:{ATTEMPT}", "Values": [attempt]},
            {"Name": "instance-state-name", "Values": list(states)}])
        return sorted(i["InstanceId"] for r in found["Reservations"] for i in r["Instances"])

    def wait(self, delta: timedelta) -> None:
        pass  # moto has no clock: its states do not move with time


class Simulator:
    name = "simulator"
    request = {"package": "aws", "config": {"region": REGION}}
    VM = "aws:ec2/instance:Instance"

    def __init__(self, cloud: CloudSimulator, path: str) -> None:
        self.cloud, self.path = cloud, path

    def run(self, attempt: str) -> str:
        made = cloud_api.call(self.path, {**self.request, "op": "create", "type": self.VM,
                                          "name": "vm", "inputs": {
            "ami": "ami-1", "instanceType": "m7i.large", "tags": tags(attempt)}})
        return str(made["id"])

    def terminate(self, instance: str) -> None:
        cloud_api.call(self.path, {**self.request, "op": "delete", "type": self.VM,
                                   "id": instance})

    def ids(self, attempt: str, states: Sequence[str]) -> list[str]:
        found = cloud_api.call(self.path, {
            **self.request, "op": "invoke", "token": "aws:ec2/getInstances:getInstances",
            "args": {"instanceTags": {ATTEMPT: attempt}, "instanceStateNames": list(states)}})
        return sorted(found["ids"])

    def wait(self, delta: timedelta) -> None:
        self.cloud.clock.advance(delta)  # type: ignore[attr-defined]


Ec2 = Moto | Simulator


@pytest.fixture(scope="module", params=["moto", "simulator"])
def ec2(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Ec2]:
    """One EC2 of each kind for the module (starting them is most of the run time); each
    test keeps to attempts of its own (``fresh``)."""
    if request.param == "moto":
        from moto import mock_aws

        with pytest.MonkeyPatch.context() as env, mock_aws():
            env.setenv("AWS_ACCESS_KEY_ID", "testing")  # never a real account's
            env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
            env.delenv("AWS_PROFILE", raising=False)
            yield Moto()
        return
    clock = ManualClock(datetime(2026, 12, 1, tzinfo=UTC))
    cloud = CloudSimulator(clock, tmp_path_factory.mktemp("sim") / "cloud.json",
                           delete_latency=RELEASE)
    with CloudService(cloud) as service:
        yield Simulator(cloud, str(service.path))


def fresh() -> str:
    """An attempt id no other test uses."""
    return f"at-{uuid.uuid4().hex[:12]}"


def state(ec2: Ec2, attempt: str, instance: str) -> str:
    """The instance's state, as the lookups by state name see it (exactly one)."""
    (only,) = [s for s in EVERY_STATE if instance in ec2.ids(attempt, [s])]
    return only


def test_running_twice_without_a_client_token_buys_twice(ec2: Ec2) -> None:
    at = fresh()
    first, second = ec2.run(at), ec2.run(at)
    assert first != second
    assert ec2.ids(at, LIVE) == sorted([first, second])  # recovery: "unknown", 2 found


def test_the_attempt_lookup_finds_that_attempts_instance_only(ec2: Ec2) -> None:
    at, other_at = fresh(), fresh()
    mine, other = ec2.run(at), ec2.run(other_at)  # same pool and cluster
    assert ec2.ids(at, LIVE) == [mine]
    assert ec2.ids(other_at, LIVE) == [other]
    assert ec2.ids(fresh(), LIVE) == []
    assert state(ec2, at, mine) == "running"


def test_a_terminated_instance_leaves_the_live_lookup_and_stays_listed(ec2: Ec2) -> None:
    at, other_at = fresh(), fresh()
    mine, other = ec2.run(at), ec2.run(other_at)
    ec2.terminate(mine)
    ec2.wait(RELEASE)
    assert state(ec2, at, mine) == "terminated"
    assert ec2.ids(at, LIVE) == []
    assert ec2.ids(at, EVERY_STATE) == [mine]
    assert ec2.ids(other_at, LIVE) == [other]  # untouched


# What a describe shows right after TerminateInstances, just before the simulator's delete
# latency has passed, and once it has.
TIMELINE = {
    # moto sets the instance ``terminated`` at once; only TerminateInstances' own answer says
    # ``shutting-down`` (as AWS's does).
    "moto": ["terminated", "terminated", "terminated"],
    # AWS: shutting-down for a while, then terminated (the lifecycle page); the simulator
    # for its delete latency.
    "simulator": ["shutting-down", "shutting-down", "terminated"],
}


def test_while_shutting_down_an_instance_is_still_live(ec2: Ec2) -> None:
    """Where the two differ is only timing: moto never shows ``shutting-down`` to a describe,
    real EC2 and the simulator do for a while. In both, an instance counts in the live lookup
    exactly while it is not ``terminated``: recovery's ``AWS_LIVE_STATES``, in which a VM
    "still exists", finds it while it shuts down and no longer once it is gone."""
    at = fresh()
    mine = ec2.run(at)
    ec2.terminate(mine)
    seen = []
    for delta in (timedelta(0), RELEASE - timedelta(seconds=1), timedelta(seconds=1)):
        ec2.wait(delta)
        now = state(ec2, at, mine)
        seen.append(now)
        assert ec2.ids(at, LIVE) == ([] if now == "terminated" else [mine])
        assert ec2.ids(at, EVERY_STATE) == [mine]
    assert seen == TIMELINE[ec2.name]
