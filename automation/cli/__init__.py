"""The ``anycloud`` command line. Thin: parse, call a service, render."""

import os

from automation.cli.main import cli

__all__ = ["cli", "main", "short_lived_process"]


def short_lived_process() -> None:
    """Settings for a process that runs one command and exits.

    pydantic scans the entry points of every installed distribution for plugins on its first
    model (10-15 ms with the provider SDKs installed); anycloud uses none, and an explicit
    setting in the environment wins. The garbage collector: ``gc_mode``."""
    from automation.cli import gc_mode

    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    gc_mode.short_lived()


def main() -> None:
    """The ``anycloud`` console script."""
    from automation.cli import gc_mode

    short_lived_process()
    try:
        cli()
    finally:
        gc_mode.exiting()
