"""A deployment move SIGKILLed at each step boundary (``ANYCLOUD_CRASH_AT``), then the same
command run again: one resource, the same provision id, the old slots released exactly once
(issue 12). The crashing and recovering runs are the installed CLI in a subprocess, so the
kill is a real one; setup and inspection go through the CLI in-process and the ledger."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from automation.ledger import open_ledger, schema
from tests.automation.conftest import ok_json

ANYCLOUD = str(Path(sys.executable).with_name("anycloud"))
SET = {name: {"type": "static", "spec": {"runtimes": [
    {"host": f"{name}1.example", "slots": 2, "data_dir": f"/data/{name}",
     "audience_url": f"https://{name}1.example"}]}} for name in ("a", "b")}
ME = pwd.getpwuid(os.geteuid()).pw_name
MOVE_BOUNDARIES = ("after-move-intent", "after-deprovision", "after-provision")


@pytest.fixture
def cli(run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """org acme / project web / deployment api, running on static provisioner ``a``."""
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps(SET))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    monkeypatch.setenv("ANYCLOUD_CONFIG", str(tmp_path / "config.yaml"))
    (tmp_path / "config.yaml").write_text(f"superusers:\n  users: [{ME}]\n")
    ok_json(run("org", "create", "acme", "--json"))
    ok_json(run("project", "create", "web", "--org", "acme", "--json"))
    return run


def anycloud(*args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    """The installed CLI in its own process; the test's environment (ledger, home, set and
    config, set by the fixtures through monkeypatch) is inherited."""
    env = dict(os.environ)
    env.pop("ANYCLOUD_CRASH_AT", None)
    if crash_at:
        env["ANYCLOUD_CRASH_AT"] = crash_at
    return subprocess.run([ANYCLOUD, *args], env=env, capture_output=True, text=True,
                          timeout=120)


def killed(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == -9, (result.returncode, result.stdout, result.stderr[-2000:])


def succeeded(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr[-2000:])
    return json.loads(result.stdout)


class Ledger:
    """What the ledger holds for one deployment: its row, the static slots, its events."""

    def __init__(self, url: str, dep_id: str) -> None:
        self.url, self.dep_id = url, dep_id

    def _read(self, query: Any) -> list[Any]:
        ledger = open_ledger(self.url)
        try:
            with ledger.read() as conn:
                return list(conn.execute(query))
        finally:
            ledger.dispose()

    def row(self) -> Any:
        d = schema.deployments
        return self._read(sa.select(d).where(d.c.id == self.dep_id))[0]

    def allocations(self) -> list[tuple[str, str, str]]:
        return sorted((r.provision_id, r.provisioner, r.host)
                      for r in self._read(sa.select(schema.static_allocations)))

    def events(self) -> list[str]:
        e = schema.events
        return [r.kind for r in self._read(
            sa.select(e.c.kind).where(e.c.subject_id == self.dep_id).order_by(e.c.id))]

    def after_move(self) -> list[str]:
        """The deployment's events since its (last) move started."""
        events = self.events()
        last = len(events) - 1 - events[::-1].index("move_started")
        return events[last:]


def running_on_a(cli: Any, ledger_url: str) -> tuple[Ledger, str]:
    made = ok_json(cli("deployment", "create", "api", "--project", "web", "--start", "--json"))
    assert (made["provisioner"], made["runtimeHost"]) == ("a", "a1.example")
    ledger = Ledger(ledger_url, made["id"])
    assert ledger.allocations() == [(made["provisionId"], "a", "a1.example")]
    ok_json(cli("sudo", "project", "edit", "web", "--provisioner", "b", "--json"))
    return ledger, made["provisionId"]


def crashed_state(boundary: str, ledger: Ledger, pid: str) -> None:
    """Where the killed process left the move: its intent always recorded, and exactly the
    steps before the boundary taken."""
    row = ledger.row()
    step = "provision" if boundary == "after-provision" else "deprovision"
    assert row.move == {"from": "a", "to": "b", "step": step}
    assert row.provision_id == pid
    after = ledger.after_move()
    assert "running" not in after
    if boundary == "after-move-intent":  # nothing done yet
        assert (row.provisioner, ledger.allocations()) == ("a", [(pid, "a", "a1.example")])
        assert "deprovisioned" not in after
    elif boundary == "after-deprovision":  # a released its slots, the step not recorded
        assert (row.provisioner, ledger.allocations()) == ("a", [])
        assert "deprovisioned" not in after
    else:  # b holds the slots, the deployment not updated yet
        assert (row.provisioner, ledger.allocations()) == (None, [(pid, "b", "b1.example")])
        assert after.count("deprovisioned") == 1


def on_b(ledger: Ledger, pid: str) -> None:
    row = ledger.row()
    assert (row.state, row.provisioner, row.runtime_host, row.move) == (
        "running", "b", "b1.example", None)
    assert row.provision_id == pid
    assert ledger.allocations() == [(pid, "b", "b1.example")]  # one, on b; none left on a


def moved_once(ledger: Ledger, pid: str) -> None:
    on_b(ledger, pid)
    assert ledger.events().count("move_started") == 1  # the recovery wrote no new intent
    # a released it exactly once, and it ran once on b.
    assert ledger.after_move() == ["move_started", "deprovisioned", "running"]


@pytest.mark.parametrize("boundary", MOVE_BOUNDARIES)
def test_a_restart_killed_mid_move_finishes_it_when_run_again(
        cli: Any, ledger_url: str, boundary: str) -> None:
    ledger, pid = running_on_a(cli, ledger_url)
    killed(anycloud("deployment", "restart", "api", "--json", crash_at=boundary))
    crashed_state(boundary, ledger, pid)

    done = succeeded(anycloud("deployment", "restart", "api", "--json"))
    assert (done["provisioner"], done["runtimeHost"], done["provisionId"]) == (
        "b", "b1.example", pid)
    moved_once(ledger, pid)


@pytest.mark.parametrize("boundary", MOVE_BOUNDARIES)
def test_a_start_after_a_stop_killed_mid_move_finishes_it_when_run_again(
        cli: Any, ledger_url: str, boundary: str) -> None:
    ledger, pid = running_on_a(cli, ledger_url)
    ok_json(cli("deployment", "stop", "api", "--json"))
    killed(anycloud("deployment", "start", "api", "--json", crash_at=boundary))
    crashed_state(boundary, ledger, pid)
    assert ledger.row().state == "stopped"  # until the move is done

    assert succeeded(anycloud("deployment", "start", "api", "--json"))["provisionId"] == pid
    moved_once(ledger, pid)


@pytest.mark.parametrize("boundary", MOVE_BOUNDARIES)
def test_a_project_restart_killed_mid_move_finishes_it_when_run_again(
        cli: Any, ledger_url: str, boundary: str) -> None:
    ledger, pid = running_on_a(cli, ledger_url)
    killed(anycloud("sudo", "project", "restart", "web", "--yes", "--json", crash_at=boundary))
    crashed_state(boundary, ledger, pid)

    done = succeeded(anycloud("sudo", "project", "restart", "web", "--yes", "--json"))
    assert [(d["name"], d["provisioner"], d["provisionId"]) for d in done] == [
        ("api", "b", pid)]
    moved_once(ledger, pid)


def test_restarts_after_a_recovered_move_change_nothing(cli: Any, ledger_url: str) -> None:
    ledger, pid = running_on_a(cli, ledger_url)
    killed(anycloud("deployment", "restart", "api", "--json", crash_at="after-deprovision"))
    succeeded(anycloud("deployment", "restart", "api", "--json"))
    moved_once(ledger, pid)
    before = ledger.events()
    for _ in range(2):
        again = ok_json(cli("deployment", "restart", "api", "--json"))
        assert (again["provisioner"], again["runtimeHost"], again["provisionId"]) == (
            "b", "b1.example", pid)
    on_b(ledger, pid)
    # Each restart stops and starts where it is: no move, no release.
    assert ledger.events()[len(before):] == ["stopped", "starting", "running"] * 2


def test_a_first_start_killed_after_provision_holds_one_allocation(
        cli: Any, ledger_url: str) -> None:
    made = ok_json(cli("deployment", "create", "api", "--project", "web", "--json"))
    ledger, pid = Ledger(ledger_url, made["id"]), made["provisionId"]
    killed(anycloud("deployment", "start", "api", "--json", crash_at="after-provision"))
    row = ledger.row()
    assert (row.state, row.provisioner, row.move) == (
        "stopped", None, {"from": None, "to": "a", "step": "provision"})
    assert ledger.allocations() == [(pid, "a", "a1.example")]

    done = succeeded(anycloud("deployment", "restart", "api", "--json"))
    assert (done["state"], done["provisioner"], done["provisionId"]) == ("running", "a", pid)
    assert ledger.allocations() == [(pid, "a", "a1.example")]  # one, not two
    assert ledger.events() == ["created", "starting", "running"]
