"""The Go tools the test suite builds: what each build took and weighs, and what a run with
the cache warm costs (``tools/build.py`` finding everything built), in one run.

Build seconds are those each set's build recorded in its build.json (a cold build, unless
Go's own build cache was warm then: ``BENCH_COLD=1`` rebuilds everything into a temporary
cache with an empty GOCACHE, which takes about half an hour on two cores). Needs Go and
every tool set built: a set not built would be built by the warm run.

    .venv/bin/python benchmarks/bench_tools.py [--smoke]     (BENCH_RUNS=5 by default)

--smoke: one warm run, no warm-up run, never the cold build; the warm run works on a
temporary cache whose set folders link to the real ones, so the links it refreshes in
``<cache>/bin`` are temporary too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _cli  # noqa: E402
from benchmarks._table import median, ms, print_table, time_command  # noqa: E402

# Not the control plane nor the engine themselves: every tool set tools/build.py builds.
MARKS = ("kube", "engine")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def cold_build() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ANYCLOUD_TOOLS_CACHE": f"{tmp}/tools", "GOCACHE": f"{tmp}/go"}
        began = time.perf_counter()
        out = subprocess.run([sys.executable, str(ROOT / "tools" / "build.py"), "--json"],
                             env=env, check=True, capture_output=True, text=True).stdout
        total = time.perf_counter() - began
    seconds = {name: float(m["buildSeconds"]) for name, m in json.loads(out).items()}
    return {**seconds, "total": total}


def mirror_cache(dest: Path) -> dict[str, str]:
    """The environment of a tools/build.py run on ``dest``: a cache whose set folders link to
    the built ones (found as cached), its ``bin/`` links its own."""
    from tools.build import TOOL_SETS, go_version, set_dir

    go = go_version()
    dest.mkdir(parents=True)
    for tool_set in TOOL_SETS:
        built = set_dir(tool_set, go)
        (dest / built.name).symlink_to(built, target_is_directory=True)
    return {**os.environ, "ANYCLOUD_TOOLS_CACHE": str(dest)}


def main() -> None:
    args = _cli.parse(__doc__, MARKS)
    runs, warmup = (1, False) if args.smoke else (RUNS, True)
    from tools.build import TOOL_SETS, BuildError, cache_root, go_version, manifest

    try:
        go = go_version()
    except BuildError as exc:
        _cli.missing(str(exc))
    rows = []
    for tool_set in TOOL_SETS:
        data = manifest(tool_set, go)
        if data is None:
            if args.smoke:  # the warm run would build it: minutes, and the network
                _cli.missing(f"tool set {tool_set.name} is not built: run `python3 "
                             "tools/build.py`")
            rows.append((tool_set.name, "not built", "", ""))
            continue
        versions = ", ".join(dict(data["versions"]).values())  # type: ignore[call-overload]
        rows.append((tool_set.name, versions, f"{data['buildSeconds']}",
                     f"{int(data['sizeBytes']) / 2**20:.0f}"))  # type: ignore[call-overload]
    print_table("Tool sets as built (build.json)", ["set", "versions", "build s", "MiB"], rows)
    used = subprocess.run(["du", "-sm", str(cache_root())], capture_output=True, text=True)
    print(f"cache {cache_root()}: {used.stdout.split()[0] if used.stdout else '?'} MiB on disk")
    print()

    with tempfile.TemporaryDirectory() as tmp:
        env = mirror_cache(Path(tmp) / "tools") if args.smoke else None
        warm = time_command([sys.executable, str(ROOT / "tools" / "build.py")], runs, env,
                            warmup)
    base = time_command([sys.executable, "-c", "pass"], runs, warmup=warmup)
    print_table(f"Warm cache, median of {runs}", ["command", "ms", "vs python -c pass"], [
        ("python -c pass", ms(median(base)), "1.0x"),
        ("tools/build.py (everything cached)", ms(median(warm)),
         f"{median(warm) / median(base):.1f}x"),
    ])
    if os.environ.get("BENCH_COLD") == "1" and not args.smoke:
        print()
        cold = cold_build()
        print_table("Cold build (empty tool cache and GOCACHE; modules already downloaded)",
                    ["set", "seconds"], [(k, f"{v:.0f}") for k, v in cold.items()])


if __name__ == "__main__":
    main()
