"""Builds of the Go programs the test suite runs (``python3 tools/build.py``)."""
