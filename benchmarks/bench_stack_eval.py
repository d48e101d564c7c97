"""Node-pool stack evaluation under the mock engine: time per pool size and per cloud.

Prints a table: median wall and CPU time of the whole program run (registration of every
resource and resolution of every output) for pools of 1, 10 and 100 VMs per cloud, per-VM
time, the marginal cost of one more VM ((t100 - t10) / 90), and the pool's time as a multiple
of two floors measured in the same run through the same mock path (``run_program``):

- ``sdk-floor``: the resource kinds a VM needs (components, random, Secret, the cloud's
  instance), registered with no dependencies between them: what the SDK and the provider
  SDK classes cost, whatever our components do;
- ``trivial``: as many trivial custom resources as the pool registers: the bare cost of one
  registration through the SDK and the mock engine.

The machine may be shared: wall time includes waiting for a core, CPU time does not. Also
prints the import cost of each provider SDK (fresh subprocesses) next to `python -c pass`,
`import pulumi`, and an empty program under the engine.

Goal (issue 9): 100 VMs under 3 s on every cloud (aws, gcp, azure).

    .venv/bin/python benchmarks/bench_stack_eval.py [--runs 5] [--clouds aws,gcp,azure]
        [--no-imports] [--smoke]

--smoke: pools of 1 and 2 VMs on every cloud, each program run once (that run timed and its
resources counted: the full run counts them in a run of its own), no warm-up runs (the goal
is not checked). Import costs: the two baselines in a fresh subprocess once each; each
provider SDK's import statement runs once in this process after the programs (which import
those SDKs: it costs nothing more), checked, not timed: the same ``python -c`` path as the
baselines, with other code (a fresh interpreter importing the five SDKs costs ~7 s of CPU).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _cli  # noqa: E402

MARKS = ("slow",)
T = TypeVar("T")
SIZES = (1, 10, 100)
IMPORTS = {
    "baseline: python -c pass": "pass",
    "baseline: import pulumi": "import pulumi",
    "pulumi_aws (ec2)": "import pulumi_aws as m; m.ec2.Instance; m.ec2.Vpc; m.ec2.get_ami_output",
    "pulumi_gcp (compute)": "import pulumi_gcp as m; m.compute.Instance; m.compute.Firewall",
    "pulumi_azure_native (compute, network)": (
        "import pulumi_azure_native as m; m.compute.VirtualMachine; m.network.VirtualNetwork;"
        " m.resources.ResourceGroup"
    ),
    "pulumi_kubernetes (core, apps)": (
        "import pulumi_kubernetes as m; m.core.v1.Secret; m.apps.v1.DaemonSet;"
        " m.apiextensions.CustomResource"
    ),
    "pulumi_random": "import pulumi_random as m; m.RandomString",
}


def _config(provider: str, n: int):  # type: ignore[no-untyped-def]
    from stacks.config import AttemptSpec, CloudCredentialRef, ClusterRef, NodePoolStackConfig

    cred = {
        "aws": CloudCredentialRef(provider="aws", profile="bench"),
        "gcp": CloudCredentialRef(provider="gcp", project="bench", key_file="/k.json"),
        "azure": CloudCredentialRef(provider="azure", subscription_id="s", tenant_id="t"),
    }[provider]
    issued = datetime(2026, 1, 1, tzinfo=UTC)
    return NodePoolStackConfig(
        pool_id="np-bench",
        pool_name="bench",
        cluster=ClusterRef(
            id="cl-bench",
            server_url="https://203.0.113.10:6443",
            ca_sha256="c" * 64,
            kubeconfig_path="/dev/null",
        ),
        credential=cred,
        provider=provider,  # type: ignore[arg-type]
        region={"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}[provider],
        vm_type="bench",
        attempts=tuple(AttemptSpec(id=f"at-{i:04d}", token_issued_at=issued) for i in range(n)),
        hosts_service=True,
    )


def _sdk_floor(provider: str, n: int) -> Callable[[], None]:
    """The same resource kinds per VM, registered with no dependencies between them: what
    the SDK itself costs, whatever our components do."""

    def program() -> None:
        import pulumi
        import pulumi_kubernetes as k8s
        import pulumi_random as random

        for i in range(n):
            pulumi.ComponentResource("bench:floor:Vm", f"vm{i}")
            pulumi.ComponentResource("bench:floor:Token", f"tok{i}")
            random.RandomString(f"r{i}", length=22)
            k8s.core.v1.Secret(f"s{i}", string_data={"a": pulumi.Output.secret("b")})
            if provider == "aws":
                import pulumi_aws as aws

                aws.ec2.Instance(f"i{i}", ami="ami-1", instance_type="t3.micro")
            elif provider == "gcp":
                import pulumi_gcp as gcp

                gcp.compute.Instance(
                    f"i{i}", machine_type="n2", zone="z", boot_disk={}, network_interfaces=[{}]
                )
            else:
                import pulumi_azure_native as azure

                random.RandomPassword(f"pw{i}", length=32)
                azure.compute.VirtualMachine(f"vm{i}", resource_group_name="rg")

    return program


def _trivial_floor(count: int) -> Callable[[], None]:
    """``count`` custom resources of a type no provider knows, one input each."""

    def program() -> None:
        import pulumi

        for i in range(count):
            pulumi.CustomResource("bench:index:Trivial", f"t{i}", {"index": i})

    return program


def _time(fn: Callable[[], T], runs: int) -> tuple[float, float, T]:
    """Median wall and median CPU seconds of ``runs`` calls, and the last call's result."""
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu), result


def _import_cost(code: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runs", type=int, default=5, help="runs per measurement (median)")
        p.add_argument("--clouds", default="aws,gcp,azure")
        p.add_argument("--no-imports", action="store_true", help="skip the import costs")

    args = _cli.parse(__doc__, MARKS, options)
    sizes: tuple[int, ...] = SIZES
    least_runs, warmup = 3, True
    if args.smoke:
        args.runs, sizes, least_runs, warmup = 1, (1, 2), 1, False
    clouds = [c for c in args.clouds.split(",") if c]

    # Smoke: the provider SDKs' statements run in this process, after the programs.
    in_process = {k: v for k, v in IMPORTS.items() if not k.startswith("baseline:")
                  } if args.smoke and not args.no_imports else {}
    if not args.no_imports:
        print(f"import cost (fresh subprocess, median of {args.runs}, wall ms)")
        base = 0.0
        for label, code in IMPORTS.items():
            if label in in_process:
                continue
            t = _import_cost(code, args.runs)
            if label.startswith("baseline: python"):
                base = t
            extra = "" if label.startswith("baseline: python") else (
                f"  (+{(t - base) * 1000:7.0f})")
            print(f"  {label:<42} {t * 1000:8.0f}{extra}")
        print()

    from automation.engine.mock.program import run_program
    from stacks.node_pool import build_program

    def empty() -> None:
        return None

    if warmup:
        run_program(empty)  # warm the runtime
    empty_ms = _time(lambda: run_program(empty), args.runs)[0] * 1000
    print(f"baseline: empty program under the mock engine: {empty_ms:.1f} ms")
    print()
    header = (
        f"{'cloud':<6} {'program':<9} {'VMs':>4} {'resources':>9} {'wall ms':>8} {'cpu ms':>7}"
        f" {'ms/VM':>7} {'marginal ms/VM':>15} {'pool/floor':>10} {'pool/trivial':>12}"
    )
    print(header)
    print("-" * len(header))
    verdicts: list[str] = []
    for cloud in clouds:
        if warmup:
            run_program(build_program(_config(cloud, 1)))  # warm this cloud's SDK imports
            run_program(_sdk_floor(cloud, 1))
        wall: dict[tuple[str, int], float] = {}
        cpu_ms: dict[tuple[str, int], float] = {}
        for n in sizes:
            runs = max(least_runs, args.runs if n < 100 else args.runs // 2 + 1)
            pool = build_program(_config(cloud, n))
            # Smoke: each program's one run is timed and its resources are counted from it;
            # the full run counts them in a run of its own first.
            timed: dict[str, tuple[float, float, Any]] = {}
            if args.smoke:
                timed["pool"] = _time(lambda p=pool: run_program(p), runs)  # type: ignore[misc]
                count = len(timed["pool"][2].resources)
            else:
                count = len(run_program(pool).resources)
            programs = {"pool": pool, "sdk-floor": _sdk_floor(cloud, n),
                        "trivial": _trivial_floor(count)}
            for kind, program in programs.items():
                if args.smoke:
                    if kind not in timed:
                        timed[kind] = _time(lambda p=program: run_program(p), runs)  # type: ignore[misc]
                    t, cpu, result = timed[kind]
                    resources = len(result.resources)
                else:
                    resources = count if kind == "pool" else len(run_program(program).resources)
                    t, cpu, _ = _time(lambda p=program: run_program(p), runs)  # type: ignore[misc]
                wall[kind, n], cpu_ms[kind, n] = t * 1000, cpu * 1000
                # The marginal cost of one more VM, between the two largest sizes.
                marginal, (mid, top) = "", sizes[-2:]
                if n == top and (kind, mid) in wall:
                    marginal = f"{(wall[kind, top] - wall[kind, mid]) / (top - mid):.1f}"
                # The pool's time as a multiple of this floor's, in the floor's own column.
                ratio = f"{wall['pool', n] / wall[kind, n]:.2f}" if kind != "pool" else ""
                ratios = {"pool": "", "sdk-floor": f" {ratio:>10}",
                          "trivial": f" {'':>10} {ratio:>12}"}[kind]
                print(
                    f"{cloud:<6} {kind:<9} {n:>4} {resources:>9} {wall[kind, n]:>8.0f}"
                    f" {cpu * 1000:>7.0f} {wall[kind, n] / n:>7.1f} {marginal:>15}{ratios}"
                )
        if ("pool", 100) in wall:
            met = "met" if wall["pool", 100] < 3000 else "NOT met"
            verdicts.append(f"{cloud} {wall['pool', 100]:.0f} ms wall ({met}),"
                            f" {cpu_ms['pool', 100]:.0f} ms cpu")
    if in_process:
        print()
        print("import statements run in this process (smoke: checked, not timed)")
        for label, code in in_process.items():
            exec(code, {})  # our own literal statements (IMPORTS)
            print(f"  {label:<42} {'ok':>8}")
    print()
    # On a shared machine wall time includes waiting for a core; the run itself is one
    # thread, so its CPU time is what it costs on an idle one.
    print("goal (100 VMs under 3000 ms, every cloud):",
          "; ".join(verdicts) or "not measured (no 100-VM pool)")


if __name__ == "__main__":
    main()
