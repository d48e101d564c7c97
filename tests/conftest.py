"""Fixtures shared by every test package: ledgers on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa

from tests.ledger_templates import LedgerTemplates, in_schema
from tests.processes import MARK, leftovers, wait_for_exit
from tools.build import point_at_built_tools

if TYPE_CHECKING:
    from automation.devcluster.control_plane import ControlPlane

# Under CI=true a missing tool, PostgreSQL or control plane fails the test; elsewhere it
# skips, saying how to get what is missing.
IN_CI = os.environ.get("CI") == "true"

# The suite's time budget (a run over it fails; tests/time_budget.py says how it is judged).
pytest_plugins = ["tests.time_budget"]


# Every process the suite starts carries this mark (tests/processes.py). Each pytest-xdist
# worker gets a mark of its own (they inherit the controller's environment), so the servers
# one worker runs are never another worker's leftovers; a process the worker starts that
# imports this module again keeps the worker's mark.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if WORKER and not os.environ.get(MARK, "").endswith(f"-{WORKER}"):
    os.environ[MARK] = f"{secrets.token_hex(8)}-{WORKER}"
SESSION = os.environ.setdefault(MARK, secrets.token_hex(8))


@pytest.fixture(autouse=True)
def leaves_no_process_behind() -> Iterator[None]:
    """A test fails when a process it started outlives its parent (an engine killed under
    its plugins, a server's worker): the leftovers are ended and named."""
    import contextlib
    import signal

    before = set(leftovers(SESSION))
    yield
    left = wait_for_exit(SESSION, before, seconds=10)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "processes left behind (ended now): " + "; ".join(
        f"{pid}: {cmd}" for pid, cmd in sorted(left.items()))


def missing(reason: str) -> None:
    """A tool or service the test needs is not here: a failure in CI, a skip elsewhere."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: missing tools are failures)", pytrace=False)
    pytest.skip(reason)


# The role and database `.ci/postgres.sh` makes.
POSTGRES_URL = os.environ.get(
    "ANYCLOUD_TEST_POSTGRES_URL",
    "postgresql+psycopg://anycloud:anycloud@127.0.0.1:5432/anycloud_test",
)


def _postgres_available() -> bool:
    try:
        engine = sa.create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
        with engine.connect():
            pass
        engine.dispose()
        return True
    except Exception:
        return False


POSTGRES_AVAILABLE = _postgres_available()


@pytest.fixture
def memory_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime directory in /dev/shm for opened secrets (sealed kubeconfigs),
    removed after the test: nothing it opened outlives it."""
    from automation import memfiles

    path = Path("/dev/shm") / f"anycloud-test-{os.getpid()}-{secrets.token_hex(3)}"
    monkeypatch.setenv(memfiles.RUNTIME_DIR_ENV, str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sqlite_url(tmp_path) -> str:  # type: ignore[no-untyped-def]
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def postgres_url(ledger_templates: LedgerTemplates) -> Iterator[str]:
    """A fresh schema per test, selected through the connection's search_path (made and
    dropped over the worker's one admin engine: a new engine and connection a test cost
    ~25 ms of the ~125 a PostgreSQL ledger took to set up)."""
    if not POSTGRES_AVAILABLE:
        missing(f"PostgreSQL not reachable at {POSTGRES_URL}: start it (`.ci/run` shows how) "
                "or point ANYCLOUD_TEST_POSTGRES_URL at one")
    schema = f"t_{secrets.token_hex(6)}"
    with ledger_templates.admin().begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    yield in_schema(POSTGRES_URL, schema)
    with ledger_templates.admin().begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(scope="session")
def ledger_templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerTemplates]:
    """New ledgers at the newest schema by copying one migrated per worker
    (tests/ledger_templates.py says why and what still runs the migrations)."""
    templates = LedgerTemplates(tmp_path_factory.mktemp("ledger-template"), POSTGRES_URL)
    yield templates
    templates.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(name))


# -- the real control plane ---------------------------------------------------------------

# The tool sets tools/build.py built for the current pins, first on the binaries' search path.
point_at_built_tools()


def _report(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, controller-manager, scheduler and kwok on loopback, started
    once per session. Tests share it: each works in names of its own."""
    from automation.devcluster import control_plane as cp
    from automation.devcluster.binaries import ToolMissing

    try:
        plane = cp.start(tmp_path_factory.mktemp("control-plane"))
    except ToolMissing as exc:
        missing(exc.message)
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in plane.timings.items())
    _report(request.config, f"\ncontrol plane {plane.server} started: {timings}")
    yield plane
    plane.stop()


@pytest.fixture(autouse=True)
def control_plane_still_runs(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test on the shared control plane runs only while every component does, and one that
    exits during the test is named there with its log, rather than left to surface as a
    timeout in some later test's wait."""
    if "control_plane" not in request.fixturenames:
        yield
        return
    plane = request.getfixturevalue("control_plane")

    def check(when: str) -> None:
        gone = plane.exited()
        if gone:
            pytest.fail(f"control plane component(s) exited {when}: " + "\n".join(
                f"{name}, log ends:\n{tail}" for name, tail in gone.items()), pytrace=False)

    check("before this test")
    yield
    check("during this test")


# -- the real engine ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pulumi_engine(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The real Pulumi engine: the CLI built from source with a PULUMI_HOME of its own, the
    kubernetes provider plugin built from source installed there under its own version, and
    ``ANYCLOUD_PULUMI_PLUGINS`` naming that version. Returns the environment to run with
    (the ``engine_env`` fixture applies it)."""
    import subprocess

    from automation.devcluster import binaries

    try:
        pulumi = binaries.find("pulumi")
        provider = binaries.find("pulumi-resource-kubernetes")
        version = binaries.plugin_version(provider)
    except binaries.ToolMissing as exc:
        missing(exc.message)
    home = tmp_path_factory.mktemp("pulumi-home")
    env = {
        "PULUMI_HOME": str(home),
        "PATH": os.pathsep.join([str(pulumi.parent), os.environ.get("PATH", "")]),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        # Nothing may be downloaded: a plugin the tests did not build is a failure.
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "ANYCLOUD_PULUMI_PLUGINS": f"kubernetes={version}",
    }
    subprocess.run([str(pulumi), "plugin", "install", "resource", "kubernetes", version,
                    "--file", str(provider)], env={**os.environ, **env}, check=True,
                   capture_output=True)
    _report(request.config, f"\npulumi engine {pulumi} with kubernetes plugin {version}")
    return env


@pytest.fixture
def engine_env(pulumi_engine: dict[str, str],
               monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This test's process runs with the real engine on PATH (the Automation API finds the
    CLI there) and its PULUMI_HOME."""
    for key, value in pulumi_engine.items():
        monkeypatch.setenv(key, value)
    return dict(os.environ)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config,
                                  items: list[pytest.Item]) -> Iterator[None]:
    """Under ``--dist loadgroup`` (``make test``) a module whose tests share a fixture wider
    than a test runs on one worker, so that fixture (a demo, an operator, a cluster) is made
    once rather than once per worker.

    xdist 3.8 groups a test by appending ``@group`` to its node id through ``item._nodeid``,
    which pytest 9 no longer reads (the id moved to ``item._id``): without the second half
    below its grouping silently does nothing."""
    # (xdist's worker notes loadgroup in its own option: its "dist" option reads "no")
    grouping = WORKER != "" and bool(getattr(config.option, "loadgroup", False))
    if grouping:
        for item in items:
            group = _shared_fixture_module(item)
            if group and item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(group))
    yield
    if grouping:
        from _pytest.nodeid import NodeId

        for item in items:
            renamed = item.__dict__.get("_nodeid")
            if isinstance(renamed, str) and renamed != item.nodeid:
                item._id = NodeId.parse(renamed)


def _shared_fixture_module(item: pytest.Item) -> str | None:
    """The test's module when it uses a module- or class-scoped fixture, else None."""
    info = getattr(item, "_fixtureinfo", None)
    module = getattr(item, "module", None)
    if info is None or module is None:
        return None
    scopes = {d.scope for defs in info.name2fixturedefs.values() for d in defs}
    return str(module.__name__) if scopes & {"module", "class"} else None
