"""Drift in ``node-pool status`` (issue 23): the last check in text and ``--json``, and
``--check-drift`` running one now, on pools the mock engine applied to the simulated cloud
that ``reconcile --simulate`` keeps in $ANYCLOUD_HOME/sim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from automation.simulators.world import SimWorld
from tests.automation.test_cli_rollout import run  # noqa: F401  (the fixture)


def _applied(run: Any) -> None:  # noqa: F811
    once = run("reconcile", "--once", "--simulate", "--engine", "mock", "--passes", "4",
               "--advance", "1m")
    assert once.exit_code == 0, once.output


def _status(run: Any, *args: str) -> dict[str, Any]:  # noqa: F811
    result = run("node-pool", "status", "cpu", *args, "--json")
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_a_vm_type_changed_in_the_console_shows_in_status(run: Any, tmp_path: Path) -> None:  # noqa: F811
    _applied(run)
    # The periodic check is off under the mock engine by default: never checked.
    assert _status(run)["drift"] is None
    assert "Drift: not checked yet" in run("node-pool", "status", "cpu").stdout

    clean = _status(run, "--check-drift", "--simulate")["drift"]
    assert clean["changes"] == [] and clean["engine"] == "mock"
    assert clean["source"] == "simulated cloud" and clean["checkedAt"] and clean["error"] is None
    text = run("node-pool", "status", "cpu").stdout
    assert "Drift: none (checked " in text and "simulated cloud: mock engine" in text

    cloud = SimWorld(tmp_path / "home" / "sim").cloud
    pool_id = _status(run)["id"]
    vm = sorted(cloud.vms_of_pool(pool_id), key=lambda v: v.attempt_id)[0]
    cloud.console_change_vm_type(vm.attempt_id, "m7i.4xlarge")

    checked = run("node-pool", "status", "cpu", "--check-drift", "--simulate")
    assert checked.exit_code == 0, checked.output
    assert "Drift: 1 change (checked " in checked.stdout
    assert "  changed aws:ec2/instance:Instance " in checked.stdout
    assert ": instanceType\n" in checked.stdout
    # Recorded: a plain status shows the last check, in both forms.
    drift = _status(run)["drift"]
    assert [(c["type"], c["op"], c["properties"]) for c in drift["changes"]] == [
        ("aws:ec2/instance:Instance", "update", ["instanceType"])]
    assert set(drift["changes"][0]) == {"urn", "type", "name", "op", "properties"}
    assert "m7i.4xlarge" not in json.dumps(drift)  # property names, never values
    listed = {p["name"]: p for p in json.loads(run("node-pool", "list", "--json").stdout)}
    assert listed["cpu"]["drift"] == drift and listed["gpu"]["drift"] is None


def test_a_failed_check_is_shown_as_such_not_as_the_pools_error(run: Any) -> None:  # noqa: F811
    _applied(run)
    before = _status(run)
    # The plain mock engine keeps no cloud to compare with: the check fails, and says so.
    failed = _status(run, "--check-drift", "--engine", "mock")["drift"]
    assert failed["errorCode"] == "DRIFT_UNSUPPORTED" and failed["error"]
    assert failed["changes"] == []
    after = _status(run)
    assert (after["lastError"], after["lastErrorCode"], after["state"]) == (
        before["lastError"], before["lastErrorCode"], before["state"])
    assert "Drift: check failed (checked " in run("node-pool", "status", "cpu").stdout


def test_engine_options_need_check_drift(run: Any) -> None:  # noqa: F811
    result = run("node-pool", "status", "cpu", "--engine", "mock")
    assert result.exit_code == 2 and "--check-drift" in result.output


def test_a_pool_bought_by_the_mock_engine_is_not_checked_with_pulumi(
        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    _applied(run)
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/pulumi")
    result = run("node-pool", "status", "cpu", "--check-drift", "--engine", "pulumi", "--json")
    assert result.exit_code == 2 and "ENGINE_MISMATCH" in result.output
    assert _status(run)["drift"] is None  # nothing recorded


def test_check_drift_answers_the_same_in_each_mode(
        run: Any, in_each_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The server's engine in remote mode (ANYCLOUD_ENGINE there), this machine's embedded;
    the plain mock engine fails the check in both, the same way."""
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")
    doc = _status(run, "--check-drift")
    assert doc["drift"]["errorCode"] == "DRIFT_UNSUPPORTED"
    assert doc["drift"]["source"] == "simulated cloud"
    if in_each_mode == "remote":
        refused = run("node-pool", "status", "cpu", "--check-drift", "--simulate", "--json")
        assert refused.exit_code == 2 and "--simulate" in refused.output


def test_an_engine_named_with_simulate_is_the_one_that_runs_or_it_is_refused(
        run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # --engine pulumi with --simulate once ran the mock engine without a word. It runs the
    # real engine now (test_crash_safety_real_engine), or, without the tools it needs, is
    # refused before the simulated world (or anything else) is made, naming how to build it.
    from automation.devcluster import engine_env
    from automation.devcluster.binaries import ToolMissing

    def no_tools() -> None:
        raise ToolMissing("pulumi")

    monkeypatch.setattr(engine_env, "local_tools", no_tools)
    sim = tmp_path / "home" / "sim"
    for argv in (("reconcile", "--once", "--simulate", "--engine", "pulumi"),
                 ("serve", "--simulate", "--engine", "pulumi"),
                 ("node-pool", "status", "cpu", "--check-drift", "--simulate",
                  "--engine", "pulumi"),
                 ("node-pool", "adopt", "cpu", "--simulate", "--engine", "pulumi")):
        result = run(*argv, "--json")
        assert result.exit_code != 0, (argv, result.output)
        error = json.loads(result.stdout)["error"]
        assert error["code"] == "TOOL_MISSING" and "tools/build.py" in error["message"], error
        assert not sim.exists(), argv
