"""What every use case and control loop needs: the ledger, a clock, the catalog and the
cluster probe (``App``), one per process or request."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from automation.catalog.store import Catalog, load_catalog
from automation.clock import Clock, SystemClock
from automation.ledger.db import Ledger

if TYPE_CHECKING:
    from automation.kube.probe import ClusterProbe
    from automation.sealing import KeySource, SealingKey


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
        cheap query on first use of a region, nothing more when none was ever stored. Kept
        for this App's life (``catalog_changed`` drops it)."""
        return self.read_catalog()

    def read_catalog(self) -> Catalog:
        """The same, read afresh: the refreshes stored by now, by any process."""
        from automation.catalog.overlay import LedgerOverlay

        return load_catalog().with_overlay(LedgerOverlay(self.ledger))

    def catalog_changed(self) -> None:
        """A refresh was stored: this App's next use of ``catalog`` reads it."""
        self.__dict__.pop("catalog", None)

    def kubeconfig_path(self, cluster: Any) -> str | None:
        """Where the Kubernetes clients and the engine read the cluster's kubeconfig: the file
        registered in embedded mode, or, for one sent to the API, its sealed copy opened into
        a memory-only file (``automation.memfiles``). None: the cluster has neither."""
        if cluster["kubeconfig_path"]:
            return str(cluster["kubeconfig_path"])
        import sqlalchemy as sa

        from automation import memfiles
        from automation.ledger import schema
        from automation.sealing import SealingKeyMissing, owner

        whose = owner("cluster", cluster["id"])
        table = schema.sealed_secrets
        with self.ledger.read() as conn:
            sealed = conn.execute(sa.select(table.c.sealed, table.c.fingerprint).where(
                table.c.owner == whose)).first()
        if sealed is None:
            return None
        name = f"{cluster['id']}.kubeconfig"
        path = memfiles.memory_dir() / name
        if self._opened.get(name) != sealed.fingerprint or not path.exists():
            if self.sealing is None:
                raise SealingKeyMissing(f"the kubeconfig of cluster {cluster['name']!r}")
            path = memfiles.write_private(name, self.sealing.open(sealed.sealed, whose))
            self._opened[name] = sealed.fingerprint
        return str(path)

    def with_kubeconfig(self, cluster: Any) -> dict[str, Any]:
        """The cluster row with ``kubeconfig_path`` where it can be read (a sealed one opened
        into memory): the form every Kubernetes client and stack target takes."""
        if cluster["kubeconfig_path"]:
            return dict(cluster)
        return {**cluster, "kubeconfig_path": self.kubeconfig_path(cluster)}

    @cached_property
    def _opened(self) -> dict[str, str]:
        return {}  # memory file -> the fingerprint of what it holds

    @cached_property
    def keys(self) -> KeySource:
        """Where the secrets key comes from (ANYCLOUD_SECRETS_KEY_FILE, ANYCLOUD_SECRETS_KEY).
        Read on first use: commands that store or open no secret never need it."""
        import os

        from automation.sealing import KeySource

        return KeySource(os.environ)

    @property
    def sealing(self) -> SealingKey | None:
        """The key secrets are sealed under, with the previous keys that still open (a
        rotation under way); None when the environment names none. Its file is read again
        when it changes, so a running server follows a rotation."""
        if "_sealing_given" in self.__dict__:
            return self.__dict__["_sealing_given"]  # type: ignore[no-any-return]
        return self.keys.current()

    @sealing.setter
    def sealing(self, key: SealingKey | None) -> None:
        """A fixed key (tests, the simulators), never read from the environment."""
        self.__dict__["_sealing_given"] = key
