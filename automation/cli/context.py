"""Builds the service context for a command, opening the ledger on first use."""

from __future__ import annotations

import click

from automation.services.context import App
from automation.settings import Settings


def app_from(ctx: click.Context) -> App:
    root = ctx.find_root()
    if "app" not in root.obj:
        from automation.ledger import open_ledger

        settings = Settings.from_env(root.obj.get("home"))
        root.obj["app"] = App(ledger=open_ledger(settings.database_url))
    app: App = root.obj["app"]
    return app
