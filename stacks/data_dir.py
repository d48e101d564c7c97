"""Where the shipped data files live (catalog, pins, Cloudflare ranges): ``data/`` of a
checkout, ``anycloud_data/`` where the wheel installs them (pyproject). Imports nothing of
ours, so a start-up path can ask without loading the pins or the catalog."""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = _ROOT / "data" if (_ROOT / "data").is_dir() else _ROOT / "anycloud_data"
