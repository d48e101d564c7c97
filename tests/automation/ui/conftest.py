"""The API's fixtures (an App over each ledger, the API app, tokens of each role), for the
dashboard's tests."""

from tests.automation.api.conftest import api, callers, http, world  # noqa: F401
