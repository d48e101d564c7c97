"""The ledger: durable intent and observations, on SQLite or PostgreSQL (SQLAlchemy Core)."""

from automation.ledger.db import Ledger, open_ledger

__all__ = ["Ledger", "open_ledger"]
