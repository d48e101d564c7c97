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
