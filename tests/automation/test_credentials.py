from pathlib import Path

import pytest

from automation.app import App
from automation.errors import Conflict, InvalidInput
from automation.services import credentials as svc
from tests.automation.conftest import DEMO_CA, snapshot

SUB, TEN, CLI = (f"00000000-0000-0000-0000-00000000000{i}" for i in (1, 2, 3))


@pytest.mark.parametrize(("provider", "opts", "stored"), [
    ("aws", {"profile": "team"}, {"profile": "team"}),
    ("aws", {"role_arn": "arn:aws:iam::123456789012:role/anycloud"},
     {"role_arn": "arn:aws:iam::123456789012:role/anycloud"}),
    ("gcp", {"project": "my-project", "key_file": str(DEMO_CA)},
     {"project": "my-project", "key_file": str(DEMO_CA.resolve())}),
    ("azure", {"subscription_id": SUB, "tenant_id": TEN, "client_id": CLI},
     {"subscription_id": SUB, "tenant_id": TEN, "client_id": CLI,
      "client_secret_env": "AZURE_CLIENT_SECRET"}),
])
def test_references_are_stored(app: App, provider: str, opts: dict, stored: dict) -> None:
    cred = svc.new_credential(app, svc.NewCredential("c1", provider, opts))
    assert cred.reference == stored and cred.provider == provider
    assert [c.name for c in svc.list_credentials(app)] == ["c1"]


@pytest.mark.parametrize(("provider", "opts", "field"), [
    ("aws", {}, "--profile"),
    ("aws", {"role_arn": "not-an-arn"}, "--role-arn"),
    ("aws", {"profile": "x", "project": "p"}, "--project"),
    ("gcp", {"key_file": str(DEMO_CA)}, "--project"),
    ("gcp", {"project": "my-project"}, "--key-file"),
    ("gcp", {"project": "my-project", "key_file": "/nonexistent.json"}, "--key-file"),
    ("gcp", {"project": "X", "key_file": str(DEMO_CA)}, "--project"),
    ("azure", {"subscription_id": SUB, "tenant_id": TEN}, "--client-id"),
    ("azure", {"subscription_id": "nope", "tenant_id": TEN, "client_id": CLI},
     "--subscription-id"),
    ("oracle", {"profile": "x"}, "--provider"),
])
def test_bad_credentials_refused(app: App, provider: str, opts: dict, field: str) -> None:
    before = snapshot(app)
    with pytest.raises(InvalidInput) as err:
        svc.new_credential(app, svc.NewCredential("c1", provider, opts))
    assert err.value.field == field
    assert snapshot(app) == before


def test_no_secret_is_accepted_on_the_command(app: App, tmp_path: Path) -> None:
    # There is no option for a secret value at all: an Azure secret comes from the environment.
    with pytest.raises(InvalidInput):
        svc.new_credential(app, svc.NewCredential(
            "c1", "aws", {"profile": "x", "client_secret": "hunter2"}
        ))


def test_duplicate_name_refused(app: App) -> None:
    svc.new_credential(app, svc.NewCredential("c1", "aws", {"profile": "a"}))
    with pytest.raises(Conflict) as err:
        svc.new_credential(app, svc.NewCredential("c1", "aws", {"profile": "b"}))
    assert err.value.code == "ALREADY_EXISTS"


def test_delete_unused_credential(app: App) -> None:
    svc.new_credential(app, svc.NewCredential("c1", "aws", {"profile": "a"}))
    assert svc.delete_credential(app, "c1").state == "deleted"
    assert svc.list_credentials(app) == []
