"""Which top-level modules a CLI command imports, run as a fresh process: start-up paths must
not pay for (or load) what they do not use."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROBE = """
import json, sys
from automation.cli import cli
try:
    cli(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)
"""


def modules_loaded_by(args: list[str], env: dict[str, str] | None = None
                      ) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The top-level modules loaded by ``anycloud ARGS`` (in-process CLI in a new
    interpreter), and the finished process."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})
    return set(json.loads(done.stderr.strip().splitlines()[-1])), done


_SEQUENCE_PROBE = """
import io, json, sys
from automation.cli import cli
seen = []
for args in json.loads(sys.argv[1]):
    out, real = io.StringIO(), sys.stdout
    sys.stdout = out
    try:
        cli(args, standalone_mode=False)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    finally:
        sys.stdout = real
    seen.append({"args": args, "exit": code, "stdout": out.getvalue(),
                 "modules": sorted(m for m in sys.modules if not m.startswith("__"))})
print(json.dumps(seen), file=sys.stderr)
"""


def modules_loaded_by_each(commands: list[list[str]], env: dict[str, str] | None = None
                           ) -> list[dict[str, object]]:
    """Run ``commands`` one after the other in one fresh interpreter (as ``anycloud`` would,
    each in-process): per command, its exit code, its stdout and every module (full dotted
    names) loaded by then."""
    done = subprocess.run([sys.executable, "-c", _SEQUENCE_PROBE, json.dumps(commands)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    found: list[dict[str, object]] = json.loads(done.stderr.strip().splitlines()[-1])
    return found
