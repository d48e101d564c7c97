"""Bad input never crashes: every leaf command of the CLI, fuzzed from its click definition.

The test walks ``automation.cli.main.cli``, so a new command is covered the day it is added.
For each leaf it generates argv with hypothesis (valid-looking values drawn from the seeded
state, boundary numbers, and hostile text: empty, 5,000 characters, NUL bytes, shell syntax,
unicode, garbage JSON/YAML inline or in a file, a directory, a missing path) and runs it in
process over a copy of one seeded state (a cluster registered offline, a credential, a pool,
an org, a project, a deployment). Every case must:

- exit 0 or 2 (1 only for the commands in ``RUNTIME_FAILURES``, each with its reason);
- raise nothing but SystemExit, and print no traceback;
- print JSON on stdout when it was given ``--json`` and printed anything;
- after a refusal (exit 2), leave every ledger row and every file of the home unchanged.

Outcomes are recorded, not asserted one at a time, so one run counts every bad case (the
measure ``benchmarks/bench_cli_fuzz.py`` prints); each command's test then fails naming the
first few. ``derandomize=True``: CI runs the same cases every time.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.cli.main import cli
from automation.ledger import schema
from tests.automation.conftest import DEMO_CA

# Cases per command; the benchmark raises it (ANYCLOUD_FUZZ_EXAMPLES).
EXAMPLES = int(os.environ.get("ANYCLOUD_FUZZ_EXAMPLES", "20"))

# Long-running or outward-reaching commands: not run here.
EXCLUDED = {
    "serve": "runs the reconciler until stopped",
    "operator": "watches a Kubernetes API server until stopped",
    "broker": "serves HTTP until stopped",
    "agent": "registers with a broker and works until stopped",
    "demo": "builds a local control plane and buys a pool (minutes)",
    "session run": "waits on a broker for a slot and runs the command",
    "catalog refresh": "asks the clouds' pricing APIs over the network",
    "reconcile": "buys pools through the engine in worker processes; --simulate --passes N "
                 "runs N passes (an input-sized loop)",
}

# Commands whose documented runtime failure is exit 1, and why.
RUNTIME_FAILURES = {
    "cluster refresh": "reads the cluster: the seeded one is unreachable (connection refused)",
    "cluster register": "without --offline it reads the cluster, unreachable here",
    "cluster preview": "the add-on preview reads the cluster: unreachable (CLUSTER_UNAVAILABLE)",
    "api use": "checks that the URL answers: no fuzzed URL does (UNAVAILABLE)",
}

HOSTILE = [
    "", " ", "x" * 5000, "a\x00b", "\x00", "$(touch /tmp/pwned)", "`id`; rm -rf / | cat && echo",
    "'\"\\", "../../etc/passwd", "名前-🚀\u202e", "\u0301", "\n", "\r\n\t", "%s%n{0}",
    "-1", "--json", "null", "{", "[1, 2", ": - [", "{\"a\": 1}", "a" * 64, "A", "-",
]
NUMBERS = ["0", "1", "-1", "2", "3", "64", "9223372036854775808", "-9223372036854775809",
           "1" * 40, "1.5", "nan", "inf", "-inf", "1e308", "0x10"]


@dataclass
class Seed:
    """The seeded state every case starts from: copied, never touched."""

    root: Path
    home_files: dict[str, bytes]
    rows: dict[str, list[Any]]
    paths: list[str]
    names: list[str]


@dataclass
class Outcome:
    cases: int = 0
    crashes: int = 0  # an exception, a traceback or an INTERNAL error
    violations: int = 0  # wrong exit code, unparsable JSON, a refusal that wrote
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


OUTCOMES: dict[str, Outcome] = {}


def leaves(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> Iterator[
        tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the lazily loaded commands too
        command = group.get_command(ctx, name)
        assert command is not None, name
        path = (*prefix, name)
        if isinstance(command, click.Group):
            yield from leaves(command, path)
        else:
            yield " ".join(path), command


def _env(root: Path) -> dict[str, str | None]:
    return {"ANYCLOUD_HOME": str(root / "home"),
            "ANYCLOUD_DATABASE_URL": f"sqlite:///{root / 'ledger.db'}",
            "ANYCLOUD_ENGINE": "mock", "ANYCLOUD_CONFIG": None,
            "ANYCLOUD_PROVISIONERS": None, "ANYCLOUD_DEFAULT_PROVISIONER": None,
            "ANYCLOUD_CONCURRENCY": None, "ANYCLOUD_CONCURRENCY_PER_CREDENTIAL": None,
            "ANYCLOUD_CLI_CONFIG": str(root / "home" / "cli.json"), "ANYCLOUD_API_URL": None,
            "ANYCLOUD_TOKEN": None}


def rows(root: Path) -> dict[str, list[Any]]:
    """Every row of every table (``conftest.snapshot`` through the bare driver: it runs
    after every refusal)."""
    conn = sqlite3.connect(root / "ledger.db")
    try:
        return {t.name: conn.execute(
            f"SELECT * FROM {t.name} ORDER BY "  # our own table names
            + ", ".join(c.name for c in t.primary_key.columns)).fetchall()
            for t in schema.metadata.sorted_tables}
    finally:
        conn.close()


def files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file()}


def _seed(root: Path) -> Seed:
    inputs = root / "inputs"
    inputs.mkdir(parents=True)
    (root / "home").mkdir()
    kubeconfig = inputs / "kubeconfig.yaml"  # a refused port: reading it fails at once
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
        "    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context: {cluster: c, "
        "user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n")
    (inputs / "ca.pem").write_bytes(DEMO_CA.read_bytes())
    (inputs / "garbage.yaml").write_bytes(b"\xff\xfe: - [ {\x00\n\tkind: !!python/object x")
    (inputs / "bad.json").write_text('{"a": [1, 2')
    (inputs / "pool.yaml").write_text(
        "apiVersion: anycloud.sh/v1\nkind: AgentPool\nmetadata: {name: shell}\nspec: {}\n")
    (inputs / "a-directory").mkdir()
    runner = CliRunner()
    env = _env(root)
    for argv in (
        ["cluster", "register", "prod", "--kubeconfig", str(kubeconfig), "--offline",
         "--kubernetes-version", "v1.36.2+k3s1", "--ca-file", str(inputs / "ca.pem"),
         "--server-url", "https://203.0.113.10:6443"],
        ["credentials", "new", "team", "--provider", "aws", "--profile", "team"],
        ["node-pool", "create", "cpu", "--credentials", "team", "--region", "us-east-1",
         "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1"],
        ["org", "create", "acme"],
        ["project", "create", "web", "--org", "acme"],
        ["deployment", "create", "train", "--project", "web"],
    ):
        result = runner.invoke(cli, argv, env=env, catch_exceptions=False)
        assert result.exit_code == 0, (argv, result.output)
    # The seeding runs left their connections open (the CLI never disposes its ledger): the
    # rows may still sit in the WAL file. Copy them into one standalone file for the cases.
    gc.collect()
    source = sqlite3.connect(root / "ledger.db")
    whole = sqlite3.connect(root / "template.db")
    source.backup(whole)
    source.close()
    whole.close()
    for stale in root.glob("ledger.db*"):
        stale.unlink()
    (root / "template.db").rename(root / "ledger.db")
    paths = [str(p) for p in sorted(inputs.iterdir())] + [
        str(inputs / "missing.yaml"), str(inputs / ("n" * 300)), "/" + "d/" * 2100,
        str(inputs / "ca.pem\x00.txt"), "-", "~/nowhere", ""]
    names = ["prod", "team", "cpu", "acme", "web", "train", "us-east-1", "us-east-1a",
             "m7i.large", "aws", "gcp", "v1.36.2+k3s1", "v9.1", "https://127.0.0.1:1",
             "1d", "30s", "2020-01-01", "pool", "mock"]
    return Seed(root, files(root / "home"), rows(root), paths, names)


# Valid-looking values by parameter name, so a case can reach the checks behind the first.
VALID = {
    "name": ["new-one", "prod", "cpu", "web"], "ref": ["prod", "cpu", "train", "team"],
    "kubeconfig": ["kubeconfig.yaml"], "ca_file": ["ca.pem"], "files": ["pool.yaml"],
    "kubernetes_version": ["v1.36.2+k3s1"], "server_url": ["https://203.0.113.10:6443"],
    "provider": ["aws", "gcp"], "profile": ["team"], "region": ["us-east-1"],
    "zone": ["us-east-1a"], "vm_type": ["m7i.large", "g5.12xlarge"], "min_vms": ["1"],
    "max_vms": ["1"], "credentials": ["team"], "cluster": ["prod"], "project": ["web"],
    "org": ["acme"], "node_pool": ["cpu"], "vm_type_arg": ["m7i.large"], "since": ["2020-01-01"],
    "provisioner": ["mock"], "engine": ["mock"],
}


def _valid_value(param: click.Parameter, seed: Seed) -> st.SearchStrategy[str]:
    given = VALID.get(param.name or "")
    if given:
        return st.sampled_from([str(seed.root / "inputs" / v) if v.endswith((".yaml", ".pem"))
                                else v for v in given])
    kind = param.type
    if isinstance(kind, click.Choice):
        return st.sampled_from([str(c) for c in kind.choices])
    if isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)):
        return st.sampled_from(["1", "2"])
    if isinstance(kind, click.Path):
        return st.sampled_from(seed.paths[:3])
    return st.sampled_from(seed.names)


def _hostile_value(param: click.Parameter, seed: Seed) -> st.SearchStrategy[str]:
    hostile = st.sampled_from(HOSTILE)
    kind = param.type
    if param.name == "engine":  # pulumi would run the real engine (or be missing): not input
        return st.one_of(st.just("mock"), hostile)
    if isinstance(kind, click.Choice):
        return st.one_of(st.sampled_from([str(c) for c in kind.choices]), hostile)
    if isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)):
        return st.one_of(st.sampled_from(NUMBERS), st.integers().map(str), hostile)
    if isinstance(kind, click.Path):
        return st.one_of(st.sampled_from(seed.paths), hostile)
    return st.one_of(st.sampled_from(seed.names), st.sampled_from(seed.paths), hostile,
                     st.text(max_size=20))


@st.composite
def argvs(draw: st.DrawFn, command: click.Command, seed: Seed) -> list[str]:
    """An argv for ``command``: every required parameter, optional ones at random;
    options first, then ``--`` and the arguments (so a value like "-1" stays a value).

    Half the cases are focused: one parameter hostile, the others valid-looking (a bad
    --kubeconfig is only read once the name and version passed); the rest hostile anywhere.
    """
    params = [p for p in command.params if p.name != "as_json"
              and not (isinstance(p, click.Option) and p.is_flag)]
    focus = draw(st.sampled_from([None, *params])) if params else None

    def value(param: click.Parameter) -> str:
        if focus is None or param is focus:
            return draw(_hostile_value(param, seed))
        return draw(_valid_value(param, seed))

    options: list[str] = []
    arguments: list[str] = []
    for param in command.params:
        if isinstance(param, click.Option):
            if param.name == "as_json":
                options.append("--json")
                continue
            if not param.required and param is not focus and not draw(st.booleans()):
                continue
            flag = max(param.opts, key=len)
            if param.is_flag:
                options.append(flag)
                continue
            for _ in range(draw(st.integers(1, 2)) if param.multiple else 1):
                options += [flag, value(param)]
        elif isinstance(param, click.Argument):
            if not param.required and param is not focus and not draw(st.booleans()):
                continue
            count = draw(st.integers(1, 2)) if param.nargs == -1 else param.nargs
            arguments += [value(param) for _ in range(count)]
    return options + (["--", *arguments] if arguments else [])


def _error_shape(body: object) -> list[str]:
    """A refusal with --json is one error object naming the code, the field and the rule,
    with a one-line message."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return [f"refused (exit 2) without an error object: {str(body)[:200]!r}"]
    problems = [f"the error names no {key}: {error!r:.300}" for key in ("code", "field", "rule")
                if not error.get(key)]
    if "\n" in str(error.get("message", "\n")):
        problems.append(f"the error's message is not one line: {error.get('message')!r:.300}")
    return problems


def run_case(name: str, command: click.Command, argv: list[str], seed: Seed,
             scratch: Path) -> list[str]:
    """Run one case over a fresh copy of the seeded state; the rules it broke."""
    case = Path(tempfile.mkdtemp(dir=scratch))
    shutil.copytree(seed.root / "home", case / "home")
    shutil.copy2(seed.root / "ledger.db", case / "ledger.db")
    full = [*name.split(), *argv]
    # In the case's own folder: a fuzzed relative path (`secrets-key new -1`) is written
    # there, never into the checkout.
    with contextlib.chdir(case):
        result = CliRunner().invoke(cli, full, env=_env(case), catch_exceptions=True)
    broken: list[str] = []
    allowed = {0, 2} | ({1} if name in RUNTIME_FAILURES else set())
    if "--detailed-exitcode" in argv:
        allowed |= {3}  # preview's documented policy-failure code (2: there are changes)
    out = result.stdout + result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        broken.append(f"crash: {type(result.exception).__name__}: {result.exception}"[:300])
    elif "Traceback" in out or "Error [INTERNAL]" in out or '"INTERNAL"' in result.stdout:
        broken.append(f"crash: {out[-300:]}")
    elif result.exit_code not in allowed:
        broken.append(f"exit {result.exit_code}: {out[-300:]}")
    if "--json" in argv and result.stdout.strip():
        try:
            body = json.loads(result.stdout)
        except ValueError:
            broken.append(f"--json stdout is not JSON: {result.stdout[:200]!r}")
        else:
            changes = "--detailed-exitcode" in argv and not (
                isinstance(body, dict) and "error" in body)  # exit 2: there are changes
            if result.exit_code == 2 and not changes:
                broken += _error_shape(body)
    if result.exit_code == 2:
        if rows(case) != seed.rows:
            broken.append("refused (exit 2) but the ledger changed")
        if files(case / "home") != seed.home_files:
            broken.append("refused (exit 2) but the home's files changed")
    shutil.rmtree(case, ignore_errors=True)
    return broken


def fuzz(name: str, command: click.Command, seed: Seed, scratch: Path,
         examples: int = EXAMPLES) -> Outcome:
    outcome = OUTCOMES.setdefault(name, Outcome())

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(argvs(command, seed))
    def case(argv: list[str]) -> None:
        outcome.cases += 1
        broken = run_case(name, command, argv, seed, scratch)
        if broken:
            outcome.crashes += any(b.startswith("crash") for b in broken)
            outcome.violations += not any(b.startswith("crash") for b in broken)
            if len(outcome.failures) < 3:
                outcome.failures.append(f"{argv!r:.400}\n    -> {'; '.join(broken)}")

    start = time.perf_counter()
    case()
    outcome.seconds += time.perf_counter() - start
    return outcome


FUZZED = [(n, c) for n, c in leaves() if n not in EXCLUDED]


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    return _seed(tmp_path_factory.mktemp("fuzz-seed"))


@pytest.fixture(scope="module")
def summary(request: pytest.FixtureRequest) -> Iterator[None]:
    """The cases run per command, written to the terminal when the module ends."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or not OUTCOMES:
        return
    with capture.global_and_fixture_disabled():  # teardown output is captured otherwise
        reporter.write_line("")
        reporter.write_line(f"CLI fuzz: {sum(o.cases for o in OUTCOMES.values())} cases "
                            f"over {len(OUTCOMES)} commands ({len(EXCLUDED)} excluded)")
        for name, o in sorted(OUTCOMES.items()):
            reporter.write_line(f"  {name:34} {o.cases:4} cases  {o.crashes} crashes  "
                                f"{o.violations} violations  {o.seconds:.1f}s")


def test_every_leaf_is_fuzzed_or_excluded_with_a_reason() -> None:
    names = {n for n, _ in leaves()}
    assert set(EXCLUDED) <= names, set(EXCLUDED) - names  # a stale exclusion is a bug too
    assert set(RUNTIME_FAILURES) <= names
    assert len(FUZZED) >= 40


def _wrapped(fn: Any) -> bool:
    while fn is not None:
        if getattr(fn, "anycloud_boundary", False):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def test_every_leaf_runs_inside_the_error_boundary() -> None:
    """Excluded commands too: `output.handle_errors` around every callback."""
    assert [n for n, c in leaves() if not _wrapped(c.callback)] == []


@pytest.mark.parametrize(("name", "command"), FUZZED, ids=[n for n, _ in FUZZED])
def test_bad_input_never_crashes(name: str, command: click.Command, seed: Seed,
                                 summary: None, tmp_path: Path) -> None:
    outcome = fuzz(name, command, seed, tmp_path)
    assert outcome.cases > 0
    assert not outcome.failures, f"{name}: {outcome.crashes} crash(es), " \
        f"{outcome.violations} violation(s) in {outcome.cases} cases:\n" + \
        "\n".join(outcome.failures)


# -- the boundary itself -------------------------------------------------------------------


def _invoke(tmp_path: Path, *argv: str) -> Any:
    env = _env(tmp_path)
    (tmp_path / "home").mkdir(exist_ok=True)
    return CliRunner().invoke(cli, list(argv), env=env, catch_exceptions=True)


@pytest.mark.parametrize("path", ["kc\x00.yaml", "/tmp/" + "n" * 300, "/d" * 2100])
def test_register_refuses_unusable_paths_before_reading(tmp_path: Path, path: str) -> None:
    """The issue's crashes: a NUL byte or a too-long --kubeconfig was an OSError/ValueError."""
    result = _invoke(tmp_path, "cluster", "register", "prod", "--kubeconfig", path, "--offline",
                     "--kubernetes-version", "v1.36.2+k3s1", "--json")
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    error = json.loads(result.stdout)["error"]  # --json: a refused argument is JSON too
    assert (error["code"], error["field"]) == ("INVALID_ARGUMENT", "--kubeconfig")
    line = result.stderr.strip().splitlines()[-1]
    assert "--kubeconfig" in line and len(line) < 200 and "\x00" not in line
    assert "NUL byte" in line or "longer than" in line or "shorter than" in line


def test_an_unexpected_error_is_one_line_and_a_report(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from automation.services import clusters

    def boom(app: Any) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(clusters, "list_clusters", boom)
    result = _invoke(tmp_path, "cluster", "list")
    assert result.exit_code == 1 and result.stdout == ""
    line, = result.stderr.strip().splitlines()
    assert line.startswith("Error [INTERNAL]: RuntimeError: boom\\nsecond line (full report: ")
    report = Path(line.rsplit("full report: ", 1)[1].rstrip(")"))
    assert report.parent == tmp_path / "home" / "reports"  # where the control loop's go
    assert "Traceback" in report.read_text() and "boom" in report.read_text()
    error = json.loads(_invoke(tmp_path, "cluster", "list", "--json").stdout)["error"]
    assert error["code"] == "INTERNAL" and Path(error["report"]).is_file()


def test_a_long_value_is_shown_shortened_on_one_line(tmp_path: Path) -> None:
    result = _invoke(tmp_path, "org", "create", "x\n" * 2500)
    assert result.exit_code == 2
    line, = result.stderr.strip().splitlines()
    assert "'x\\nx\\n" in line and "..." in line and len(line) < 400
    error = json.loads(_invoke(tmp_path, "org", "create", "y" * 5000, "--json").stdout)["error"]
    assert len(error["value"]) == 80 and len(error["message"]) < 400


def test_an_os_error_on_a_given_path_is_bad_input() -> None:
    """The net under the commands: attributed to the argument that named the file."""
    import errno as errno_

    from automation.cli.inputs import from_input

    err = from_input(FileNotFoundError(errno_.ENOENT, "No such file", "/x/kc"),
                     {"kubeconfig": Path("/x/kc"), "name": "prod"})
    assert err is not None and err.exit_code == 2
    assert (err.field, err.value, err.rule) == ("kubeconfig", "/x/kc", "must be an existing file")
    assert from_input(ValueError("embedded null byte"), {"name": "a\x00"}) is not None
    # Not from an argument: stays an internal error.
    assert from_input(FileNotFoundError(errno_.ENOENT, "No such file", "/etc/other"),
                      {"kubeconfig": "/x/kc"}) is None
    assert from_input(KeyError("x"), {"name": "x"}) is None
