"""The VM catalog generator: public data in, ``data/catalog.sqlite`` out
(``python -m tools.catalog_generator.generate [--check]``)."""
