"""A node-pool stack on the real Pulumi engine with the stand-in cloud plugins versus the mock
engine, in one run.

Real engine: ``AutomationRunner`` (the Pulumi CLI built from source, its own PULUMI_HOME with
the kubernetes plugin built from source writing each VM's bootstrap-token Secret to the local
control plane, and anycloud's stand-in aws/random plugins, ``automation.simulators.standin``,
answering from a ``CloudSimulator`` this process serves on a Unix socket: ``CloudService``).
Mock engine, the baseline: ``MockEngineRunner`` over a ``CloudSimulator`` of its own. The same
AWS node-pool target for both (``m7i.large`` in us-east-1), built as
tests/automation/engine/test_standin_engine.py builds it: one attempt per VM, each needing its
token, all issued at one fixed time, so that a second ``up`` has nothing to change.

Measured, wall seconds, median of ``--runs`` runs (default 3), the mock and the real run of a
size back to back in each run so that the ratio real/mock compares like with like:

1. the largest pool of ``--sizes`` (default 100 VMs): its first ``up``, and a converged pass
   (``up`` again, nothing to change; the changes it made are shown);
2. the cost per VM as the pool grows: the first ``up`` of each size of ``--sizes`` (default
   10,25,50,100), in seconds per VM.

Every measured run starts from nothing: a fresh home (stack state, passphrase) and a fresh
simulated cloud, and a pool name of its own (the Secrets of earlier runs stay on the API
server; nothing is destroyed, the control plane is thrown away at the end). Not timed: the
control plane's start, the plugin installs, and one warm-up ``up`` of a 1-VM pool on each
engine (imports, the CLI's version check).

    .venv/bin/python benchmarks/bench_standin_engine.py [--runs N] [--sizes 10,25,50,100]
        [--smoke]

--smoke: sizes 1,2, one run, no warm-up: every code path once, the figures mean nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli, _kube_plane
from benchmarks._table import median, print_table

if TYPE_CHECKING:
    from automation.devcluster.control_plane import ControlPlane
    from automation.engine.runner import StackTarget

MARKS = ("kube", "engine", "slow")
PROVIDER, REGION, VM_TYPE = "aws", "us-east-1", "m7i.large"
ENGINES = ("mock", "real")


@dataclass
class Figures:
    """What the runs of one engine at one size measured."""

    first: list[float] = field(default_factory=list)  # seconds of the first up
    converged: list[float] = field(default_factory=list)  # seconds of the second up
    created: set[int] = field(default_factory=set)  # resources the first up created
    changed: set[int] = field(default_factory=set)  # changes the second up made


@dataclass
class Bench:
    plane: ControlPlane
    engine_env: dict[str, str]  # the stand-ins' plugin versions (the cloud's socket added)
    tmp: Path
    issued: datetime = field(default_factory=lambda: datetime.now(UTC).replace(microsecond=0))
    serial: int = 0

    def target(self, vms: int) -> StackTarget:
        from automation.engine.runner import StackKind, StackTarget
        from automation.kube.probe import sha256_hex
        from stacks.config import (
            AttemptSpec,
            CloudCredentialRef,
            ClusterRef,
            NodePoolStackConfig,
        )

        self.serial += 1
        pool = f"np-bench-{self.serial}"
        cluster = ClusterRef(id="cl-bench-standin", server_url="https://203.0.113.10:6443",
                             ca_sha256=sha256_hex(self.plane.ca_pem),
                             kubeconfig_path=str(self.plane.kubeconfig))
        config = NodePoolStackConfig(
            pool_id=pool, pool_name=pool, cluster=cluster,
            credential=CloudCredentialRef(provider=PROVIDER, profile="bench"),
            provider=PROVIDER, region=REGION, vm_type=VM_TYPE,
            attempts=tuple(AttemptSpec(id=f"at-{pool}-{i}", token_issued_at=self.issued,
                                       needs_token=True) for i in range(vms)))
        return StackTarget(kind=StackKind.NODE_POOL, key=pool, config=config)

    def run(self, engine: str, vms: int, converged: bool) -> tuple[float, float | None,
                                                                    int, int | None]:
        """One first ``up`` of a new ``vms``-VM pool on ``engine`` from nothing (and, when
        ``converged``, a second one): its seconds, the second's, the resources the first
        created and the changes the second made."""
        from automation.clock import ManualClock
        from automation.engine.mock.runner import MockEngineRunner
        from automation.engine.pulumi_driver import AutomationRunner
        from automation.simulators.cloud import CloudSimulator
        from automation.simulators.cloud_api import CloudService

        with tempfile.TemporaryDirectory(dir=self.tmp, prefix=f"{engine}-{vms}-") as run_dir:
            root = Path(run_dir)
            cloud = CloudSimulator(ManualClock(datetime(2026, 12, 1, tzinfo=UTC)),
                                   root / "cloud.json")
            service = CloudService(cloud) if engine == "real" else None
            try:
                runner: Any
                if service is None:
                    runner = MockEngineRunner(root / "home", cloud)
                else:
                    runner = AutomationRunner(root / "home",
                                              engine_env={**service.env, **self.engine_env})
                target = self.target(vms)
                began = time.perf_counter()
                first = runner.up(target)
                first_s = time.perf_counter() - began
                running = [v for v in cloud.vms.values() if v.state == "running"]
                if len(running) != vms:
                    raise RuntimeError(f"{engine} engine: {len(running)} VMs running after the "
                                       f"first up of a {vms}-VM pool")
                if not converged:
                    return first_s, None, first.summary.create, None
                began = time.perf_counter()
                second = runner.up(target)
                second_s = time.perf_counter() - began
                return first_s, second_s, first.summary.create, second.summary.changes
            finally:
                if service is not None:
                    service.close()


def prepare(tmp: Path) -> tuple[dict[str, str | None], dict[str, str], str]:
    """While the control plane starts: the real engine's environment (``automation.demo``'s,
    the kubernetes plugin installed in a PULUMI_HOME under ``tmp``), the stand-ins installed
    there, the engine's modules imported. Returns the environment changes, the stand-ins'
    part of the engine's environment, and the CLI's version."""
    import subprocess

    from automation.devcluster.engine_env import engine_environment, local_tools
    from automation.simulators.standin.install import install, standin_environment

    tools = local_tools()
    changes = engine_environment(tools, tmp / "pulumi-home", tmp / "engine-tmp")
    env = {k: v for k, v in {**os.environ, **changes}.items() if v is not None}
    install(env)
    version = subprocess.run([str(tools.pulumi), "version"], env=env, capture_output=True,
                             text=True, check=False).stdout.strip()
    _kube_plane.import_modules("pulumi.automation", "automation.engine.pulumi_driver",
                               "automation.engine.mock.runner", "stacks.node_pool")
    return changes, standin_environment(env), version


def measure(bench: Bench, sizes: list[int], runs: int, warmup: bool
            ) -> dict[tuple[str, int], Figures]:
    figures = {(engine, size): Figures() for engine in ENGINES for size in sizes}
    if warmup:
        for engine in ENGINES:
            bench.run(engine, 1, converged=True)
    big = max(sizes)
    for i in range(runs):
        for size in sizes:
            for engine in ENGINES:
                first, second, created, changed = bench.run(engine, size, size == big)
                fig = figures[engine, size]
                fig.first.append(first)
                fig.created.add(created)
                if second is not None and changed is not None:
                    fig.converged.append(second)
                    fig.changed.add(changed)
                extra = "" if second is None else f", converged {second:.2f} s ({changed} changes)"
                print(f"  run {i + 1}/{runs}: {engine} engine, {size} VMs: first up "
                      f"{first:.2f} s ({created} created){extra}", file=sys.stderr, flush=True)
    return figures


def counts(values: set[int]) -> str:
    return "/".join(str(v) for v in sorted(values)) or "-"


def main() -> None:
    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
        p.add_argument("--sizes", default="10,25,50,100",
                       help="pool sizes in VMs, comma-separated; the largest is also measured "
                            "converged")

    args = _cli.parse(__doc__, MARKS, options)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    runs, warmup = args.runs, True
    if args.smoke:
        sizes, runs, warmup = [1, 2], 1, False
    if not sizes or min(sizes) < 1 or runs < 1:
        raise SystemExit("--sizes must name pool sizes of 1 VM or more, --runs 1 or more")

    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-standin-") as tmp_str:
        tmp = Path(tmp_str)
        plane, (changes, standin_env, version) = _kube_plane.start(tmp / "cp",
                                                                   lambda: prepare(tmp))
        try:
            from automation.devcluster.engine_env import environment

            with environment(changes):
                bench = Bench(plane, standin_env, tmp)
                figures = measure(bench, sizes, runs, warmup)
        finally:
            plane.stop()
    total = time.perf_counter() - began

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"settings: {PROVIDER} pool ({VM_TYPE}, {REGION}), one attempt per VM, each with "
          f"its bootstrap token; sizes {','.join(map(str, sizes))} VMs; median of {runs} "
          f"run(s); warm-up {'1-VM up per engine' if warmup else 'none'}")
    print(f"real engine: pulumi {version} (built from source), kubernetes plugin built from "
          "source -> local control plane, stand-in aws/random plugins -> simulated cloud")
    print("mock engine: MockEngineRunner -> simulated cloud (nothing written to the API "
          "server)")
    print(f"machine: {os.cpu_count()} cores, {platform.python_implementation()} "
          f"{platform.python_version()}, load average at the end {load}; "
          f"whole run {total:.0f} s")
    print()

    big = max(sizes)
    mock, real = figures["mock", big], figures["real", big]

    def ratio(r: list[float], m: list[float]) -> str:
        return f"{median(r) / median(m):.1f}x" if median(m) else "-"

    print_table(f"A {big}-VM pool, seconds, median of {runs}",
                ["pass", "mock engine", "real engine", "real/mock", "mock changes",
                 "real changes"],
                [("first up (fresh stack)", f"{median(mock.first):.2f}",
                  f"{median(real.first):.2f}", ratio(real.first, mock.first),
                  counts(mock.created), counts(real.created)),
                 ("converged up (nothing to change)", f"{median(mock.converged):.2f}",
                  f"{median(real.converged):.2f}", ratio(real.converged, mock.converged),
                  counts(mock.changed), counts(real.changed))])
    print()
    rows = []
    for size in sizes:
        m, r = figures["mock", size], figures["real", size]
        rows.append((str(size), f"{median(m.first):.2f}", f"{median(m.first) / size:.3f}",
                     f"{median(r.first):.2f}", f"{median(r.first) / size:.3f}",
                     ratio(r.first, m.first)))
    print_table(f"First up as the pool grows, seconds and seconds per VM, median of {runs}",
                ["VMs", "mock s", "mock s/VM", "real s", "real s/VM", "real/mock"], rows)


if __name__ == "__main__":
    main()
