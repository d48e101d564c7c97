"""`org`, `project`, `deployment` (project deployments) and `sudo` through the CLI, over a
static provisioner set and the test's ledger (SQLite and PostgreSQL)."""

from __future__ import annotations

import grp
import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from automation.ledger import open_ledger, schema
from tests.automation.conftest import ok_json

SET = {name: {"type": "static", "spec": {"runtimes": [
    {"host": f"{name}1.example", "slots": 2, "data_dir": f"/data/{name}",
     "audience_url": f"https://{name}1.example"}]}} for name in ("a", "b")}
ME = pwd.getpwuid(os.geteuid()).pw_name
MY_GROUP = grp.getgrgid(os.getegid()).gr_name


@pytest.fixture
def cli(run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps(SET))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    monkeypatch.setenv("ANYCLOUD_CONFIG", str(tmp_path / "config.yaml"))
    assert run("org", "create", "acme").exit_code == 0
    assert run("project", "create", "web", "--org", "acme").exit_code == 0
    return run


def superusers(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.yaml").write_text(text)


def refused(result: Any, code: str) -> dict[str, Any]:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    error: dict[str, Any] = json.loads(result.stdout)["error"]
    assert error["code"] == code, error
    return error


def allocations(ledger_url: str) -> list[tuple[str, str, str]]:
    ledger = open_ledger(ledger_url)
    try:
        with ledger.read() as conn:
            return sorted((r.provision_id, r.provisioner, r.host) for r in conn.execute(
                sa.select(schema.static_allocations)))
    finally:
        ledger.dispose()


def test_a_deployment_is_created_stopped_started_moved_by_sudo_and_deleted(
        cli: Any, tmp_path: Path, ledger_url: str) -> None:
    made = ok_json(cli("deployment", "create", "api", "--project", "web", "--json"))
    assert (made["state"], made["provisioner"], made["runtimeHost"]) == ("stopped", None, None)
    assert allocations(ledger_url) == []
    up = ok_json(cli("deployment", "start", "api", "--json"))
    assert (up["state"], up["provisioner"], up["runtimeHost"]) == ("running", "a", "a1.example")
    status = ok_json(cli("deployment", "status", "api", "--json"))
    assert status["provisionId"] == made["provisionId"]
    assert status["nextStart"] == {"provisioner": "a", "level": "current"}
    assert status["health"]["ok"] is True

    superusers(tmp_path, f"superusers:\n  users: [somebody, {ME}]\n")
    edited = ok_json(cli("sudo", "project", "edit", "web", "--provisioner", "b", "--json"))
    assert edited["provisioner"] == "b"
    # A running deployment keeps its provisioner until it goes from stopped to running.
    status = ok_json(cli("deployment", "status", "api", "--json"))
    assert (status["provisioner"], status["nextStart"]) == ("a", {"provisioner": "b",
                                                                  "level": "project"})
    restarted = ok_json(cli("sudo", "project", "restart", "web", "--yes", "--json"))
    assert [(d["name"], d["provisioner"], d["runtimeHost"], d["provisionId"])
            for d in restarted] == [("api", "b", "b1.example", made["provisionId"])]
    assert allocations(ledger_url) == [(made["provisionId"], "b", "b1.example")]
    listed = ok_json(cli("deployment", "list", "--json"))
    assert [(d["name"], d["provisioner"]) for d in listed] == [("api", "b")]
    ok_json(cli("deployment", "stop", "api", "--json"))
    assert ok_json(cli("deployment", "delete", "api", "--json"))["state"] == "deleted"
    assert allocations(ledger_url) == []
    assert ok_json(cli("deployment", "list", "--json")) == []


def test_sudo_is_refused_to_who_the_config_does_not_name(cli: Any, tmp_path: Path) -> None:
    # No config file, then no superusers section, then a list without this user.
    refused(cli("sudo", "project", "edit", "web", "--provisioner", "b", "--json"),
            "PERMISSION_DENIED")
    superusers(tmp_path, "operator:\n  namespace: x\n")
    refused(cli("sudo", "org", "set-default-provisioner", "acme", "b", "--json"),
            "PERMISSION_DENIED")
    superusers(tmp_path, "superusers:\n  users: [somebody-else]\n")
    error = refused(cli("sudo", "project", "restart", "web", "--yes", "--json"),
                    "PERMISSION_DENIED")
    assert "somebody-else" in error["rule"]
    projects = ok_json(cli("project", "list", "--json"))
    assert [p["provisioner"] for p in projects] == [None]  # nothing changed


def test_a_member_of_the_configured_group_is_a_superuser(cli: Any, tmp_path: Path) -> None:
    superusers(tmp_path, f"superusers:\n  group: {MY_GROUP}\n")
    done = ok_json(cli("sudo", "org", "set-default-provisioner", "acme", "b", "--json"))
    assert done["defaultProvisioner"] == "b"
    assert ok_json(cli("sudo", "org", "set-default-provisioner", "acme", "--unset",
                       "--json"))["defaultProvisioner"] is None


def test_sudo_names_only_provisioners_of_the_set(cli: Any, tmp_path: Path) -> None:
    superusers(tmp_path, f"superusers:\n  group: {MY_GROUP}\n")
    refused(cli("sudo", "project", "edit", "web", "--provisioner", "nope", "--json"),
            "INVALID_ARGUMENT")
    refused(cli("sudo", "project", "edit", "web", "--json"), "INVALID_ARGUMENT")
    refused(cli("sudo", "project", "edit", "web", "--provisioner", "b", "--unset-provisioner",
                "--json"), "INVALID_ARGUMENT")
    refused(cli("sudo", "org", "set-default-provisioner", "acme", "--json"), "INVALID_ARGUMENT")
    assert [p["provisioner"] for p in ok_json(cli("project", "list", "--json"))] == [None]


@pytest.mark.parametrize("args", [
    ("deployment", "create", "x", "--json"),
    ("deployment", "create", "x", "--project", "web", "--node-pool", "p", "--json"),
    ("deployment", "create", "x", "--project", "web", "--service", "--json"),
    ("deployment", "create", "bad name", "--project", "web", "--json"),
    ("deployment", "create", "x", "--project", "web", "--slots", "0", "--json"),
    ("deployment", "create", "x", "--project", "web", "--slots", "1025", "--json"),
    ("deployment", "create", "x", "--project", "web", "--slots", str(2**63), "--json"),
    ("deployment", "create", "x", "--project", "web", "--cpu", "-1", "--json"),
    ("deployment", "create", "x", "--project", "web", "--memory", "2 GB", "--json"),
    ("deployment", "create", "x", "--project", "web", "--storage", "0Gi", "--json"),
    ("deployment", "create", "x", "--node-pool", "p", "--cpu", "2", "--json"),
    ("deployment", "create", "x", "--node-pool", "p", "--start", "--json"),
])
def test_deployment_create_refuses_bad_input(cli: Any, args: tuple[str, ...]) -> None:
    refused(cli(*args), "INVALID_ARGUMENT")
    assert ok_json(cli("deployment", "list", "--json")) == []


def test_a_start_without_a_provisioner_set_says_what_to_configure(
        cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ok_json(cli("deployment", "create", "api", "--project", "web", "--json"))
    monkeypatch.delenv("ANYCLOUD_PROVISIONER_SET_JSON")
    error = refused(cli("deployment", "start", "api", "--json"), "INVALID_ARGUMENT")
    assert error["field"] == "ANYCLOUD_PROVISIONER_SET_JSON"
    # Stopping and deleting what holds nothing needs no set.
    ok_json(cli("deployment", "delete", "api", "--json"))


def test_a_deployment_that_cannot_start_keeps_its_intent(
        cli: Any, monkeypatch: pytest.MonkeyPatch, ledger_url: str) -> None:
    full = {"a": {"type": "static", "spec": {"runtimes": [
        {"host": "a1.example", "slots": 1, "data_dir": "/d", "audience_url": "https://a"}]}}}
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps(full))
    ok_json(cli("deployment", "create", "one", "--project", "web", "--start", "--json"))
    ok_json(cli("deployment", "create", "two", "--project", "web", "--json"))
    result = cli("deployment", "start", "two", "--json")
    assert result.exit_code != 0 and "error" in json.loads(result.stdout)
    status = ok_json(cli("deployment", "status", "two", "--json"))
    assert status["move"] == {"from": None, "to": "a", "step": "provision"}
    assert status["lastError"]
    ok_json(cli("deployment", "delete", "one", "--json"))
    assert ok_json(cli("deployment", "start", "two", "--json"))["state"] == "running"
    assert [a[2] for a in allocations(ledger_url)] == ["a1.example"]


def test_what_a_deployment_asks_is_kept_and_used_by_every_start(
        cli: Any, ledger_url: str) -> None:
    made = ok_json(cli("deployment", "create", "big", "--project", "web", "--slots", "2",
                       "--cpu", "500m", "--memory", "4Gi", "--storage", "20Gi", "--json"))
    assert made["resources"] == {"slots": 2, "cpu": "500m", "memory": "4Gi", "storage": "20Gi"}
    ok_json(cli("deployment", "start", "big", "--json"))
    ledger = open_ledger(ledger_url)
    try:
        with ledger.read() as conn:
            slots = conn.execute(sa.select(schema.static_allocations.c.slots).where(
                schema.static_allocations.c.provision_id == made["provisionId"])).scalar_one()
    finally:
        ledger.dispose()
    assert slots == 2


def test_serve_checks_the_provisioner_set_before_it_starts(
        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", '{"a": {"type": "static",\n "spec": }}')
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    error = refused(run("serve", "--simulate", "--engine", "mock", "--json"), "INVALID_ARGUMENT")
    assert error["field"] == "ANYCLOUD_PROVISIONER_SET_JSON" and "line 2 column" in error["rule"]
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps(SET))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "nope")
    error = refused(run("serve", "--simulate", "--engine", "mock", "--json"), "INVALID_ARGUMENT")
    assert error["field"] == "ANYCLOUD_DEFAULT_PROVISIONER"


def test_sudo_project_restart_asks_first_or_takes_yes(cli: Any, tmp_path: Path) -> None:
    superusers(tmp_path, f"superusers:\n  users: [{ME}]\n")
    ok_json(cli("deployment", "create", "api", "--project", "web", "--start", "--json"))
    error = refused(cli("sudo", "project", "restart", "web", "--json"), "INVALID_ARGUMENT")
    assert error["field"] == "--yes" and "not a terminal" in error["rule"]
    assert ok_json(cli("deployment", "status", "api", "--json"))["state"] == "running"


def test_create_start_is_one_step_a_refused_start_leaves_nothing(
        cli: Any, ledger_url: str) -> None:
    for name in ("one", "two"):  # a's two slots
        ok_json(cli("deployment", "create", name, "--project", "web", "--start", "--json"))
    refused(cli("deployment", "create", "three", "--project", "web", "--start", "--json"),
            "NO_CAPACITY")
    names = [d["name"] for d in ok_json(cli("deployment", "list", "--json"))]
    assert names == ["one", "two"]  # no stopped "three" left behind
    assert len(allocations(ledger_url)) == 2
    # The name is free again: created stopped, it is kept.
    assert ok_json(cli("deployment", "create", "three", "--project", "web", "--json"))[
        "state"] == "stopped"


def test_status_and_list_answer_from_the_ledger_whatever_the_set(
        cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ok_json(cli("deployment", "create", "api", "--project", "web", "--start", "--json"))
    # Its provisioner removed from the set: status still answers, and says so.
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps({"b": SET["b"]}))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "b")
    status = ok_json(cli("deployment", "status", "api", "--json"))
    assert (status["state"], status["provisioner"]) == ("running", "a")
    assert status["health"]["ok"] is False and "is not in the set" in status["health"]["detail"]
    # No set at all: the ledger's view, and what is wrong with the set.
    monkeypatch.delenv("ANYCLOUD_PROVISIONER_SET_JSON")
    monkeypatch.delenv("ANYCLOUD_DEFAULT_PROVISIONER")
    status = ok_json(cli("deployment", "status", "api", "--json"))
    assert status["nextStart"] is None and status["health"] is None
    assert "ANYCLOUD_PROVISIONER_SET_JSON" in status["setProblem"]
    text = cli("deployment", "status", "api")
    assert text.exit_code == 0 and "PROBLEM" in text.output
    assert [d["name"] for d in ok_json(cli("deployment", "list", "--json"))] == ["api"]
