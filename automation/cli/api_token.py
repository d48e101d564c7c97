"""Where the CLI finds the API token it sends: the environment (never an argument: argv is
visible to every user of the machine in ``ps``)."""

from __future__ import annotations

import os

TOKEN_ENV = "ANYCLOUD_TOKEN"  # a person's or a script's token (member, admin, viewer)
AGENT_TOKEN_ENV = "ANYCLOUD_AGENT_TOKEN"  # an agent's: its pool's, from the operator's Secret


def required_token(env: str) -> str:
    from automation.errors import InvalidInput

    token = os.environ.get(env, "").strip()
    if not token:
        hint = ("the operator sets it from the AgentPool's Secret; by hand: anycloud token "
                "create NAME --role agent --pool NAMESPACE/NAME" if env == AGENT_TOKEN_ENV
                else "anycloud token create NAME --role member, then export it")
        raise InvalidInput(env, None, f"must hold an API token ({hint})")
    return token
