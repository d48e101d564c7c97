"""The CLI is asked its version once per binary, and a plugin is installed only when it is
missing by the CLI's own test: checked against a recording stand-in CLI, and the plugin
test against what the real CLI writes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from automation.engine import pulumi_cli


def recording_cli(folder: Path, version: str = "v3.274.1") -> Path:
    """A ``pulumi`` that logs each call and answers ``version``."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "calls.log"
    cli = folder / "pulumi"
    cli.write_text(f'#!/bin/sh\necho "$*" >> {log}\n[ "$1" = version ] && echo {version}\n'
                   "exit 0\n")
    cli.chmod(0o755)
    return log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_the_version_is_asked_once_per_binary(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pulumi_cli, "_COMMANDS", {})
    first = recording_cli(tmp_path / "a")
    monkeypatch.setenv("PATH", str(tmp_path / "a"))
    one = pulumi_cli.command()
    assert pulumi_cli.command() is one
    assert calls(first) == ["version"]
    assert str(one.version) == "3.274.1"

    # Another binary on PATH, or the same path replaced, is asked again.
    second = recording_cli(tmp_path / "b", version="v3.275.0")
    monkeypatch.setenv("PATH", str(tmp_path / "b"))
    assert str(pulumi_cli.command().version) == "3.275.0"
    assert calls(second) == ["version"]
    recording_cli(tmp_path / "b", version="v3.276.0")  # a longer script: another size
    assert str(pulumi_cli.command().version) == "3.276.0"


def test_without_a_cli_the_error_the_driver_maps(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError) as err:
        pulumi_cli.command()
    assert err.value.filename == "pulumi"


class RecordingWorkspace:
    def __init__(self) -> None:
        self.installed: list[tuple[str, str]] = []

    def install_plugin(self, name: str, version: str) -> None:
        self.installed.append((name, version))


def test_only_missing_or_unfinished_plugins_are_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path))
    monkeypatch.delenv("PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", raising=False)
    plugins = tmp_path / "plugins"
    (plugins / "resource-kubernetes-v4.25.0-alpha.1").mkdir(parents=True)
    (plugins / "resource-random-v4.19.1").mkdir()
    (plugins / "resource-random-v4.19.1.partial").touch()  # an install cut short
    workspace: Any = RecordingWorkspace()
    pulumi_cli.install_plugins(workspace, {"kubernetes": "v4.25.0-alpha.1",
                                           "random": "v4.19.1", "aws": "v7.1.0"})
    assert workspace.installed == [("random", "v4.19.1"), ("aws", "v7.1.0")]


@pytest.mark.parametrize("value", ["true", "TRUE", "1"])
def test_no_download_is_tried_where_the_environment_forbids_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """The CLI's own installs honour PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION; an
    explicit ``plugin install`` would download anyway (five tries, then a dump of them)."""
    from automation.engine.errors import PluginMissing

    monkeypatch.setenv("PULUMI_HOME", str(tmp_path))
    monkeypatch.setenv("PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", value)
    (tmp_path / "plugins" / "resource-kubernetes-v4.25.0").mkdir(parents=True)
    workspace: Any = RecordingWorkspace()
    with pytest.raises(PluginMissing) as missing:
        pulumi_cli.install_plugins(workspace, {"kubernetes": "v4.25.0", "aws": "v7.1.0",
                                               "random": "v4.19.1"})
    assert workspace.installed == []
    assert missing.value.code == "PLUGIN_MISSING" and missing.value.http_status == 503
    message = missing.value.message
    assert message.startswith(f"provider plugins not installed in {tmp_path / 'plugins'}: "
                              "pulumi-resource-aws v7.1.0, pulumi-resource-random v4.19.1;")
    assert "`pulumi plugin install resource aws 7.1.0 --file <binary>`" in message
    pulumi_cli.install_plugins(workspace, {"kubernetes": "v4.25.0"})  # nothing missing: fine


@pytest.mark.parametrize("value", ["false", "0", "", "yes"])
def test_other_values_leave_downloads_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         value: str) -> None:
    """Only what the CLI reads as true turns downloads off."""
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path))
    monkeypatch.setenv("PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", value)
    workspace: Any = RecordingWorkspace()
    pulumi_cli.install_plugins(workspace, {"aws": "v7.1.0"})
    assert workspace.installed == [("aws", "v7.1.0")]


def test_without_pulumi_home_the_users_own_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    monkeypatch.delenv("PULUMI_HOME", raising=False)
    monkeypatch.setenv("HOME", "/nowhere")  # the CLI reads the user database, not $HOME
    home = pwd.getpwuid(os.getuid()).pw_dir
    assert pulumi_cli.plugin_dir() == Path(home, ".pulumi", "plugins")


@pytest.mark.engine
def test_the_plugin_test_agrees_with_the_real_cli(engine_env: dict[str, str],
                                                  tmp_path: Path) -> None:
    """What the real CLI installs, removes, or leaves half-installed, as our test reads it."""
    from automation.devcluster import binaries

    provider = binaries.find("pulumi-resource-kubernetes")
    version = binaries.plugin_version(provider)
    env = {**engine_env, "PULUMI_HOME": str(tmp_path)}

    def cli(*args: str) -> None:
        subprocess.run(["pulumi", *args], env=env, check=True, capture_output=True)

    assert not pulumi_cli.plugin_installed("kubernetes", version, environ=env)
    cli("plugin", "install", "resource", "kubernetes", version, "--file", str(provider))
    assert pulumi_cli.plugin_installed("kubernetes", version, environ=env)
    assert pulumi_cli.plugin_installed("kubernetes", "v" + version, environ=env)
    assert not pulumi_cli.plugin_installed("kubernetes", version + "1", environ=env)
    cli("plugin", "rm", "resource", "kubernetes", version, "--yes")
    assert not pulumi_cli.plugin_installed("kubernetes", version, environ=env)
