"""The Go tools the test suite builds: what each build took and weighs, and what a run with
the cache warm costs (``tools/build.py`` finding everything built), in one run.

Build seconds are those each set's build recorded in its build.json (a cold build, unless
Go's own build cache was warm then: ``BENCH_COLD=1`` rebuilds everything into a temporary
cache with an empty GOCACHE, which takes about half an hour on two cores).
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

from benchmarks._table import median, ms, print_table, time_command  # noqa: E402

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


def main() -> None:
    from tools.build import TOOL_SETS, cache_root, go_version, manifest

    go = go_version()
    rows = []
    for tool_set in TOOL_SETS:
        data = manifest(tool_set, go)
        if data is None:
            rows.append((tool_set.name, "not built", "", ""))
            continue
        versions = ", ".join(dict(data["versions"]).values())  # type: ignore[call-overload]
        rows.append((tool_set.name, versions, f"{data['buildSeconds']}",
                     f"{int(data['sizeBytes']) / 2**20:.0f}"))  # type: ignore[call-overload]
    print_table("Tool sets as built (build.json)", ["set", "versions", "build s", "MiB"], rows)
    used = subprocess.run(["du", "-sm", str(cache_root())], capture_output=True, text=True)
    print(f"cache {cache_root()}: {used.stdout.split()[0] if used.stdout else '?'} MiB on disk")
    print()

    warm = time_command([sys.executable, str(ROOT / "tools" / "build.py")], RUNS)
    base = time_command([sys.executable, "-c", "pass"], RUNS)
    print_table(f"Warm cache, median of {RUNS}", ["command", "ms", "vs python -c pass"], [
        ("python -c pass", ms(median(base)), "1.0x"),
        ("tools/build.py (everything cached)", ms(median(warm)),
         f"{median(warm) / median(base):.1f}x"),
    ])
    if os.environ.get("BENCH_COLD") == "1":
        print()
        cold = cold_build()
        print_table("Cold build (empty tool cache and GOCACHE; modules already downloaded)",
                    ["set", "seconds"], [(k, f"{v:.0f}") for k, v in cold.items()])


if __name__ == "__main__":
    main()
