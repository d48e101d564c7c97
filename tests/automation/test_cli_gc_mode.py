"""The CLI's garbage-collector mode (automation/cli/gc_mode.py): short-lived by default, the
defaults back for the commands that run until stopped, and what is alive frozen on the way
out (so the interpreter's last collection does not walk it)."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest
from click.testing import CliRunner

from automation.cli import gc_mode
from automation.cli.main import cli

_PROBE = """
import gc, sys
from automation.cli import gc_mode, main
seen = {}
gc_mode.long_running = lambda: seen.setdefault("long", gc.get_threshold())
try:
    main()
except SystemExit:
    pass
print(gc.get_threshold()[0], seen.get("long", (0,))[0], gc.get_freeze_count() > 0,
      file=sys.stderr)
"""


@pytest.mark.parametrize(("argv", "expected"), [
    # short-lived: the long-running defaults were never asked for; frozen once it is done
    (["--help"], "100000 0 True"),
    (["no-such-command"], "100000 0 True"),  # an error on the way out too
])
def test_the_anycloud_script_starts_short_lived(argv: list[str], expected: str) -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True,
                          text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == expected, done.stderr
    assert gc.get_threshold() == gc_mode._DEFAULTS  # importing the CLI changes nothing


@pytest.mark.parametrize("argv", [
    ["serve", "--simulate"],
    ["operator"],
    ["broker"],
    ["agent", "--pool", "ns/pool"],
])
def test_commands_that_run_until_stopped_put_the_defaults_back_first(
        argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    def stop_here() -> None:
        raise SystemExit(99)  # before the command does anything else

    monkeypatch.setattr(gc_mode, "long_running", stop_here)
    monkeypatch.setenv("ANYCLOUD_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 99, result.output
