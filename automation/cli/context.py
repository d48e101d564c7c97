"""Builds what a command needs, lazily: the ledger, or the full service context."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from automation.ledger.db import Ledger
    from automation.services.context import App


def ledger_from(ctx: click.Context) -> Ledger:
    root = ctx.find_root()
    if "ledger" not in root.obj:
        from automation.ledger import open_ledger
        from automation.settings import Settings

        root.obj["ledger"] = open_ledger(Settings.from_env(root.obj.get("home")).database_url)
    ledger: Ledger = root.obj["ledger"]
    return ledger


def app_from(ctx: click.Context) -> App:
    root = ctx.find_root()
    if "app" not in root.obj:
        from automation.services.context import App
        from automation.settings import Settings

        home = Settings.from_env(root.obj.get("home")).home
        root.obj["app"] = App(ledger=ledger_from(ctx), home=home)
    app: App = root.obj["app"]
    return app
