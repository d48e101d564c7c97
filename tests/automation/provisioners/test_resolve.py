"""Resolution order from seed 002: the project's provisioner, else the org's default, else
the global default; a choice naming a provisioner the set lacks is refused, never skipped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from automation.errors import InvalidInput
from automation.provisioners.provisioner_set import ProvisionerSet, StaticEntry
from automation.provisioners.resolve import resolve

STATIC = StaticEntry.model_validate({"type": "static", "spec": {"runtimes": [
    {"host": "http://h:1", "slots": 1, "data_dir": "/d", "audience_url": "http://h:1"}]}})
SET = ProvisionerSet(provisioners={"a": STATIC, "b": STATIC, "c": STATIC}, default="c")


@pytest.mark.parametrize("project_choice,org_default,expected", [
    ("a", "b", ("a", "project")),
    ("a", None, ("a", "project")),
    (None, "b", ("b", "org")),
    (None, None, ("c", "global")),
])
def test_the_resolution_matrix(project_choice: str | None, org_default: str | None,
                               expected: tuple[str, str]) -> None:
    got = resolve(SET, project="web", project_choice=project_choice, org="acme",
                  org_default=org_default)
    assert (got.name, got.level) == expected


@given(st.sampled_from([None, "a", "b", "c"]), st.sampled_from([None, "a", "b", "c"]))
def test_the_first_set_choice_wins(project_choice: str | None, org_default: str | None) -> None:
    got = resolve(SET, project="web", project_choice=project_choice, org="acme",
                  org_default=org_default)
    assert got.name == (project_choice or org_default or SET.default)


@pytest.mark.parametrize("project_choice,org_default,field,how", [
    ("gone", "b", "project web provisioner", "sudo project edit web --provisioner"),
    (None, "gone", "org acme provisioner", "sudo org set-default-provisioner acme"),
])
def test_a_choice_the_set_no_longer_has_is_refused(
    project_choice: str | None, org_default: str | None, field: str, how: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        resolve(SET, project="web", project_choice=project_choice, org="acme",
                org_default=org_default)
    assert err.value.field == field and err.value.value == "gone"
    assert how in (err.value.rule or "")
