"""The fast developer type check: mypy with trimmed provider-SDK stubs (see stubs.py).

    python tools/mypy/typecheck.py            # one mypy run, incremental cache in .mypy_cache/
    python tools/mypy/typecheck.py --daemon   # the same through dmypy: re-checks in seconds
    python tools/mypy/typecheck.py --print-config   # write the config, print its path (and
                                                    # which SDK packages stay whole, and why)

It scans our packages (the `packages` of [tool.mypy] in pyproject.toml) for the SDK names
they read, writes the trimmed package stubs for exactly those under
~/.cache/anycloud/mypy-stubs (ANYCLOUD_MYPY_STUBS moves it), and runs mypy with the
[tool.mypy] settings plus `mypy_path` pointing there. Extra arguments go to mypy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tools.mypy import stubs, usage  # noqa: E402


def _ini_value(value: object) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def mypy_ini(settings: dict[str, object], stub_dir: Path, cache_dir: Path) -> str:
    """[tool.mypy] as an ini file, with mypy_path (stubs first) and cache_dir set."""
    main = {k: v for k, v in settings.items() if k != "overrides"}
    extra_path = main.pop("mypy_path", None)
    paths = [str(stub_dir), *([_ini_value(extra_path)] if extra_path else [])]
    main["mypy_path"] = ":".join(paths)
    main["cache_dir"] = str(cache_dir)
    lines = ["[mypy]", *(f"{k} = {_ini_value(v)}" for k, v in main.items())]
    overrides = settings.get("overrides", [])
    assert isinstance(overrides, list)
    for override in overrides:
        modules = override["module"]
        patterns = modules if isinstance(modules, list) else [modules]
        lines += ["", f"[mypy-{','.join(patterns)}]"]
        lines += [f"{k} = {_ini_value(v)}" for k, v in override.items() if k != "module"]
    return "\n".join(lines) + "\n"


def prepare(repo: Path = REPO, cache_root: Path | None = None) -> tuple[Path, stubs.StubPlan]:
    """Scan, write stubs and the config; the config path and the plan."""
    settings = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["mypy"]
    roots = [repo / p for p in settings.get("packages", [])] + [
        repo / f for f in settings.get("files", [])]
    found = usage.scan_files(usage.python_files(roots))
    cache_root = cache_root or stubs.default_cache_root()
    stub_plan = stubs.plan(found, usage.BIG_SDKS, cache_root)
    stub_dir = stubs.write(stub_plan, cache_root)
    cache_dir = repo / ".mypy_cache" / "trimmed"
    cache_dir.mkdir(parents=True, exist_ok=True)
    config = repo / ".mypy_cache" / "trimmed.ini"
    text = mypy_ini(settings, stub_dir, cache_dir)
    if not config.is_file() or config.read_text() != text:
        config.write_text(text)
    return config, stub_plan


def main(argv: list[str]) -> int:
    daemon = "--daemon" in argv
    print_only = "--print-config" in argv
    extra = [a for a in argv if a not in ("--daemon", "--print-config")]
    config, stub_plan = prepare()
    if stub_plan.whole:
        # Only the names: the reasons (file:line) are long; --print-config lists them.
        print(f"typecheck: not trimmed: {', '.join(sorted(stub_plan.whole))}", file=sys.stderr)
    if print_only:
        for name, why in sorted(stub_plan.whole.items()):
            print(f"typecheck: {name} not trimmed: {why}", file=sys.stderr)
        print(config)
        return 0
    if daemon:
        status = REPO / ".mypy_cache" / "trimmed-dmypy.json"
        cmd = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(status), "run", "--",
               "--config-file", str(config), *extra]
    else:
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(config), *extra]
    return subprocess.run(cmd, cwd=REPO, env=os.environ.copy()).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
