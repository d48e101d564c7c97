"""The command line every benchmark shares: ``--help``, ``--smoke``, and the tools check of
the benchmarks that run the local control plane or the real Pulumi engine.

Each ``benchmarks/bench_*.py`` calls ``parse`` at the start of ``main``, before it imports
anything heavy (no Pulumi or provider SDK: tests/benchmarks/test_smoke.py checks): ``--help``
prints the script's docstring (what it measures) and its options and exits 0 having run
nothing. ``--smoke`` asks for one small iteration of every code path the script measures
(tiny sizes, one run, no warm-up runs), with no network and nothing written outside
temporary directories: the table is printed as usual, its figures mean nothing.
test_smoke.py runs every script that way, so a benchmark whose code moved under it fails a
test instead of rotting.

A script declares its needs in ``MARKS`` at module level (a literal tuple: the smoke test
reads it from the source, without importing the script) and passes it to ``parse``. The
names are pytest markers (pyproject.toml): ``kube`` (the local control plane), ``engine``
(the Pulumi CLI and the kubernetes provider plugin), ``postgres`` (uses the test PostgreSQL
when it answers), ``slow`` (its smoke run takes more than a few seconds). For ``kube`` and
``engine`` ``parse`` checks, after parsing, that the tools ``tools/build.py`` builds are
there (``automation.devcluster.binaries`` finds them, as the tests do): when one is missing
the script exits with ``EXIT_MISSING`` and a message saying how to get it, except under
``CI=true``, where a missing tool is a failure (exit 1), as in ``tests/conftest.py``. With
``kube``, kubectl's discovery cache goes to a temporary directory (not ~/.kube/cache).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Under CI=true a missing tool or PostgreSQL fails; elsewhere the script says what is missing
# and exits with EXIT_MISSING (automake's "skipped"), distinct from a failure (1).
IN_CI = os.environ.get("CI") == "true"
EXIT_MISSING = 77
MARKERS = ("kube", "engine", "postgres", "slow")
TOOLS = {
    "kube": ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl",
             "kwok"),
    "engine": ("pulumi", "pulumi-resource-kubernetes"),
}
POSTGRES_URL = os.environ.get(
    "ANYCLOUD_TEST_POSTGRES_URL",
    "postgresql+psycopg://anycloud:anycloud@127.0.0.1:5432/anycloud_test",
)


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true",
                   help="one small iteration of every code path measured (tiny sizes, one "
                        "run, no warm-up runs), the table printed as usual: checks that the "
                        "script runs; its figures mean nothing")
    return p


def parse(doc: str | None, marks: Sequence[str] = (),
          options: Callable[[argparse.ArgumentParser], object] | None = None,
          argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The script's arguments (``options`` adds its own); then the tools ``marks`` need."""
    unknown = set(marks) - set(MARKERS)
    assert not unknown, f"MARKS may only name {MARKERS}, not {sorted(unknown)}"
    p = parser(doc)
    if options is not None:
        options(p)
    args = p.parse_args(argv)
    require(*[m for m in marks if m in TOOLS])
    return args


def missing(reason: str) -> None:
    """Something the benchmark needs is not here: exit 1 under CI=true, else EXIT_MISSING."""
    name = Path(sys.argv[0]).name
    if IN_CI:
        print(f"{name}: {reason} (CI=true: missing tools are failures)", file=sys.stderr)
        raise SystemExit(1)
    print(f"{name}: skipped: {reason}", file=sys.stderr)
    raise SystemExit(EXIT_MISSING)


def tool_missing(*needs: str) -> str | None:
    """Why a tool ``needs`` (keys of TOOLS) names cannot be used, or None when all are found
    (``automation.devcluster.binaries``' search, as the tests and ``anycloud`` do)."""
    from automation.devcluster import binaries

    try:
        for name in [tool for need in needs for tool in TOOLS[need]]:
            found = binaries.find(name)
            if name == "pulumi-resource-kubernetes":
                binaries.plugin_version(found)  # built by tools/build.py, with its build.json
    except binaries.ToolMissing as exc:
        return exc.message
    return None


def require(*needs: str) -> None:
    """The tools of ``needs`` are all found, or the script stops here (``missing``)."""
    if not needs:
        return
    from tools.build import point_at_built_tools

    point_at_built_tools()
    reason = tool_missing(*needs)
    if reason is not None:
        missing(reason)
    if "kube" in needs and "KUBECACHEDIR" not in os.environ:
        # kubectl's discovery cache, ~/.kube/cache by default: one folder per API server
        # address, a new one every run. A temporary one instead.
        cache = tempfile.mkdtemp(prefix="bench-kubectl-")
        atexit.register(shutil.rmtree, cache, True)
        os.environ["KUBECACHEDIR"] = cache


def postgres_url() -> str | None:
    """The test PostgreSQL when it answers. When it does not: None (the caller notes it),
    or under CI=true the script fails."""
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
        with engine.connect():
            pass
        engine.dispose()
    except Exception:
        if IN_CI:
            print(f"PostgreSQL not reachable at {POSTGRES_URL} (CI=true: a missing PostgreSQL "
                  "is a failure)", file=sys.stderr)
            raise SystemExit(1) from None
        return None
    return POSTGRES_URL
