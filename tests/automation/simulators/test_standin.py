"""The stand-in provider plugins' answers, without an engine: what each gRPC call returns,
and the simulated cloud served over its socket. The real engine driving them is in
``tests/automation/engine/test_standin_engine.py``."""

from __future__ import annotations

import asyncio
import os
import string
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.provider.experimental.provider import (
    CheckRequest,
    CreateRequest,
    PropertyDiffKind,
    ReadRequest,
)
from pulumi.runtime import rpc

from automation.clock import ManualClock
from automation.engine.mock.model import UNKNOWN, CloudFailure
from automation.simulators import cloud_api
from automation.simulators.cloud import CloudSimulator
from automation.simulators.cloud_api import CloudService, CloudUnreachable
from automation.simulators.standin import random_values
from automation.simulators.standin.provider import (
    StandInProvider,
    plain_map,
    to_plain,
    to_value,
    value_map,
)
from tests.conftest import missing

AWS_VM = "aws:ec2/instance:Instance"
GCP_VM = "gcp:compute/instance:Instance"
TAGS = {"anycloud.sh/attempt": "at-1", "anycloud.sh/node-pool": "np-1",
        "anycloud.sh/cluster": "cl-1"}


def urn(type_: str, name: str, parent: str = "anycloud:vm:AwsPoolVM") -> str:
    return f"urn:pulumi:s::anycloud::{parent}${type_}::{name}"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[CloudSimulator, dict[str, str]]]:
    cloud = CloudSimulator(ManualClock(datetime(2026, 12, 1, tzinfo=UTC)), tmp_path / "c.json")
    with CloudService(cloud) as service:
        yield cloud, service.env


# -- values -----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=10)


@given(json_values, st.booleans())
def test_a_value_survives_the_trip_through_the_wire_form(value: Any, secret: bool) -> None:
    plain = rpc.wrap_rpc_secret(value) if secret else value
    assert to_plain(to_value(plain)) == plain


def test_a_value_the_engine_cannot_know_is_the_mock_engines_unknown() -> None:
    assert to_plain(PropertyValue(Computed())) == UNKNOWN
    nested = PropertyValue({"a": PropertyValue("x", is_secret=True)})
    assert to_plain(nested) == {"a": rpc.wrap_rpc_secret("x")}


# -- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(("package", "key", "variable"), [
    ("aws", "region", "AWS_REGION"), ("gcp", "project", "GOOGLE_PROJECT"),
    ("azure-native", "subscriptionId", "ARM_SUBSCRIPTION_ID")])
def test_a_configuration_the_real_provider_refuses_is_refused(
        package: str, key: str, variable: str) -> None:
    check = CheckRequest(f"urn:pulumi:s::p::pulumi:providers:{package}::x", {}, {}, b"")
    failures = run(StandInProvider(package, environ={}).check_config(check)).failures
    assert [(f.property, key in f.reason and "stand-in cloud" in f.reason)
            for f in failures] == [(key, True)]
    # Named in the configuration, or where the real provider also looks: accepted.
    named = CheckRequest(check.urn, {}, {key: PropertyValue("x")}, b"")
    assert not run(StandInProvider(package, environ={}).check_config(named)).failures
    assert not run(StandInProvider(package, environ={variable: "x"}).check_config(
        check)).failures


def test_without_the_simulated_cloud_a_call_fails_saying_what_the_plugin_is() -> None:
    create = CreateRequest(urn(AWS_VM, "vm"), value_map({"tags": TAGS}), 60, False)
    with pytest.raises(RuntimeError, match=r"stand-in.*simulated cloud only"):
        run(StandInProvider("aws", environ={}).create(create))


# -- check and diff ---------------------------------------------------------------------------


def test_an_autoname_is_drawn_once_and_kept() -> None:
    provider = StandInProvider("gcp", environ={})
    seed = bytes.fromhex("0123456789abcdef")
    fresh = CheckRequest(urn("gcp:compute/network:Network", "net"), {}, {}, seed)
    name = run(provider.check(fresh)).inputs["name"].value
    assert name == "net-0123456"
    kept = CheckRequest(fresh.urn, {"name": PropertyValue("net-aaaaaaa")}, {}, seed)
    assert run(provider.check(kept)).inputs["name"].value == "net-aaaaaaa"
    azure = CheckRequest(urn("azure-native:network:VirtualNetwork", "vnet"), {}, {}, seed)
    assert run(StandInProvider("azure-native", environ={}).check(azure)).inputs[
        "virtualNetworkName"].value == "vnet01234567"


def test_diff_answers_update_replace_and_delete_before_replace_as_the_rules_say() -> None:
    provider = StandInProvider("aws", environ={})
    old = value_map({"ami": "ami-1", "instanceType": "m7i.large", "tags": TAGS})
    same = provider.diff_inputs(AWS_VM, old, old, [])
    assert same.changes is False
    bigger = provider.diff_inputs(AWS_VM, old, value_map(
        {"ami": "ami-1", "instanceType": "m7i.xlarge", "tags": TAGS}), [])
    assert (bigger.changes, bigger.replaces, bigger.diffs) == (True, [], ["instanceType"])
    assert bigger.detailed_diff["instanceType"].kind is PropertyDiffKind.UPDATE
    image = provider.diff_inputs(AWS_VM, old, value_map(
        {"ami": "ami-2", "instanceType": "m7i.large", "tags": TAGS}), [])
    assert image.replaces == ["ami"] and not image.delete_before_replace
    assert image.detailed_diff["ami"].kind is PropertyDiffKind.UPDATE_REPLACE
    ignored = provider.diff_inputs(AWS_VM, old, value_map(
        {"ami": "ami-2", "instanceType": "m7i.large", "tags": TAGS}), ["ami"])
    assert ignored.changes is False
    # A named GCP instance: the bridge deletes the old one before creating its replacement.
    gcp = StandInProvider("gcp", environ={})
    named = value_map({"name": "vm-1", "zone": "us-central1-a"})
    moved = gcp.diff_inputs(GCP_VM, named, value_map({"name": "vm-1", "zone": "us-central1-b"}),
                            [])
    assert moved.replaces == ["zone"] and moved.delete_before_replace


def test_an_update_the_cloud_refuses_in_place_fails_naming_the_property() -> None:
    gcp = StandInProvider("gcp", environ={})
    old = value_map({"name": "vm-1", "machineType": "n2-standard-2"})
    new = value_map({"name": "vm-1", "machineType": "n2-standard-4"})
    with pytest.raises(RuntimeError, match=r"machine_type.*requires stopping it"):
        run(gcp.update_inputs(GCP_VM, "vm", "projects/p/zones/z/instances/vm-1", old, new, []))


# -- the cloud behind the socket --------------------------------------------------------------


def _create(provider: StandInProvider, type_: str, name: str, inputs: dict[str, Any]) -> Any:
    return run(provider.create(CreateRequest(urn(type_, name), value_map(inputs), 60, False)))


def test_aws_buys_anew_on_every_create_gcp_refuses_a_name_it_holds(
        served: tuple[CloudSimulator, dict[str, str]]) -> None:
    cloud, env = served
    aws = StandInProvider("aws", environ=env)
    aws.config = {"region": "eu-west-1"}
    inputs = {"ami": "ami-1", "instanceType": "m7i.large", "tags": TAGS,
              "userData": rpc.wrap_rpc_secret("#!/bin/sh token")}
    first = _create(aws, AWS_VM, "vm", inputs)
    second = _create(aws, AWS_VM, "vm", inputs)  # no client token: RunInstances buys again
    assert first.resource_id != second.resource_id
    assert [a for verb, a in cloud.journal if verb == "create"] == ["at-1", "at-1"]
    assert ":eu-west-1:" in first.properties["arn"].value  # the provider's configured region
    assert first.properties["userData"].is_secret  # echoed as a secret output
    assert "userData" not in cloud.live[str(first.resource_id)]  # the cloud keeps no secret

    gcp = StandInProvider("gcp", environ=env)
    gcp.config = {"project": "p-1"}
    vm = {"name": "vm-1", "zone": "us-central1-a", "machineType": "n2-standard-4",
          "labels": {"anycloud-sh_attempt": "at-2"}}
    made = _create(gcp, GCP_VM, "vm", vm)
    assert made.resource_id == "projects/p-1/zones/us-central1-a/instances/vm-1"
    with pytest.raises(RuntimeError, match=r"409.*alreadyExists"):
        _create(gcp, GCP_VM, "vm", vm)


def test_a_read_of_a_resource_that_is_gone_answers_no_id_and_drift_is_read_back(
        served: tuple[CloudSimulator, dict[str, str]]) -> None:
    cloud, env = served
    aws = StandInProvider("aws", environ=env)
    inputs = {"ami": "ami-1", "instanceType": "m7i.large", "tags": TAGS}
    made = _create(aws, AWS_VM, "vm", inputs)
    rid = str(made.resource_id)
    cloud.console_change_vm_type("at-1", "m7i.4xlarge")
    read = run(aws.read(ReadRequest(urn(AWS_VM, "vm"), rid, made.properties,
                                    value_map(inputs))))
    assert read.resource_id == rid
    assert read.inputs["instanceType"].value == "m7i.4xlarge"
    assert read.properties["publicIp"] == made.properties["publicIp"]  # outputs kept
    cloud.delete_resource(AWS_VM, rid)
    cloud.clock.advance(cloud.delete_latency)  # type: ignore[attr-defined]
    gone = run(aws.read(ReadRequest(urn(AWS_VM, "vm"), rid, made.properties,
                                    value_map(inputs))))
    assert gone.resource_id is None


def test_an_invoke_answers_from_what_the_cloud_holds(
        served: tuple[CloudSimulator, dict[str, str]]) -> None:
    from pulumi.provider.experimental.provider import InvokeRequest

    _, env = served
    aws = StandInProvider("aws", environ=env)
    made = _create(aws, AWS_VM, "vm", {"ami": "ami-1", "instanceType": "m7i.large",
                                       "tags": TAGS})
    asked = InvokeRequest("aws:ec2/getInstances:getInstances",
                          value_map({"instanceTags": {"anycloud.sh/attempt": "at-1"}}))
    found = run(aws.invoke(asked)).return_value
    assert [v.value for v in found["ids"].value] == [made.resource_id]
    gcp = StandInProvider("gcp", environ=env)
    missing = InvokeRequest("gcp:compute/getInstance:getInstance",
                            value_map({"zone": "us-central1-a", "name": "nothing"}))
    with pytest.raises(RuntimeError, match=r"404.*notFound"):
        run(gcp.invoke(missing))


def test_a_caller_of_another_user_is_refused_before_its_request_is_read(
        served: tuple[CloudSimulator, dict[str, str]]) -> None:
    _, env = served
    path = env[cloud_api.ENV]
    if os.getuid() != 0:
        missing("changing user needs root; the socket's directory already keeps others out")
    os.chmod(Path(path).parent, 0o711)  # let the other user reach the socket itself
    os.chmod(path, 0o777)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.setgid(65534)
        os.setuid(65534)
        try:
            cloud_api.call(path, {"op": "delete", "type": AWS_VM, "id": "i-1"})
            os.write(write, b"answered")
        except CloudFailure as exc:
            os.write(write, str(exc).encode()[:200])
        except Exception as exc:
            os.write(write, f"other: {exc}".encode()[:200])
        os._exit(0)
    os.waitpid(child, 0)
    said = os.read(read, 400).decode()
    assert "serves its own user only" in said


def test_a_cloud_whose_process_ended_says_so(tmp_path: Path) -> None:
    with pytest.raises(CloudUnreachable, match="has ended"):
        cloud_api.call(str(tmp_path / "gone.sock"), {"op": "read"})


# -- random -----------------------------------------------------------------------------------


@given(st.integers(1, 40), st.booleans(), st.booleans(), st.integers(0, 3))
def test_a_random_string_draws_from_the_sets_it_enables(
        length: int, upper: bool, special: bool, min_numeric: int) -> None:
    inputs = {"length": length, "upper": upper, "special": special, "lower": True,
              "numeric": True, "minNumeric": min_numeric}
    drawn = random_values.draw(inputs)
    allowed = string.ascii_lowercase + string.digits + (string.ascii_uppercase if upper else "") + (
        random_values.SPECIAL if special else "")
    assert len(drawn) == max(length, min_numeric) and set(drawn) <= set(allowed)
    assert sum(c.isdigit() for c in drawn) >= min_numeric


def test_a_random_values_id_is_the_providers() -> None:
    rid, out = random_values.create(random_values.TYPES[0], {"length": 22})
    assert rid == out["result"] and len(rid) == 22  # random_string: the id is the result
    rid, out = random_values.create(random_values.TYPES[1], {"length": 22})
    assert rid == "none" and rpc.is_rpc_secret(out["result"])
    with pytest.raises(ValueError, match="draws nothing"):
        random_values.draw({"length": 4, "lower": False, "upper": False, "numeric": False,
                            "special": False})


def test_plain_map_and_value_map_are_inverse() -> None:
    inputs = {"a": 1, "b": [True, None], "c": {"d": rpc.wrap_rpc_secret("s")}}
    assert plain_map(value_map(inputs)) == inputs


def test_a_plugin_whose_engine_was_killed_exits_on_its_own(tmp_path: Path) -> None:
    """SIGKILL of ``pulumi`` leaves its plugins behind; the Go ones stop on the engine's
    health check, the stand-in when it finds itself orphaned (its parent gone)."""
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "plugin.pid"
    parent = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-m', 'automation.simulators.standin', 'aws',"
        " '127.0.0.1:1'], stdout=subprocess.PIPE)\n"
        "p.stdout.readline()\n"  # serving
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n")
    subprocess.run([sys.executable, "-c", parent], check=True, timeout=60)  # then it exits
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, 9)
    raise AssertionError(f"the orphaned plugin {pid} still ran after 15 s")
