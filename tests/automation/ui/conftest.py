"""The API's fixtures (an App over each ledger, the API app, tokens of each role), and a
client like a browser, for the dashboard's tests."""

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.automation.api.conftest import api, callers, http, world  # noqa: F401


@pytest.fixture
def browser(api: FastAPI) -> Iterator[TestClient]:  # noqa: F811
    """A client like a browser on the dashboard: HTTPS (so it keeps its Secure cookies), its
    own cookie jar, no headers, redirects not followed."""
    with TestClient(api, base_url="https://testserver", raise_server_exceptions=False,
                    follow_redirects=False) as client:
        yield client
