"""schemathesis against the API's own OpenAPI document, with a member's and an admin's token:
no 5xx, every answer matches its declared schema, status code and content type, and input
the schema refuses is refused (4xx). Bounded and derandomised, so a run is repeatable; the
stateful phase chains the operations the document links (create, then read and delete)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from automation.api.app import create_api
from automation.app import App
from automation.ledger.db import Ledger
from automation.serving import ServerThread

EXAMPLES = 8  # per operation: bounded, so the file runs in well under a minute per ledger
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))
# The document does not depend on the ledger: read once, at collection; each test sends its
# cases to its own server (``served``). (schemathesis' fixture-loaded schemas do not run
# under pytest 9.)
SCHEMA = schemathesis.openapi.from_dict(create_api(
    App(ledger=Ledger("sqlite://"), home=Path("/nonexistent")), limiter=None).openapi())
# Input the schema allows may still break a rule of the domain the schema cannot say (a
# region the catalog lacks, min > max): a 400 naming the field and the rule. A 422 (the
# server's parser and its own document disagree) or a 5xx still fails.
SCHEMA.config.checks.positive_data_acceptance.expected_statuses = [
    *SCHEMA.config.checks.positive_data_acceptance.expected_statuses, "400"]


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_url(postgres_url: str) -> str:
    """PostgreSQL alone: it stores less than SQLite (integers to 2**31 - 1, no NUL in text),
    so a case one ledger cannot store fails here; the values at those edges are sent to both
    by tests/automation/api/test_api_storage_edges.py. The rest of the answer is the same code
    over either ledger (the ledger and service tests run on both)."""
    return postgres_url


@pytest.fixture
def served(world: App, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A real server on loopback over the test's ledger (a cluster and a credential in it)."""
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")  # unlock: the server's engine, here the mock
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps({"a": {
        "type": "static", "spec": {"runtimes": [{"host": "a1.example", "slots": 2,
                                                 "data_dir": "/data/a"}]}}}))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    thread = ServerThread(create_api(world, limiter=None), "127.0.0.1:0")
    yield thread.url
    thread.stop()


def _short_polls(case: Any) -> Any:
    """A long poll's ``wait`` (up to 60 s) cut to a tenth of a second when it is one the
    schema allows: a pending session would hold each case for the whole wait. Waiting has
    its own tests (tests/automation/agentpools/test_broker.py)."""
    wait = (case.query or {}).get("wait")
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and 0 < wait <= 60:
        case.query["wait"] = 0.1
    return case


@SCHEMA.parametrize()
@SETTINGS
def test_every_operation_keeps_its_contract(case: Any, served: str,
                                            callers: dict[str, dict[str, str]]) -> None:
    for role in ("member", "admin"):
        _short_polls(case).call_and_validate(base_url=served, headers=callers[role])


@pytest.mark.parametrize("role", ["member", "admin"])
def test_chained_operations_keep_their_contract(served: str, role: str,
                                                callers: dict[str, dict[str, str]]) -> None:
    headers = callers[role]

    class Chained(SCHEMA.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            _short_polls(case)
            return {"base_url": served, "headers": headers}

    Chained.run(settings=settings(SETTINGS, stateful_step_count=6))
