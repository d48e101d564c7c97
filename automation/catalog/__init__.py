"""The VM catalog: what each cloud offers, where, and at what price.

``store`` reads the shipped catalog (``data/catalog.sqlite``, built by
``tools/catalog_generator``); ``overlay`` lays the newest live refresh stored in the ledger
over it; ``refresh`` holds the fetchers that read each cloud's own APIs for one.
"""
