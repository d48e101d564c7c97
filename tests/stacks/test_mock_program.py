"""automation.engine.mock.program: plain-data runs, repeatable, pluggable cloud, secrets masked."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from automation.engine.mock.model import SECRET, CloudFailure
from automation.engine.mock.program import run_program
from automation.engine.mock.providers import MockProviders
from stacks import node_pool


def test_runs_are_repeatable_and_deterministic(config_for: Any) -> None:
    program = node_pool.build_program(config_for("aws"))
    a, b = run_program(program), run_program(program)
    assert a.to_dict() == b.to_dict()
    assert len({r.urn for r in a.resources}) == len(a.resources)


def test_secrets_are_masked_and_listed(config_for: Any) -> None:
    run = run_program(node_pool.build_program(config_for("aws")))
    vm = run.of_type("aws:ec2/instance:Instance")[0]
    assert vm.inputs["userData"] == SECRET and vm.secret_inputs == ("userData",)
    dumped = json.dumps(run.to_dict())  # plain data all the way down
    assert "K10" not in dumped and "#cloud-config" not in dumped


def test_inputs_use_wire_names_and_children_record_their_parent(config_for: Any) -> None:
    run = run_program(node_pool.build_program(config_for("aws")))
    vpc = run.one("aws:ec2/vpc:Vpc")
    assert vpc.inputs["cidrBlock"] == "10.0.0.0/16"
    parent = run.by_urn(vpc.parent or "")
    assert parent.type == "anycloud:network:AwsIsolatedNetwork" and not parent.custom
    assert parent.parent is None  # top-level components hang off the stack
    assert "pulumi:pulumi:Stack$" not in vpc.urn


def test_cloud_failure_is_raised(config_for: Any) -> None:
    cloud = MockProviders(fail=lambda typ, name: typ == "aws:ec2/instance:Instance")
    with pytest.raises(Exception) as err:
        run_program(node_pool.build_program(config_for("aws")), cloud=cloud)
    assert "simulated failure" in str(err.value) or isinstance(err.value, CloudFailure)
    # The engine recovers: the next run in the same process works.
    assert run_program(node_pool.build_program(config_for("aws"))).outputs["attempts"]


def test_pluggable_cloud_answers_invokes_and_assigns_addresses() -> None:
    class Cloud(MockProviders):
        def call(self, args: Any) -> dict[str, Any]:
            if args.token == "aws:ec2/getAmi:getAmi":
                return {"id": "ami-pinned", "architecture": "x86_64"}
            return super().call(args)

        def public_ip(self, key: str) -> str:
            return "192.0.2.7"

    def program() -> None:
        import pulumi_aws as aws

        ami = aws.ec2.get_ami_output(owners=["x"], most_recent=True)
        inst = aws.ec2.Instance("vm", ami=ami.id, instance_type="t3.micro")
        pulumi.export("ami", ami.id)
        pulumi.export("ip", inst.public_ip)

    run = run_program(program, cloud=Cloud())
    assert run.outputs == {"ami": "ami-pinned", "ip": "192.0.2.7"}
    assert run.one("aws:ec2/instance:Instance").inputs["ami"] == "ami-pinned"
    assert run.invokes[0]["token"] == "aws:ec2/getAmi:getAmi"


def test_program_errors_propagate_and_do_not_poison_the_next_run() -> None:
    def bad() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_program(bad)

    def good() -> None:
        pulumi.export("x", pulumi.Output.secret("hidden"))

    run = run_program(good)
    assert run.outputs == {"x": SECRET} and run.secret_outputs == ("x",)


def test_azure_public_ip_lookup_answers_with_the_vms_address(config_for: Any) -> None:
    cloud = MockProviders()
    run = run_program(node_pool.build_program(config_for("azure")), cloud=cloud)
    for vm in run.of_type("azure-native:compute:VirtualMachine"):
        attempt = vm.inputs["vmName"].removeprefix("anycloud-")
        assert run.outputs["attempts"][attempt]["publicIp"] == cloud.public_ip(vm.name)
