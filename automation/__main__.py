"""``python -m automation``: the CLI, as the ``anycloud`` script runs it (the API's worker
processes are started this way: no script on PATH is needed)."""

from automation.cli import main

main()
