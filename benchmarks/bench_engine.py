"""The cluster add-on stack on the real engine (Pulumi CLI and kubernetes provider built from
source, against the local control plane) versus the SDK's mock engine evaluating the same
program, in one run.

Real engine: ``up`` of a fresh stack (the objects created on the API server), a no-change
``preview``, and ``destroy``. Mock engine: ``evaluate`` of the same target (what ``plan`` and
``policy check`` do). BENCH_RUNS runs each (median). Needs the tools built by
``python3 tools/build.py``.

A second table: opening the stack, which every real-engine operation does first (create or
select it, check the CLI, install its plugins), as the driver does it (the CLI's version
checked once per process, a plugin installed only when missing: ``pulumi_cli``) against the
SDK's defaults (``pulumi version`` for each workspace, ``pulumi plugin install`` for each
plugin each time), both in the same run.

    .venv/bin/python benchmarks/bench_engine.py [--smoke]     (BENCH_RUNS=3 by default)

--smoke: one run of each (one mock ``evaluate``; one ``up`` of a fresh stack, one no-change
``preview`` and one ``destroy`` on the real engine; one open each way), no warm-up
evaluation. As in the full run, the control plane starts while the kubernetes plugin is
installed and the engine's modules are imported (not run), and is thrown away at the end
(its components SIGKILLed, not shut down one at a time).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli, _kube_plane
from benchmarks._table import median, print_table

if TYPE_CHECKING:
    from automation.devcluster.control_plane import ControlPlane
    from automation.engine import pulumi_driver
    from automation.engine.runner import StackTarget

MARKS = ("kube", "engine", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
WARMUP = True
T = TypeVar("T")


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def start_engine_env(tmp: Path) -> Callable[[], None]:
    """``engine_env``, its plugin install left running: returns the function that waits for
    it (and fails as ``engine_env`` does), so that the caller can start the control plane
    meanwhile (the install copies the ~300 MB plugin, seconds of disk)."""
    from automation.devcluster import binaries

    pulumi = binaries.find("pulumi")
    provider = binaries.find("pulumi-resource-kubernetes")
    version = binaries.plugin_version(provider)
    os.environ.update({
        "PULUMI_HOME": str(tmp / "pulumi-home"),
        "PATH": f"{pulumi.parent}{os.pathsep}{os.environ['PATH']}",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "ANYCLOUD_PULUMI_PLUGINS": f"kubernetes={version}",
    })
    args = [str(pulumi), "plugin", "install", "resource", "kubernetes", version,
            "--file", str(provider)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def wait() -> None:
        out, err = proc.communicate()
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, args, out, err)

    return wait


def engine_env(tmp: Path) -> None:
    """What the test suite's pulumi_engine fixture does: tools on PATH, a PULUMI_HOME of
    our own with the kubernetes plugin built from source installed (the tools found as
    ``_cli.parse`` checked them, given the ``engine`` mark)."""
    start_engine_env(tmp)()


@contextmanager
def engine_plane(tmp: Path, meanwhile: Callable[[], T] | None = None
                 ) -> Iterator[tuple[ControlPlane, T | None]]:
    """The real engine made ready (``start_engine_env``) and the local control plane under
    ``tmp/cp`` started at once: the plugin install, the engine's imports and ``meanwhile``
    (what it returns is yielded beside the plane) run while the plane starts
    (``_kube_plane.start``). On leaving, the plane is thrown away (``discard``)."""
    installed = start_engine_env(tmp)

    def prepare() -> T | None:
        import_engine_modules()
        value = meanwhile() if meanwhile is not None else None
        installed()
        return value

    plane, value = _kube_plane.start(tmp / "cp", prepare)
    try:
        yield plane, value
    finally:
        discard(plane)


def import_engine_modules() -> None:
    """Import what a first mock ``evaluate`` or real ``up`` of the add-on stack would (the
    Pulumi SDK, its Automation API, the kubernetes provider SDK, the program), while the
    control plane starts: the runs themselves still do all their work."""
    _kube_plane.import_modules("pulumi.automation", "automation.engine.mock.program",
                               "automation.engine.mock.providers", "stacks.cluster_addons")


def open_with_sdk_defaults(runner: pulumi_driver.AutomationRunner, target: StackTarget) -> None:
    """Open the stack as the driver did before ``pulumi_cli``: the SDK's own PulumiCommand
    (``pulumi version``) for the workspace, then ``pulumi plugin install`` for every plugin."""
    from pulumi import automation as auto

    from automation.engine.pulumi_driver import PROJECT, plugins_for, workspace_options
    from automation.engine.secrets import state_settings

    opts = workspace_options(target, runner.home, state_settings(runner.home, runner.environ))
    stack = auto.create_or_select_stack(stack_name=target.stack_name, project_name=PROJECT,
                                        program=target.program(), opts=opts)
    for name, version in plugins_for(target, runner.environ).items():
        stack.workspace.install_plugin(name, version)


def discard(plane: ControlPlane) -> None:
    """SIGKILL every component of a plane about to be removed with its directory."""
    for proc in plane.processes.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
    for proc in plane.processes.values():
        proc.wait(timeout=30)
    plane.processes.clear()


def main() -> None:
    global RUNS, WARMUP
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, WARMUP = 1, False

    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        with engine_plane(tmp) as (plane, _):
            from automation.engine.mock.runner import MockEngineRunner
            from automation.engine.pulumi_driver import AutomationRunner
            from tests.automation.engine.test_real_engine import addons_target, remove_addons

            target = addons_target(plane, "cl-bench")
            mock = MockEngineRunner(tmp / "mock-home")
            if WARMUP:
                mock.evaluate(target)  # warm-up: imports
            mock_eval = [timed(lambda: mock.evaluate(target)) for _ in range(RUNS)]
            ups, previews, destroys = [], [], []
            for i in range(RUNS):
                if i:
                    remove_addons(plane)  # retained on destroy: the next up creates them
                runner = AutomationRunner(tmp / f"home-{i}")
                ups.append(timed(lambda r=runner: r.up(target)))
                previews.append(timed(lambda r=runner: r.preview(target)))
                destroys.append(timed(lambda r=runner: r.destroy(target)))
            # The same stack opened both ways, alternately (the driver's CLI check is warm
            # from the runs above, as in any process after its first operation).
            sdk_opens, opens = [], []
            for _ in range(RUNS):
                sdk_opens.append(timed(lambda: open_with_sdk_defaults(runner, target)))
                opens.append(timed(lambda: runner._stack(target)))
    base = median(mock_eval)
    print_table(f"Cluster add-on stack (RuntimeClass + DaemonSet), seconds, median of {RUNS}",
                ["run", "seconds", "vs mock evaluate"],
                [("mock engine: evaluate", f"{base:.2f}", "1.0x"),
                 ("real engine: up (fresh stack)", f"{median(ups):.2f}",
                  f"{median(ups) / base:.1f}x"),
                 ("real engine: preview, no change", f"{median(previews):.2f}",
                  f"{median(previews) / base:.1f}x"),
                 ("real engine: destroy", f"{median(destroys):.2f}",
                  f"{median(destroys) / base:.1f}x")])
    sdk_open = median(sdk_opens)
    print_table(f"Opening the stack before each real-engine operation, seconds, median of "
                f"{RUNS}", ["how", "seconds", "vs SDK defaults"],
                [("SDK defaults: version check + plugin install each time", f"{sdk_open:.2f}",
                  "1.00x"),
                 ("driver: CLI checked once, plugins only when missing",
                  f"{median(opens):.2f}", f"{median(opens) / sdk_open:.2f}x")])


if __name__ == "__main__":
    main()
