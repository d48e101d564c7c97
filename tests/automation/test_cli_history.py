"""``anycloud node-pool history``: the pool's attempts and last events, as ``--json`` (the
API's body, in both modes) and as tables."""

from __future__ import annotations

import json
from typing import Any

from automation.app import App
from tests.automation.api.conftest import world  # noqa: F401
from tests.automation.test_pool_history import seed_history


def test_history_json_is_the_services_answer(world: App, run: Any,  # noqa: F811
                                             in_each_mode: str) -> None:
    pool = seed_history(world)
    result = run("node-pool", "history", "gpu", "--limit", "2", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["pool"] == {"id": pool, "name": "gpu"}
    assert [(a["id"], a["state"]) for a in doc["attempts"]] == [
        ("at-3", "pending"), ("at-2", "running")]
    assert doc["attempts"][1]["replaces"] == "at-1"
    assert [e["kind"] for e in doc["events"]] == ["pool_failed", "attempt_released"]
    assert "203.0.113.10" not in result.stdout and "k3s-abc" not in result.stdout


def test_history_text_shows_both_tables(world: App, run: Any) -> None:  # noqa: F811
    seed_history(world)
    out = run("node-pool", "history", "gpu").stdout
    assert "VM attempts of gpu" in out and "Last events of gpu" in out
    assert "at-1" in out and "released" in out and "Node NotReady" in out
    assert "pool_failed" in out and "203.0.113.10" not in out


def test_a_limit_out_of_range_is_bad_input(world: App, run: Any,  # noqa: F811
                                          in_each_mode: str) -> None:
    seed_history(world)
    result = run("node-pool", "history", "gpu", "--limit", "0", "--json")
    assert result.exit_code == 2, result.output
    assert "limit" in result.output and "between 1 and 500" in result.output
