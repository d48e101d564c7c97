"""The mock engine's own resource monitor: the SDK mock monitor's answers, on the program's
thread, and an amount of work per resource that does not grow with the pool.

The linearity guards count work instead of timing it: monitor RPCs, planner decisions and
property digests are each an affine function of the pool size (the same cost for every VM
whether the pool has 10 or 100), and no garbage collection runs in the middle of a run.
"""

from __future__ import annotations

import gc
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, MockSettings
from pulumi.runtime.proto import resource_pb2

from automation.engine.mock import diff
from automation.engine.mock.model import PendingResource, ProgramRun, Step
from automation.engine.mock.monitor import LeanMonitor
from automation.engine.mock.program import run_program
from automation.engine.mock.providers import MockProviders
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import StackKind, StackTarget
from stacks.config import AttemptSpec, CloudCredentialRef, ClusterRef, NodePoolStackConfig
from stacks.node_pool import build_program

ISSUED = datetime(2026, 1, 1, tzinfo=UTC)


def pool_config(n: int, provider: str = "aws") -> NodePoolStackConfig:
    cred = {
        "aws": CloudCredentialRef(provider="aws", profile="p"),
        "azure": CloudCredentialRef(provider="azure", subscription_id="s", tenant_id="t"),
    }[provider]
    return NodePoolStackConfig(
        pool_id="np-lin", pool_name="lin",
        cluster=ClusterRef(id="cl-lin", server_url="https://203.0.113.10:6443",
                           ca_sha256="c" * 64, kubeconfig_path="/dev/null"),
        credential=cred, provider=provider,  # type: ignore[arg-type]
        region={"aws": "us-east-1", "azure": "eastus"}[provider], vm_type="t3.small",
        attempts=tuple(AttemptSpec(id=f"at-{i:04d}", token_issued_at=ISSUED)
                       for i in range(n)),
        hosts_service=True,
    )


class CountingPlanner:
    """Creates everything; counts how often it is asked, per URN."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()

    def decide(self, resource: PendingResource) -> Step:
        self.asked[resource.urn] += 1
        return Step(op="create")


def assert_affine(counts: dict[int, int], what: str) -> None:
    """``counts`` at sizes a < a+1 < b grow by the same amount for every VM added."""
    a, b = min(counts), max(counts)
    per_vm = counts[a + 1] - counts[a]
    assert counts[b] - counts[a] == (b - a) * per_vm, (
        f"{what}: {counts} is not the same cost per VM ({per_vm} from {a} to {a + 1})")


# --------------------------------------------------------------------------- linearity


def test_monitor_rpcs_and_planner_decisions_are_constant_per_resource() -> None:
    runs: dict[int, ProgramRun] = {}
    planners: dict[int, CountingPlanner] = {}
    for n in (10, 11, 100):
        planners[n] = CountingPlanner()
        runs[n] = run_program(build_program(pool_config(n)), planner=planners[n])
    for n, run in runs.items():
        # One registration per resource (plus the stack's), one decision per resource.
        assert run.rpcs["RegisterResource"] == len(run.resources) + 1
        assert set(planners[n].asked) == {r.urn for r in run.resources}
        assert set(planners[n].asked.values()) == {1}
    methods = set().union(*(run.rpcs for run in runs.values()))
    assert {"RegisterResource", "RegisterResourceOutputs", "Invoke"} <= methods
    for method in methods:
        assert_affine({n: run.rpcs.get(method, 0) for n, run in runs.items()}, method)
    assert_affine({n: len(run.resources) for n, run in runs.items()}, "resources")


def test_property_digests_are_constant_per_resource(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A preview against recorded state digests each resource's properties once per
    diff: the count grows by the same amount for every VM."""
    calls = Counter[str]()
    leaf_digest = diff.leaf_digest
    flatten = diff.flatten

    def counting_digest(salt: str, value: Any) -> str:
        calls["digest"] += 1
        return leaf_digest(salt, value)

    def counting_flatten(value: Any, prefix: tuple[Any, ...] = ()) -> dict[Any, Any]:
        calls["flatten"] += 1
        return flatten(value, prefix)

    monkeypatch.setattr(diff, "leaf_digest", counting_digest)
    monkeypatch.setattr(diff, "flatten", counting_flatten)
    counts: dict[str, dict[int, int]] = {"digest": {}, "flatten": {}}
    for n in (2, 3, 12):
        runner = MockEngineRunner(tmp_path / f"home-{n}")
        target = StackTarget(kind=StackKind.NODE_POOL, key=f"np-lin-{n}", config=pool_config(n))
        runner.up(target)
        calls.clear()
        preview = runner.preview(target)
        assert preview.summary.changes == 0
        for key in counts:
            counts[key][n] = calls[key]
    assert counts["digest"][2] > 0
    for key, by_size in counts.items():
        assert_affine(by_size, key)


def test_no_collection_and_no_thread_hand_off_during_a_run() -> None:
    """The two super-linear terms the SDK's mock path had: garbage collections over every
    live future while the program runs, and a worker thread per RPC."""
    events: list[str] = []  # "rpc" per registration or invoke, "gc" per collection
    threads: set[int] = set()

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            events.append("gc")

    class RecordingCloud(MockProviders):
        def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
            events.append("rpc")
            threads.add(threading.get_ident())
            return super().new_resource(args)

        def call(self, args: MockCallArgs) -> dict[str, Any]:
            events.append("rpc")
            threads.add(threading.get_ident())
            return super().call(args)

    program = build_program(pool_config(100))
    gc.callbacks.append(on_gc)
    try:
        run = run_program(program, cloud=RecordingCloud())
    finally:
        gc.callbacks.remove(on_gc)
    assert len(run.resources) > 500
    first, last = events.index("rpc"), len(events) - events[::-1].index("rpc")
    assert "gc" not in events[first:last]  # (one may run once the run is over)
    assert events.count("gc") <= 1
    assert threads == {threading.get_ident()}
    assert gc.isenabled()  # the collector is back once the run is over


def test_a_failing_program_gives_back_the_collector_and_the_event_loop() -> None:
    import asyncio

    try:  # the thread's loop, if an earlier test left one (asyncio.run leaves none)
        previous: asyncio.AbstractEventLoop | None = \
            asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        previous = None
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        def broken() -> None:
            raise RuntimeError("program bug")

        with pytest.raises(RuntimeError, match="program bug"):
            run_program(broken)
        assert gc.isenabled()
        assert asyncio.get_event_loop() is loop
        assert run_program(lambda: None).resources == ()  # and the next run works
    finally:
        asyncio.set_event_loop(previous)
        loop.close()


# --------------------------------------------------------------------------- equivalence


@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
def test_dropping_aliases_changes_nothing_the_engine_sees(preview: bool) -> None:
    """azure-native declares dozens of aliases per resource; the mock engine drops them
    before the SDK evaluates them, and every resource, input and output is the same."""
    program = build_program(pool_config(2, "azure"))
    lean = run_program(program, preview=preview, reveal_secrets=True)
    full = run_program(program, preview=preview, reveal_secrets=True, aliases=True)
    assert lean.to_dict() == full.to_dict()
    assert len(lean.resources) > 10
    assert full.rpcs == lean.rpcs  # the same requests reached the engine



class EchoMocks:
    """Echoes inputs, renames one, adds computed outputs (a secret among them)."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", {
            **args.inputs,
            "name": f"{args.name}-1234567",
            "arn": f"arn:{args.name}",
            "nested": {"list": [1, "two", {"three": True}], "empty": {}},
            "password": rpc.wrap_rpc_secret("hunter2"),
        }

    def call(self, args: MockCallArgs) -> dict[str, Any]:
        return {"echo": args.args, "token": args.token}


def sdk_monitor(preview: bool) -> MockMonitor:
    """The SDK's mock monitor, with the runtime settings it reads (stack, project, dry run)."""
    monitor = MockMonitor(EchoMocks())  # type: ignore[arg-type]
    settings.configure(MockSettings(monitor=monitor, project="proj", stack="dev",
                                    dry_run=preview, organization="organization"))
    return monitor


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(props)
    return out


REQUEST_INPUTS = {
    "size": "t3.small",
    "count": 3,
    "tags": {"pool": "np-1", "attempt": "at-1"},
    "ports": [80, 443],
    "token": {rpc._special_sig_key: rpc._special_secret_sig, "value": "s3cret"},
    "later": rpc.UNKNOWN,
}


@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
def test_registration_answers_match_the_sdk_mock_monitor(preview: bool) -> None:
    sdk = sdk_monitor(preview)
    lean = LeanMonitor(EchoMocks(), stack="dev", project="proj")
    request = resource_pb2.RegisterResourceRequest(
        type="aws:ec2/instance:Instance", name="vm", custom=True,
        object=_struct(REQUEST_INPUTS))
    ours, theirs = lean.RegisterResource(request), sdk.RegisterResource(request)
    assert (ours.urn, ours.id) == (theirs.urn, theirs.id) == (
        "urn:pulumi:dev::proj::aws:ec2/instance:Instance::vm", "vm-id")
    # The same wire form, unknowns and secrets included.
    assert MessageToDict(ours.object) == MessageToDict(theirs.object)
    assert ours.object == theirs.object
    # An unknown input stays unknown in a preview; an update's answer leaves it out.
    assert MessageToDict(ours.object).get("later") == (rpc.UNKNOWN if preview else None)
    assert MessageToDict(ours.object)["name"] == "vm-1234567"  # what the mocks changed
    assert lean.calls["RegisterResource"] == 1


def test_invoke_answers_match_the_sdk_mock_monitor() -> None:
    sdk = sdk_monitor(preview=False)
    lean = LeanMonitor(EchoMocks(), stack="dev", project="proj")
    request = resource_pb2.ResourceInvokeRequest(
        tok="aws:ec2/getAmi:getAmi", args=_struct({"mostRecent": True, "owners": ["099"]}))
    ours, theirs = lean.Invoke(request), sdk.Invoke(request)
    assert rpc.deserialize_properties(getattr(ours, "return")) == (
        rpc.deserialize_properties(getattr(theirs, "return")))
    assert list(ours.failures) == list(theirs.failures) == []
