"""Who may choose provisioners (``anycloud sudo ...``): the control plane's config decides.

The config file (``ANYCLOUD_CONFIG``, default ``$ANYCLOUD_HOME/config.yaml``, the file the
AgentPool operator reads too) names them::

    superusers:
      users: [alice, root]       # login names
      group: anycloud-admins     # or members of this OS group

With no ``superusers`` section nobody is one: a sudo command says how to configure it. The CLI
enforces this for the person running it; anyone who can write the ledger directly can bypass
it, so keep the ledger (its file or database role) to the control plane's operators.
"""

from __future__ import annotations

import grp
import os
import pwd
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from automation.errors import InvalidInput, PermissionDenied

__all__ = ["PermissionDenied", "Superusers", "current_user", "load_superusers",
           "require_superuser"]


class Superusers(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: list[str] = []
    group: str | None = None


def load_superusers(path: Path) -> Superusers | None:
    """The ``superusers`` section of the config file; None when the file or section is absent."""
    import yaml

    if not path.exists():
        return None
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput("config file", str(path), f"must be readable: {exc}") from None
    except yaml.YAMLError as exc:
        raise InvalidInput("config file", str(path),
                           f"must be YAML: {' '.join(str(exc).split())}") from None
    section = data.get("superusers") if isinstance(data, dict) else None
    if section is None:
        return None
    try:
        return Superusers.model_validate(section)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InvalidInput(f"{path}: superusers.{where}".rstrip("."), err.get("input"),
                           err["msg"]) from None


def current_user() -> tuple[str, set[str]]:
    """The login name of this process and the names of its groups."""
    name = pwd.getpwuid(os.geteuid()).pw_name
    gids = set(os.getgroups()) | {os.getegid()}
    groups = set()
    for gid in gids:
        try:
            groups.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return name, groups


def require_superuser(path: Path, who: tuple[str, set[str]] | None = None) -> str:
    """The superuser's name, or PermissionDenied naming the rule and where it is set."""
    allowed = load_superusers(path)
    user, groups = who or current_user()
    if allowed is None:
        raise PermissionDenied(
            f"{user} is not a superuser: "
            + (f"{path} has no superusers section" if path.exists() else f"{path} does not exist"),
            field="user", value=user,
            rule=f"a superuser is listed in {path} (superusers: {{users: [...], group: ...}})")
    if user in allowed.users or (allowed.group is not None and allowed.group in groups):
        return user
    by = ", ".join(filter(None, [f"users {allowed.users}" if allowed.users else "",
                                 f"group {allowed.group}" if allowed.group else ""]))
    raise PermissionDenied(f"{user} is not a superuser", field="user", value=user,
                           rule=f"must be one of the superusers in {path} ({by or 'none'})")
