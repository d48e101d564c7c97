"""Service-level fixtures: an App over each ledger, a manual clock and a scripted probe."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.catalog.store import data_dir
from automation.clock import ManualClock
from automation.kube.probe import ClusterFacts, ClusterUnreachable, KubeconfigTarget, sha256_hex
from automation.ledger import open_ledger, schema
from automation.services import clusters, credentials
from tests.ledger_templates import LedgerTemplates

DEMO_CA = data_dir() / "demo" / "ca.pem"
CA_SHA = sha256_hex(DEMO_CA.read_bytes())


@dataclass
class ScriptedProbe:
    """A cluster probe whose answers the test sets; counts how often it was asked."""

    server_url: str = "https://203.0.113.10:6443"
    ca_sha256: str | None = CA_SHA
    facts: ClusterFacts | None = None  # None: unreachable
    reads: int = 0
    calls: list[str] = field(default_factory=list)

    def target(self, kubeconfig: Path, context: str | None) -> KubeconfigTarget:
        return KubeconfigTarget(self.server_url, self.ca_sha256)

    def read(self, kubeconfig: Path, context: str | None) -> ClusterFacts:
        self.reads += 1
        if self.facts is None:
            raise ClusterUnreachable("connection refused")
        return self.facts


@pytest.fixture
def probe() -> ScriptedProbe:
    return ScriptedProbe()


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


@pytest.fixture
def app(ledger_url: str, probe: ScriptedProbe,
        ledger_templates: LedgerTemplates) -> Iterator[App]:
    ledger_templates.seed(ledger_url)  # migrated once per worker, copied here
    ledger = open_ledger(ledger_url)
    yield App(ledger=ledger, clock=ManualClock(), probe=probe)
    ledger.dispose()


def snapshot(app: App) -> dict[str, list[Any]]:
    """Every row of every table: equal before and after means nothing was written."""
    out = {}
    with app.ledger.read() as conn:
        for table in schema.metadata.sorted_tables:
            rows = conn.execute(sa.select(table).order_by(*table.primary_key.columns)).all()
            out[table.name] = [tuple(r) for r in rows]
    return out


def ready_cluster(app: App, kubeconfig: Path, name: str = "prod") -> str:
    c = clusters.register_cluster(app, clusters.RegisterCluster(
        name=name, kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1", ca_file=DEMO_CA,
        offline=True,
    ))
    return c.id


def credential(app: App, name: str = "team-aws", provider: str = "aws") -> str:
    options: dict[str, dict[str, str]] = {
        "aws": {"profile": "team"},
        "gcp": {"project": "my-project", "key_file": str(DEMO_CA)},
        "azure": {
            "subscription_id": "00000000-0000-0000-0000-000000000001",
            "tenant_id": "00000000-0000-0000-0000-000000000002",
            "client_id": "00000000-0000-0000-0000-000000000003",
        },
        "lambda": {"api_key_env": "LAMBDA_API_KEY"},
    }
    return credentials.new_credential(
        app, credentials.NewCredential(name, provider, options[provider])
    ).id


@pytest.fixture
def run(tmp_path: Path, ledger_url: str, monkeypatch: pytest.MonkeyPatch,
        ledger_templates: LedgerTemplates) -> Any:
    """The CLI through click's runner, over the test's ledger (at the newest schema, as the
    first command would leave it) and a home of its own."""
    from click.testing import CliRunner, Result

    from automation.cli import cli

    ledger_templates.seed(ledger_url)
    monkeypatch.setenv("ANYCLOUD_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANYCLOUD_DATABASE_URL", ledger_url)

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    return invoke


# A test asked for in both modes and on both ledgers runs twice, not four times: embedded on
# SQLite and remote on PostgreSQL. The two crossings prove nothing these do not: the ledger
# layer is the same code under the CLI and under the server (test_ledger.py and the service
# tests run it on both databases), and the test's body still runs once in each mode.
MODE_AND_LEDGER = {("embedded", "sqlite"), ("remote", "postgres")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, crossings = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec else {}
        pair = (params.get("in_each_mode"), params.get("ledger_url"))
        if None not in pair and pair not in MODE_AND_LEDGER:
            crossings.append(item)
        else:
            kept.append(item)
    if crossings:
        config.hook.pytest_deselected(items=crossings)
        items[:] = kept


@pytest.fixture(params=["embedded", "remote"])
def in_each_mode(request: pytest.FixtureRequest, run: Any, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test's ``run`` as set up (embedded), then once more through a real API server on
    loopback over the same ledger and home: the same commands must print the same JSON and
    exit with the same codes in both modes. (Asked after ``run``, whose set-up stays local.)"""
    if request.param == "embedded":
        yield "embedded"
        return
    with _remote(tmp_path, monkeypatch):
        yield "remote"


@pytest.fixture
def remote_mode(run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Only the remote half of ``in_each_mode``: for what only remote mode does."""
    with _remote(tmp_path, monkeypatch):
        yield "remote"


@contextlib.contextmanager
def _remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI in remote mode (an admin's token) against a real server on loopback over the
    ledger and home of ANYCLOUD_HOME."""
    import os

    from automation.api.app import create_api
    from automation.sealing import SealingKey
    from automation.services.tokens import create_token
    from automation.serving import ServerThread
    from automation.settings import Settings

    home = Path(os.environ["ANYCLOUD_HOME"])
    ledger = open_ledger(Settings.from_env(home).database_url)
    app = App(ledger=ledger, home=home)
    app.sealing = SealingKey(os.urandom(32))
    server = ServerThread(create_api(app, limiter=None), "127.0.0.1:0")
    monkeypatch.setenv("ANYCLOUD_API_URL", server.url)
    monkeypatch.setenv("ANYCLOUD_TOKEN", create_token(app, "cli", "admin", by="test").token)
    monkeypatch.setenv("ANYCLOUD_CLI_CONFIG", str(tmp_path / "cli-config.json"))
    try:
        yield
    finally:
        server.stop()
        ledger.dispose()


def ok_json(result: Any) -> Any:
    """The JSON a CLI run printed, once it exited 0 (else its output, for the failure)."""
    import json

    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)
