"""Builds what a command needs, lazily: the ledger, or the full service context."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from automation.app import App
    from automation.client.config import Endpoint
    from automation.ledger.db import Ledger
    from automation.provisioners.provisioner_set import ProvisionerSet


def endpoint_from(ctx: click.Context) -> Endpoint:
    """Embedded or remote mode, and the remote settings (automation.client.config)."""
    root = ctx.find_root()
    if "endpoint" not in root.obj:
        from automation.client.config import resolve

        root.obj["endpoint"] = resolve(root.obj.get("api"), bool(root.obj.get("insecure")))
    found: Endpoint = root.obj["endpoint"]
    return found


def ledger_from(ctx: click.Context, *, local: bool = False) -> Ledger:
    """The local ledger. In remote mode a command that has no API route yet is refused
    (nothing is written to a ledger the user did not mean); ``local``: a command that runs
    on the control plane's own host (serve, broker, operator, token create --bootstrap)."""
    root = ctx.find_root()
    if not local and endpoint_from(ctx).url is not None:
        from automation.errors import AnycloudError

        command = ctx.command_path.removeprefix(root.info_name or "").strip()
        raise AnycloudError(
            f"`{command}` is not served by the API yet: in remote mode "
            f"({endpoint_from(ctx).url}) it would act on this machine's own ledger. Run it "
            "where the control plane runs, or switch back: anycloud api use local",
            code="UNIMPLEMENTED", field="mode", value="remote",
            rule="in remote mode a command goes through the API")
    if "ledger" not in root.obj:
        from automation.ledger import open_ledger
        from automation.settings import Settings

        root.obj["ledger"] = open_ledger(Settings.from_env(root.obj.get("home")).database_url)
    ledger: Ledger = root.obj["ledger"]
    return ledger


def app_from(ctx: click.Context, *, local: bool = False) -> App:
    root = ctx.find_root()
    if "app" not in root.obj:
        from automation.app import App
        from automation.clock import home_clock
        from automation.settings import Settings

        home = Settings.from_env(root.obj.get("home")).home
        root.obj["app"] = App(ledger=ledger_from(ctx, local=local), home=home,
                              clock=home_clock(home))
    app: App = root.obj["app"]
    return app


def config_path(ctx: click.Context) -> Path:
    """The control plane's config file: ANYCLOUD_CONFIG, else $ANYCLOUD_HOME/config.yaml."""
    import os

    from automation.settings import Settings

    named = os.environ.get("ANYCLOUD_CONFIG")
    return Path(named) if named else Settings.from_env(ctx.find_root().obj.get("home")).home \
        / "config.yaml"


def configured_provisioner_set() -> ProvisionerSet | None:
    """The provisioner set the environment names (None when it names none), checked whole:
    exit 2 on any error. Paths in it are relative to the current directory."""
    import os

    from automation.provisioners.provisioner_set import load_from_env

    return load_from_env(os.environ, Path.cwd())


def provisioner_set_from(ctx: click.Context) -> ProvisionerSet:
    """The provisioner set, required (a deployment is about to be provisioned); loaded once
    per command (its templates are read and checked when it loads)."""
    from automation.provisioners.provisioner_set import required

    root = ctx.find_root()
    if root.obj.get("provisioner_set") is None:
        root.obj["provisioner_set"] = configured_provisioner_set()
    return required(root.obj["provisioner_set"])
