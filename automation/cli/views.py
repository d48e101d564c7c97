"""Text built from a command's JSON (camelCase, the API's contract): the same lines in
embedded mode (the service's models, dumped) and in remote mode (the server's JSON as it came,
never validated into models: a thin client loads neither pydantic nor ``automation.models``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from automation.cli.output import to_jsonable


def plain(data: Any) -> Any:
    """A model as its JSON (camelCase keys); JSON already parsed as it is."""
    return to_jsonable(data)


def when(at: str | None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """An ISO time from the JSON as ``fmt`` (UTC, as every time the API gives), or ``""``."""
    return datetime.fromisoformat(at).strftime(fmt) if at else ""


def short_source(name: str | None) -> str:
    """``apache-libcloud: EC2 Linux ...`` -> ``apache-libcloud`` (the full name is in JSON)."""
    return (name or "unknown source").split(":")[0].split(" (")[0]


def describe_cost(cost: Mapping[str, Any] | Any) -> str:
    """``$0.3840/hour, $276.48/30 days (2 VMs; apache-libcloud 2025-03-02, stale)``"""
    c = plain(cost)
    vms = f"{c['vms']} VM" + ("" if c["vms"] == 1 else "s")
    if c.get("hourlyUsd") is None or c.get("monthlyUsd") is None:
        return f"price unknown ({vms}): {c.get('hint')}"
    stale = ", stale" if c.get("stale") else ""
    return (f"${c['hourlyUsd']:.4f}/hour, ${c['monthlyUsd']:.2f}/30 days "
            f"({vms}; {short_source(c.get('source'))} {c.get('asOf')}{stale})")
