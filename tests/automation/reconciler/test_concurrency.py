"""Many pools at once: a pass's stack operations run side by side in worker processes,
bounded per credential and overall; throttling backs off; a dead worker fails its pool alone;
the outcome is the serial path's.

The runners below run inside the spawned workers (rebuilt there from their import path) and
leave evidence in files: when each operation started and ended, how many of a credential's
were in flight. No assertion depends on how long anything took.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from automation.app import App
from automation.engine.errors import EngineFailed, StackLocked
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import RunResult, StackTarget
from automation.errors import InvalidInput
from automation.ledger import open_ledger, schema
from automation.reconciler.reconcile import Ports, Reconciler
from automation.reconciler.workers import (
    Limits,
    RunnerSpec,
    SlotPolicy,
    WorkerRunner,
    dispatch,
    is_throttling,
)
from automation.services import credentials, node_pools
from automation.settings import Settings
from automation.simulators.world import SimWorld, register_simulated_cluster, simulated_app
from tests.automation.conftest import DEMO_CA
from tests.automation.reconciler.conftest import Rig
from tests.automation.reconciler.test_reconcile import attempts, status

M = timedelta(minutes=1)
HERE = "tests.automation.reconciler.test_concurrency"
WAIT = 60.0  # how long an operation waits for its peers before giving up (never reached)


# --------------------------------------------------------------------------- the policy


class VirtualTurns:
    """Turns that finish in submission order, one per wait: records what ran together."""

    def __init__(self, credential_of: dict[str, str]) -> None:
        self.credential_of = credential_of
        self.running: list[tuple[int, str]] = []
        self.peak: dict[str, int] = {}
        self.peak_total = 0
        self.started: list[str] = []

    def submit(self, index: int, item: str) -> None:
        self.running.append((index, item))
        self.started.append(item)
        per: dict[str, int] = {}
        for _, other in self.running:
            per[self.credential_of[other]] = per.get(self.credential_of[other], 0) + 1
        for cred, n in per.items():
            self.peak[cred] = max(self.peak.get(cred, 0), n)
        self.peak_total = max(self.peak_total, len(self.running))

    def wait_any(self) -> list[tuple[int, str]]:
        index, item = self.running.pop(0)
        return [(index, f"done {item}")]


def test_dispatch_bounds_each_credential_and_the_whole_pass() -> None:
    cred = {**{f"a{i}": "A" for i in range(6)}, **{f"b{i}": "B" for i in range(3)},
            "c0": "C"}
    items = list(cred)
    turns = VirtualTurns(cred)
    results = dispatch(items, cred.__getitem__, SlotPolicy(Limits(per_credential=2, overall=5)),
                       turns)
    assert results == [f"done {i}" for i in items]  # in the order given, each once
    assert turns.peak == {"A": 2, "B": 2, "C": 1}
    assert turns.peak_total == 5
    # A busy credential never holds up the others: B and C start before A's third pool.
    assert turns.started.index("c0") < turns.started.index("a2")
    assert turns.started.index("b1") < turns.started.index("a2")


def test_a_throttled_credential_gets_half_its_slots() -> None:
    cred = {f"a{i}": "A" for i in range(8)}
    turns = VirtualTurns(cred)
    policy = SlotPolicy(Limits(per_credential=4, overall=8))
    dispatch(list(cred), cred.__getitem__, policy, turns,
             throttled=lambda result: result == "done a0")
    assert policy.cap("A") == 2 and policy.cap("B") == 4


@pytest.mark.parametrize(("message", "code", "throttling"), [
    ("aws:ec2/instance:Instance vm: RequestLimitExceeded: Request limit exceeded.",
     "ENGINE_FAILED", True),
    ("googleapi: Error 429: Rate exceeded., rateLimitExceeded", "ENGINE_FAILED", True),
    ("azure: Status=429 Code=\"TooManyRequests\"", "PROVIDER_ERROR", True),
    ("ThrottlingException: Rate exceeded", "ENGINE_FAILED", True),
    ("the stack is locked: another update is in progress", "STACK_LOCKED", False),
    ("Quota 'CPUS' exceeded. Limit: 24.0 in region us-central1.", "ENGINE_FAILED", False),
    ("InsufficientInstanceCapacity: We currently do not have sufficient capacity",
     "ENGINE_FAILED", False),
])
def test_which_engine_errors_are_throttling(message: str, code: str, throttling: bool) -> None:
    assert is_throttling(EngineFailed(message, code=code)) is throttling


def test_a_locked_stack_is_never_throttling() -> None:
    locked = StackLocked("node-pool-np-1", "anycloud node-pool unlock np-1",
                         "another update is in progress (429 Too Many Requests)")
    assert not is_throttling(locked)


@pytest.mark.parametrize(("overall", "each", "field"), [
    (0, 4, "overall"), (8, 0, "per_credential"), (-3, 4, "overall")])
def test_limits_name_the_field_value_and_rule(overall: int, each: int, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        Limits(per_credential=each, overall=overall)
    assert err.value.field == field
    assert "at least 1" in err.value.message and str(min(overall, each)) in err.value.message


def test_settings_limits_from_options_variables_and_defaults(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ANYCLOUD_CONCURRENCY", raising=False)
    monkeypatch.setenv("ANYCLOUD_CONCURRENCY_PER_CREDENTIAL", "2")
    limits = Settings.from_env(tmp_path).limits()
    assert (limits.overall, limits.per_credential) == (8, 2)
    assert Settings.from_env(tmp_path).limits(overall=1).serial
    monkeypatch.setenv("ANYCLOUD_CONCURRENCY", "many")
    with pytest.raises(InvalidInput) as err:
        Settings.from_env(tmp_path).limits()
    assert err.value.field == "ANYCLOUD_CONCURRENCY" and "'many'" in err.value.message


def test_cli_refuses_a_concurrency_below_one(tmp_path: Path) -> None:
    from automation.cli.main import cli

    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "reconcile", "--once",
                                      "--simulate", "--concurrency", "0"])
    assert result.exit_code == 2, result.output
    assert "--concurrency 0: must be a whole number of at least 1" in result.output


# --------------------------------------------------------------------------- worker runners


class _Evidence:
    """An append-only event log and a counter file shared by the workers of a test."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = self.root / "events.log"
        self.counts = self.root / "counts.json"

    def event(self, kind: str, key: str) -> None:
        with self.log.open("a") as fh:
            fh.write(json.dumps([kind, key, time.monotonic_ns()]) + "\n")

    def events(self) -> list[tuple[str, str, int]]:
        if not self.log.exists():
            return []
        # Only whole lines: another worker may be appending one as this one reads.
        rows = [json.loads(line) for line in self.log.read_text().split("\n")[:-1]]
        return [(str(kind), str(key), int(at)) for kind, key, at in rows]

    @contextmanager
    def counting(self) -> Iterator[dict[str, Any]]:
        with (self.root / "lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = json.loads(self.counts.read_text()) if self.counts.exists() else {
                "inFlight": {}, "peak": {}, "finished": {}}
            yield data
            self.counts.write_text(json.dumps(data))


class RecordingRunner(MockEngineRunner):
    """In a worker: every up records its start and end; an up waits until the ups of the
    pools in ``together`` have all started (it goes on after WAIT seconds regardless, so a
    serial run finishes, with its ops in sequence)."""

    def __init__(self, home: str, evidence: str, together: list[str], cloud: Any) -> None:
        super().__init__(Path(home), cloud=cloud)
        self.evidence = _Evidence(evidence)
        self.together = set(together)

    def up(self, target: StackTarget, **kw: Any) -> RunResult:
        self.evidence.event("start", target.key)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            started = {k for kind, k, _ in self.evidence.events() if kind == "start"}
            if target.key not in self.together or self.together <= started:
                break
            time.sleep(0.05)
        try:
            return super().up(target, **kw)
        finally:
            self.evidence.event("end", target.key)


class CountingRunner(MockEngineRunner):
    """In a worker: counts the ups in flight per credential and keeps the peak. An up waits
    until as many of its credential's ups are in flight as the bound could allow (its
    limit, or fewer when fewer are left), so the bound is reached whenever it is not
    enforced too strictly, and exceeded whenever it is not enforced at all."""

    def __init__(self, home: str, evidence: str, credential_of: dict[str, str],
                 limit: int, cloud: Any) -> None:
        super().__init__(Path(home), cloud=cloud)
        self.evidence = _Evidence(evidence)
        self.credential_of, self.limit = credential_of, limit

    def up(self, target: StackTarget, **kw: Any) -> RunResult:
        cred = self.credential_of[target.key]
        total = sum(1 for c in self.credential_of.values() if c == cred)
        with self.evidence.counting() as data:
            n = data["inFlight"][cred] = data["inFlight"].get(cred, 0) + 1
            data["peak"][cred] = max(data["peak"].get(cred, 0), n)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            with self.evidence.counting() as data:
                left = total - data["finished"].get(cred, 0)
                if data["inFlight"][cred] >= min(self.limit, left):
                    break
            time.sleep(0.05)
        try:
            return super().up(target, **kw)
        finally:
            with self.evidence.counting() as data:
                data["inFlight"][cred] -= 1
                data["finished"][cred] = data["finished"].get(cred, 0) + 1


class DyingRunner(MockEngineRunner):
    """In a worker: the first up of pool ``victim`` kills its worker process (SIGKILL, as
    the OOM killer would), after the cloud bought nothing. Before it dies it starts a stand-in
    for a provider plugin: a child in a process group of its own, as the Pulumi CLI starts
    its plugins, which outlives the worker unless its session is ended."""

    def __init__(self, home: str, evidence: str, victim: str, cloud: Any) -> None:
        super().__init__(Path(home), cloud=cloud)
        self.evidence = _Evidence(evidence)
        self.victim = victim

    def up(self, target: StackTarget, **kw: Any) -> RunResult:
        marker = self.evidence.root / "killed"
        if target.key == self.victim and not marker.exists():
            plugin = subprocess.Popen(["sleep", "300"], process_group=0)
            marker.write_text(str(plugin.pid))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().up(target, **kw)


def in_workers(rig: Rig, factory: str, limits: Limits, **kwargs: Any) -> Reconciler:
    """The rig's reconciler, its stack operations in workers built by ``factory``."""
    inner = rig.reconciler.ports.runner
    probe = WorkerRunner(inner, limits.overall)  # serves the rig's cloud to the workers
    assert probe.spec is not None and probe.spec.cloud is not None
    spec = RunnerSpec(f"{HERE}:{factory}", {"home": str(rig.app.home), **kwargs},
                      probe.spec.cloud)
    runner = WorkerRunner(inner, limits.overall, spec=spec)
    runner._servers = probe._servers  # closed with it
    ports = Ports(**{**rig.reconciler.ports.__dict__, "runner": runner})
    return Reconciler(rig.app, ports, limits=limits)


# --------------------------------------------------------------------------- real workers


def test_two_pools_stack_operations_overlap(rig: Rig, tmp_path: Path) -> None:
    a, b = rig.pool("a", count=1), rig.pool("b", provider="gcp", vm_type="e2-standard-4",
                                            count=1)
    reconciler = in_workers(rig, "RecordingRunner", Limits(per_credential=4, overall=2),
                            evidence=str(tmp_path / "ev"), together=[a, b])
    try:
        outcomes = reconciler.run_once()
    finally:
        reconciler.close()
    assert [o.skipped for o in outcomes] == [None, None]
    events = _Evidence(str(tmp_path / "ev")).events()
    starts = [t for kind, _, t in events if kind == "start"]
    ends = [t for kind, _, t in events if kind == "end"]
    assert len(starts) == len(ends) == 2
    assert max(starts) < min(ends)  # both were in flight at once
    assert {r["state"] for p in (a, b) for r in attempts(rig, p)} == {"running"}


def test_never_more_than_the_bound_per_credential(rig: Rig, tmp_path: Path) -> None:
    credentials.new_credential(rig.app, credentials.NewCredential("other-aws", "aws",
                                                                  {"profile": "other"}))
    many = [rig.pool(f"a{i}", count=1) for i in range(5)]
    one = node_pools.create_node_pool(rig.app, node_pools.CreateNodePool(
        name="b0", credentials="other-aws", region="us-east-1", vm_type="m7i.large",
        min_vms=1, max_vms=1)).id
    credential_of = {**dict.fromkeys(many, "A"), one: "B"}
    reconciler = in_workers(rig, "CountingRunner", Limits(per_credential=2, overall=3),
                            evidence=str(tmp_path / "ev"), credential_of=credential_of,
                            limit=2)
    try:
        outcomes = reconciler.run_once()
    finally:
        reconciler.close()
    assert all(o.skipped is None for o in outcomes), outcomes
    peak = json.loads((tmp_path / "ev" / "counts.json").read_text())["peak"]
    assert peak == {"A": 2, "B": 1}
    assert all(attempts(rig, p)[0]["state"] == "running" for p in [*many, one])


def test_a_dead_worker_fails_its_pool_alone(rig: Rig, tmp_path: Path) -> None:
    victim, *others = [rig.pool(f"p{i}", count=1) for i in range(3)]
    reconciler = in_workers(rig, "DyingRunner", Limits(per_credential=4, overall=3),
                            evidence=str(tmp_path / "ev"), victim=victim)
    try:
        outcomes = {o.pool_id: o for o in reconciler.run_once()}
        assert outcomes[victim].skipped == "WORKER_DIED"
        assert status(rig, victim).last_error_code == "WORKER_DIED"
        # What the dead worker had started was ended with it (its session).
        plugin = int((tmp_path / "ev" / "killed").read_text())
        assert not Path(f"/proc/{plugin}").exists() or \
            Path(f"/proc/{plugin}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        with rig.app.ledger.read() as conn:
            failures = conn.execute(sa.select(schema.node_pools.c.consecutive_failures).where(
                schema.node_pools.c.id == victim)).scalar_one()
        assert failures == 0  # not the cloud's doing: no provider failure counted
        for pool in others:
            assert outcomes[pool].skipped is None
            assert [r["state"] for r in attempts(rig, pool)] == ["running"]
        # The slot got a fresh worker: the next pass takes the pool up.
        rig.world.advance(M)
        reconciler.run_once()
        assert [r["state"] for r in attempts(rig, victim)] == ["running"], (
            status(rig, victim).last_error)
        assert status(rig, victim).last_error_code is None
    finally:
        reconciler.close()


# --------------------------------------------------------------------------- throttling


class Throttling:
    """A runner whose first ``up`` of each pool in ``errors`` raises that pool's error."""

    def __init__(self, inner: Any, errors: dict[str, EngineFailed]) -> None:
        self.inner, self.errors = inner, dict(errors)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def up(self, target: StackTarget, **kw: Any) -> RunResult:
        error = self.errors.pop(target.key, None)
        if error is not None:
            raise error
        result: RunResult = self.inner.up(target, **kw)
        return result


def test_throttling_backs_off_while_other_errors_fail_the_pool(rig: Rig) -> None:
    slow, broken = rig.pool("slow", count=1), rig.pool("broken", count=1)
    runner = Throttling(rig.reconciler.ports.runner, {
        slow: EngineFailed("aws:ec2/instance:Instance vm: creating EC2 Instance: "
                           "RequestLimitExceeded: Request limit exceeded.", code="ENGINE_FAILED"),
        broken: EngineFailed("aws:ec2/instance:Instance vm: InvalidParameterValue: bad",
                             code="PROVIDER_ERROR"),
    })
    reconciler = Reconciler(rig.app, Ports(**{**rig.reconciler.ports.__dict__,
                                               "runner": runner}))
    outcomes = {o.pool_id: o for o in reconciler.run_once()}
    assert outcomes[slow].throttled and not outcomes[broken].throttled
    with rig.app.ledger.read() as conn:
        rows = {r["id"]: r for r in conn.execute(sa.select(schema.node_pools)).mappings()}
    assert rows[slow]["consecutive_failures"] == 0 and rows[slow]["backoff_until"] is None
    assert rows[slow]["state"] != "failed" and rows[slow]["last_error_code"] == "THROTTLED"
    assert rows[broken]["consecutive_failures"] == 1 and rows[broken]["backoff_until"]
    assert rows[broken]["last_error_code"] == "PROVIDER_ERROR"
    # The next pass (no back-off to wait out) applies the throttled pool's stack again.
    rig.world.advance(timedelta(seconds=1))
    reconciler.run_once()
    assert [r["state"] for r in attempts(rig, slow)] == ["running"]
    assert status(rig, slow).last_error_code is None
    assert [r["state"] for r in attempts(rig, broken)] == ["pending"]  # still backing off


# --------------------------------------------------------------------------- same results


def _world(root: Path) -> tuple[App, SimWorld]:
    app, world = simulated_app(root)
    credentials.new_credential(app, credentials.NewCredential("team-aws", "aws",
                                                              {"profile": "team"}))
    credentials.new_credential(app, credentials.NewCredential(
        "team-gcp", "gcp", {"project": "my-project", "key_file": str(DEMO_CA)}))
    pools = [("a1", "team-aws", "us-east-1", "m7i.large", 2),
             ("a2", "team-aws", "us-east-1", "m7i.large", 1),
             ("g1", "team-gcp", "us-central1", "e2-standard-4", 2),
             ("g2", "team-gcp", "us-central1", "e2-standard-4", 1)]
    for name, cred, region, vm_type, count in pools:
        node_pools.create_node_pool(app, node_pools.CreateNodePool(
            name=name, credentials=cred, region=region, vm_type=vm_type, min_vms=count,
            max_vms=count))
    return app, world


def _summary(app: App, world: SimWorld) -> dict[str, Any]:
    """What a pass sequence leaves, by pool name (ids are random per run)."""
    out: dict[str, Any] = {}
    with app.ledger.read() as conn:
        for pool in conn.execute(sa.select(schema.node_pools)).mappings():
            rows = conn.execute(sa.select(schema.vm_attempts).where(
                schema.vm_attempts.c.pool_id == pool["id"])).mappings().all()
            kinds = conn.execute(sa.select(schema.events.c.kind).where(
                schema.events.c.subject_id == pool["id"])).scalars().all()
            out[pool["name"]] = {
                "state": pool["state"], "error": pool["last_error_code"],
                "attempts": sorted((r["state"], r["node_state"] or "",
                                    r["token_removed_at"] is not None) for r in rows),
                "vms": len(world.cloud.vms_of_pool(pool["id"])),
                "events": sorted(kinds),
            }
    return out


def test_concurrent_passes_end_where_serial_passes_do(tmp_path: Path) -> None:
    results = []
    for limits in (None, Limits(per_credential=1, overall=2)):
        root = tmp_path / ("serial" if limits is None else "concurrent")
        root.mkdir()
        app, world = _world(root)
        from automation.simulators.ports import simulated_ports

        reconciler = Reconciler(app, simulated_ports(app, world), limits=limits)
        try:
            for step in range(11):
                if step == 5:
                    node_pools.delete_node_pool(app, "a2")
                reconciler.run_once()
                world.advance(M)
        finally:
            reconciler.close()
        results.append(_summary(app, world))
        app.ledger.dispose()
    serial, concurrent = results
    assert serial == concurrent
    assert {name: s["state"] for name, s in serial.items()} == {
        "a1": "ready", "a2": "deleted", "g1": "ready", "g2": "ready"}


def test_steps_run_in_this_process_never_overlap() -> None:
    """The add-on and ingress steps (each Serialized on its own) share one lock with every
    other in-process user of the SDK: a step never runs while another is inside."""
    import threading

    from automation.reconciler.workers import Serialized

    inside, second_in = threading.Event(), threading.Event()
    seen: list[str] = []

    def first() -> None:
        inside.set()
        second_in.wait(timeout=1.0)  # let in now, the second step would be seen here
        seen.append("second inside too" if second_in.is_set() else "alone")

    a, b = Serialized(first), Serialized(second_in.set)
    one = threading.Thread(target=a)
    one.start()
    inside.wait(timeout=10)
    two = threading.Thread(target=b)
    two.start()
    one.join()
    two.join()
    assert seen == ["alone"] and second_in.is_set()


def test_cli_reconciles_pools_concurrently_on_the_simulators(tmp_path: Path) -> None:
    from automation.cli.main import cli

    world = SimWorld(tmp_path / "sim")
    app = App(ledger=open_ledger(f"sqlite:///{tmp_path / 'anycloud.db'}"), clock=world.clock,
              home=tmp_path)
    register_simulated_cluster(app, tmp_path)
    credentials.new_credential(app, credentials.NewCredential("aws", "aws", {"profile": "p"}))
    ids = [node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name=f"cpu-{i}", credentials="aws", region="us-east-1", vm_type="m7i.large",
        min_vms=1, max_vms=1)).id for i in range(2)]
    app.ledger.dispose()
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "reconcile", "--once",
                                      "--simulate", "--concurrency", "2", "--json"],
                                env={"ANYCLOUD_DATABASE_URL": ""})
    assert result.exit_code == 0, result.output
    ledger = open_ledger(f"sqlite:///{tmp_path / 'anycloud.db'}")
    with ledger.read() as conn:
        states = conn.execute(sa.select(schema.vm_attempts.c.pool_id, schema.vm_attempts.c.state)
                              ).all()
    ledger.dispose()
    assert sorted(states) == sorted((pool, "running") for pool in ids)
    assert len(SimWorld(tmp_path / "sim").cloud.vms) == 2  # bought in the one persisted cloud


@pytest.mark.kube
@pytest.mark.engine
@pytest.mark.slow
def test_the_real_engine_runs_in_workers_side_by_side(
        control_plane: Any, engine_env: dict[str, str], tmp_path: Path) -> None:
    """The Automation API's inline program (its language server is per process) in spawned
    workers: two stacks previewed at once, one taken up, against the real API server."""
    import threading

    from automation.engine.pulumi_driver import AutomationRunner
    from tests.automation.engine.test_real_engine import addons_target, remove_addons
    from tests.automation.kube import objects

    remove_addons(control_plane)
    runner = WorkerRunner(AutomationRunner(tmp_path / "home"), workers=2)
    assert runner.spec is not None and runner.spec.factory.endswith(":pulumi_runner")
    targets = [addons_target(control_plane, f"cl-workers-{i}") for i in range(2)]
    previews: dict[str, Any] = {}

    def preview(target: StackTarget) -> None:
        previews[target.key] = runner.preview(target)

    threads = [threading.Thread(target=preview, args=(t,)) for t in targets]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(previews) == sorted(t.key for t in targets)
        assert all(p.engine == "pulumi" and p.summary.create >= 3 for p in previews.values())
        events: list[Any] = []
        up = runner.up(targets[0], on_progress=events.append)
        assert up.outputs["runtimeClass"] == "nvidia"
        assert any(e.kind == "resource" for e in events)  # the worker's progress, replayed
        assert objects.get(control_plane, "runtimeclass", "nvidia") is not None
        runner.destroy(targets[0])
    finally:
        runner.close()
        remove_addons(control_plane)


def test_creates_no_lookup_settles_need_a_person_and_never_park_the_pool(rig: Rig) -> None:
    """``PENDING_CREATES`` (a killed run's creates the providers could not settle) is shown
    with its code on every pass, but counts no provider failure: the pool is never parked
    for it, and the first pass after it is settled goes on."""
    pool = rig.pool("stuck", count=1)
    unresolved = EngineFailed("stack node-pool-x has 1 create(s) left in flight: vpc "
                              "(no lookup for aws:ec2/vpc:Vpc)", code="PENDING_CREATES")

    class Stuck(Throttling):
        def up(self, target: StackTarget, **kw: Any) -> RunResult:
            if self.errors:
                raise unresolved
            result: RunResult = self.inner.up(target, **kw)
            return result

    runner = Stuck(rig.reconciler.ports.runner, {pool: unresolved})
    reconciler = Reconciler(rig.app, Ports(**{**rig.reconciler.ports.__dict__,
                                               "runner": runner}))
    for _ in range(7):  # more passes than the five failures that park a pool
        reconciler.run_once()
        rig.world.advance(timedelta(seconds=30))
    with rig.app.ledger.read() as conn:
        row = conn.execute(sa.select(schema.node_pools).where(
            schema.node_pools.c.id == pool)).mappings().one()
    assert row["state"] != "failed" and row["consecutive_failures"] == 0
    assert row["last_error_code"] == "PENDING_CREATES" and "no lookup" in row["last_error"]
    runner.errors.clear()  # settled by hand
    reconciler.run_once()
    assert [r["state"] for r in attempts(rig, pool)] == ["running"]
    assert status(rig, pool).last_error_code is None
