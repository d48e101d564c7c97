"""What every cloud's fetcher returns: types, offerings and prices, with where and when."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from automation.catalog.store import VmType
from automation.models import Credential

Family = Literal["general-purpose", "compute-optimised", "gpu"]

# One VM type as the cloud describes it: the catalog's own type (only its families are kept).
FetchedType = VmType


class RefreshError(RuntimeError):
    """A refresh that could not complete; the message says why (nothing was stored)."""


@dataclass(frozen=True)
class FetchedOffering:
    """A type in one region: its zones (None = the API does not say) and its Linux on-demand
    price in USD per hour (None = no price found)."""

    vm_type: str
    region: str
    zones: tuple[str, ...] | None
    price_usd_hour: float | None


@dataclass(frozen=True)
class Snapshot:
    """Everything one refresh read for one cloud, as of ``fetched_at``.

    ``regions`` are the regions that were read: for those, the snapshot is the whole truth
    (a type of the shipped catalog missing from a refreshed region is no longer offered there).
    ``sources`` names each API read, e.g. ``"aws ec2:DescribeInstanceTypes"``.
    """

    provider: str
    regions: tuple[str, ...]
    types: tuple[FetchedType, ...]
    offerings: tuple[FetchedOffering, ...]
    sources: tuple[str, ...]
    fetched_at: datetime
    warnings: tuple[str, ...] = field(default=())


class Fetcher(Protocol):
    """Reads one cloud with one credential. Raises :class:`RefreshError` with the reason
    (which API, which region, what it answered) and never returns a partial snapshot."""

    def __call__(
        self, credential: Credential, regions: tuple[str, ...], now: datetime
    ) -> Snapshot: ...
