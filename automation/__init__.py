"""The anycloud control plane: models, catalog, ledger, services, CLI."""

__version__ = "0.1.0"
