"""What every use case and control loop needs: the ledger, a clock, the catalog and the
cluster probe (``App``), one per process or request."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from automation.catalog.store import Catalog, load_catalog
from automation.clock import Clock, SystemClock
from automation.ledger.db import Ledger

if TYPE_CHECKING:
    from automation.kube.probe import ClusterProbe
    from automation.sealing import SealingKey


def _kubernetes_probe() -> ClusterProbe:
    from automation.kube.probe import KubernetesProbe

    return KubernetesProbe()


@dataclass
class App:
    ledger: Ledger
    clock: Clock = field(default_factory=SystemClock)
    probe: ClusterProbe = field(default_factory=_kubernetes_probe)
    # $ANYCLOUD_HOME: Pulumi work dirs and state, the mock engine's state, the passphrase.
    home: Path = field(default_factory=lambda: Path.home() / ".anycloud")

    @cached_property
    def catalog(self) -> Catalog:
        """The shipped catalog under the ledger's live refreshes (``catalog refresh``): one
        cheap query on first use of a region, nothing more when none was ever stored."""
        from automation.catalog.overlay import LedgerOverlay

        return load_catalog().with_overlay(LedgerOverlay(self.ledger))

    @cached_property
    def sealing(self) -> SealingKey | None:
        """The key secrets are sealed under (ANYCLOUD_SECRETS_KEY_FILE, ANYCLOUD_SECRETS_KEY);
        None when the environment names none. Read on first use: commands that store or
        open no secret never need it."""
        import os

        from automation.sealing import load_key

        return load_key(os.environ)
