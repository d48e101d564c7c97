"""Which provisioner a deployment is provisioned with: the project's, else its org's
default, else the global default. A pure function; the caller applies it only when a
deployment goes from stopped to running (a running one keeps what it has)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from automation.errors import InvalidInput
from automation.provisioners.provisioner_set import ProvisionerSet

# "current": the runtime stays with the provisioner holding it (only a project or org choice
# moves a provisioned runtime; the global default places new ones).
Level = Literal["project", "org", "global", "current"]


@dataclass(frozen=True)
class Resolved:
    name: str
    level: Level  # where the choice came from, shown by `deployment status`


def resolve(provisioners: ProvisionerSet, *, project: str, project_choice: str | None,
            org: str, org_default: str | None) -> Resolved:
    """The first choice that is set, checked against the set: a choice naming a provisioner
    the set no longer has is refused (naming where it was set), never skipped silently."""
    choices: tuple[tuple[Level, str, str | None, str], ...] = (
        ("project", project, project_choice,
         f"anycloud sudo project edit {project} --provisioner <name>"),
        ("org", org, org_default,
         f"anycloud sudo org set-default-provisioner {org} <name>"),
    )
    for level, owner, choice, how in choices:
        if choice is None:
            continue
        if choice not in provisioners.provisioners:
            raise InvalidInput(f"{level} {owner} provisioner", choice,
                               "must name a provisioner of the set "
                               f"({', '.join(sorted(provisioners.provisioners))}); "
                               f"change it with `{how}`")
        return Resolved(choice, level)
    return Resolved(provisioners.default, "global")  # checked when the set was loaded
