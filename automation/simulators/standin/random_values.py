"""What the stand-in ``random`` plugin draws: ``RandomString`` and ``RandomPassword`` as
terraform-provider-random makes them (``internal/random/string.go``: the character sets
below, each ``min_*`` count drawn first from its set, the rest from all enabled sets, then
shuffled; every draw from crypto/rand). Ids as that provider sets them: a string's id is its
result, a password's is ``none`` (registry.terraform.io/providers/hashicorp/random/latest/
docs/resources/string and .../password)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

LOWER = "abcdefghijklmnopqrstuvwxyz"
UPPER = LOWER.upper()
NUMERIC = "0123456789"
SPECIAL = "!@#$%&*()-_=+[]{}<>:?"
TYPES = ("random:index/randomString:RandomString", "random:index/randomPassword:RandomPassword")


def draw(inputs: Mapping[str, Any]) -> str:
    def flag(name: str) -> bool:
        value = inputs.get(name)
        return True if value is None else bool(value)

    length = int(inputs.get("length") or 0)
    special = str(inputs.get("overrideSpecial") or SPECIAL)
    sets = [(LOWER, flag("lower"), "minLower"), (UPPER, flag("upper"), "minUpper"),
            (NUMERIC, flag("numeric"), "minNumeric"), (special, flag("special"), "minSpecial")]
    chars = [secrets.choice(chars) for chars, on, minimum in sets if on
             for _ in range(int(inputs.get(minimum) or 0))]
    pool = "".join(chars_ for chars_, on, _ in sets if on)
    if length < 1 or not pool:
        raise ValueError(f"length {length} with no character set enabled draws nothing")
    chars += [secrets.choice(pool) for _ in range(max(length - len(chars), 0))]
    secrets.SystemRandom().shuffle(chars)
    return "".join(chars)


def create(type_: str, inputs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The id and the outputs the provider adds for a new value of ``type_``."""
    from pulumi.runtime import rpc

    result = draw(inputs)
    if type_ == TYPES[0]:
        return result, {"result": result}
    return "none", {"result": rpc.wrap_rpc_secret(result)}
