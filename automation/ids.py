"""Identifiers: a short kind prefix, then a time-ordered lowercase base-36 body.

Time ordering makes "lowest attempt id" mean "oldest attempt"; lowercase alphanumerics keep
ids valid as VM names, Kubernetes names and cloud tags on every provider.

A reference (``{ref}``, ``--cluster``) is an id or a name, so the two must never look alike:
a name of one org shaped like another org's id would make that id name two records. Names
may not take an id's shape (``validation.check_name``), and a ref of that shape matches ids
only (``ledger.records.find_live``).
"""

from __future__ import annotations

import re
import secrets
import time

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
_BODY = 15  # 9 chars of milliseconds + 6 random

# Every kind prefix an id is made with; new_id refuses another, so that a new kind of record
# cannot forget to reserve its shape.
PREFIXES = frozenset({
    "at",  # VM attempt
    "cl",  # cluster
    "cr",  # credential
    "dp",  # deployment placed on a node pool
    "dpl",  # deployment of a project
    "np",  # node pool
    "org",
    "prj",  # project
    "refresh",  # catalog refresh
    "rg",  # a kubeconfig being registered (a memory file's name)
    "se",  # agent session
    "sv",  # service placed on a node pool
    "tok",  # API token
})
ID_SHAPE = rf"(?:{'|'.join(sorted(PREFIXES))})-[0-9a-z]{{{_BODY}}}"
_ID = re.compile(ID_SHAPE)
ID_SHAPE_RULE = (
    f"must not take the shape of an id ({'|'.join(sorted(PREFIXES))}, '-', then {_BODY} of "
    "0-9 a-z): a reference names an id or a name, and a name shaped like an id would "
    "shadow it"
)


def _base36(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, 36)
        out.append(_ALPHABET[r])
    return "".join(reversed(out))


def new_id(prefix: str) -> str:
    """``<prefix>-`` + 9 chars of milliseconds (good until year 5188) + 6 random chars."""
    if prefix not in PREFIXES:
        raise ValueError(f"id prefix {prefix!r} is not in ids.PREFIXES: add it there")
    millis = time.time_ns() // 1_000_000
    return f"{prefix}-{_base36(millis, 9)}{_base36(secrets.randbelow(36**6), 6)}"


def looks_like_id(ref: str) -> bool:
    """Whether ``ref`` has the shape of an id of any kind (no name may have it)."""
    return _ID.fullmatch(ref) is not None
