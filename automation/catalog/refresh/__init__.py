"""Live catalog refresh: current VM types, zone offerings and prices read from a cloud's own
APIs with a stored credential, kept in the ledger as a dated overlay over the shipped catalog.

Each cloud has a fetcher (``aws``, ``gcp``, ``azure``) that turns the cloud's answers into one
:class:`~automation.catalog.refresh.model.Snapshot`; ``store`` writes a snapshot to the ledger
in one transaction (a failed fetch writes nothing) and ``automation.catalog.overlay`` reads the
newest one back. The use case (``anycloud catalog refresh``) is
``automation.services.catalog_refresh``.
"""
