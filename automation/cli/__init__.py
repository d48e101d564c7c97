"""The ``anycloud`` command line. Thin: parse, call a service, render."""

from automation.cli.main import cli

__all__ = ["cli"]
