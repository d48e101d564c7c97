"""The server's provisioner set and the provisioners built from it, for one request."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import Request

from automation.provisioners.provisioner_set import ProvisionerSet, load_from_env, required
from automation.services.deployment_ops import Provisioning


def server_set(state: Any) -> ProvisionerSet:
    """``create_api``'s set, else the environment's, read when first needed (paths in it are
    relative to the server's working directory); refused by name when there is none."""
    if getattr(state, "provisioner_set", None) is None:
        state.provisioner_set = load_from_env(os.environ, Path.cwd())
    return required(state.provisioner_set)


@contextmanager
def provisioning(request: Request) -> Iterator[Provisioning]:
    state = request.app.state
    with Provisioning(state.ctx, lambda: server_set(state)) as found:
        yield found
