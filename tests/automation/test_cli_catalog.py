"""``anycloud catalog list|show`` through click, in embedded and remote mode alike, and the
commands that must not open the catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def _json(run: Any, *args: str) -> Any:
    result = run(*args, "--json")
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_list_gpu_model_sorted_by_price_unknown_last(run: Any, in_each_mode: str) -> None:
    rows = _json(run, "catalog", "list", "--gpu", "H100")
    assert {r["provider"] for r in rows} == {"aws", "gcp", "azure"}
    assert all("H100" in r["gpuModel"] and r["gpus"] >= 1 for r in rows)
    prices = [r["priceUsdHour"] for r in rows]
    known = [p for p in prices if p is not None]
    assert known == sorted(known) and prices[:len(known)] == known
    p5 = next(r for r in rows if r["vmType"] == "p5.48xlarge")
    assert p5["gpus"] == 8 and p5["priceSource"]["asOf"] == "2025-03-02"
    assert p5["priceSource"]["stale"] is True
    assert set(p5) >= {"vmType", "memoryGib", "gpuModel", "priceUsdHour", "priceSource", "regions"}


def test_list_every_filter(run: Any, in_each_mode: str) -> None:
    rows = _json(run, "catalog", "list", "--provider", "aws", "--region", "us-east-1", "--zone",
                 "us-east-1e", "--min-vcpus", "4", "--min-memory", "16", "--arch", "x86_64",
                 "--max-price", "0.25")
    assert rows
    for r in rows:
        assert r["provider"] == "aws" and r["region"] == "us-east-1"
        assert "us-east-1e" in r["zones"] and r["vcpus"] >= 4 and r["memoryGib"] >= 16
        assert r["arch"] == "x86_64" and r["priceUsdHour"] <= 0.25
    assert "m5.xlarge" not in {r["vmType"] for r in rows}  # not offered in us-east-1e
    gpus = _json(run, "catalog", "list", "--provider", "gcp", "--min-gpus", "8", "--region",
                 "us-central1")
    assert gpus and all(r["gpus"] >= 8 and r["provider"] == "gcp" for r in gpus)
    arm = _json(run, "catalog", "list", "--provider", "azure", "--arch", "arm64")
    assert arm and all(r["arch"] == "arm64" for r in arm)


@pytest.mark.parametrize(("args", "field"), [
    (["--provider", "oracle"], "--provider"),
    (["--region", "mars-1"], "--region"),
    (["--zone", "us-east-1a"], "--zone"),
    (["--region", "us-east-1", "--zone", "us-west-2a"], "--zone"),
])
def test_list_bad_filters_name_field_and_value(run: Any, in_each_mode: str, args: list[str],
                                                field: str) -> None:
    result = run("catalog", "list", *args, "--json")
    assert result.exit_code != 0
    error = json.loads(result.stdout)["error"]
    assert error["field"] == field and error["value"] == args[-1]


def test_list_human_table(run: Any, in_each_mode: str) -> None:
    result = run("catalog", "list", "--gpu", "A100", "--provider", "gcp", "--region",
                  "us-central1")
    assert result.exit_code == 0
    assert "a2-highgpu-4g" in result.stdout and "4 x NVIDIA A100" in result.stdout
    assert "USD/HOUR" in result.stdout and "(2026-07-30)" in result.stdout


def test_show_specs_regions_zones_prices_and_sources(run: Any, in_each_mode: str) -> None:
    shown = _json(run, "catalog", "show", "m5.xlarge")
    assert (shown["provider"], shown["vcpus"], shown["memoryGib"], shown["gpus"]) == (
        "aws", 4, 16.0, 0)
    by_region = {o["region"]: o for o in shown["offerings"]}
    assert "us-east-1e" not in by_region["us-east-1"]["zones"]
    assert by_region["us-east-1"]["priceUsdHour"] is None  # unknown in the source, not 0
    assert by_region["us-west-2"]["priceUsdHour"] == 0.192
    sources = {s["id"]: s for s in shown["sources"]}
    assert sources[by_region["us-west-2"]["priceSourceId"]]["asOf"] == "2025-03-02"
    assert sources[shown["specSourceId"]]["name"].startswith("moto")
    assert all(s["url"].startswith("https://") for s in sources.values())


def test_show_human_and_arm64_refusal_note(run: Any, in_each_mode: str) -> None:
    result = run("catalog", "show", "Standard_D4ps_v5")
    assert result.exit_code == 0
    assert "refused: the agent runs on x86_64 only" in result.stdout
    assert "eastus" in result.stdout and "Sources" in result.stdout


def test_show_unknown_type_suggests_real_ones(run: Any, in_each_mode: str) -> None:
    result = run("catalog", "show", "n2-standrd-4", "--json")
    assert result.exit_code != 0
    error = json.loads(result.stdout)["error"]
    assert error["value"] == "n2-standrd-4" and "did you mean" in error["rule"]
    assert "n2-standard-4" in error["rule"]


_PROBE = """
import json, sys
from automation.cli import cli
try:
    cli(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
cat = sys.modules.get("automation.catalog.store")
print(json.dumps(cat.load_catalog.cache_info().currsize if cat else 0), file=sys.stderr)
"""


# The start-up path: these never load the catalog (load_catalog). list and status show each
# pool's cost since issue 10; they read one offering row per (cloud, type, region) of the
# pools shown straight from the file (services.cost.lookup_prices), so with no pools, as
# here, they read nothing from it, and with pools they still never build the Catalog.
@pytest.mark.parametrize("args", [["--help"], ["node-pool", "list", "--json"],
                                  ["node-pool", "status", "x", "--json"], ["catalog", "--help"]])
def test_start_up_paths_never_open_the_catalog(tmp_path: Path, args: list[str]) -> None:
    env = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "home")}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    result = subprocess.run([sys.executable, "-c", _PROBE, *args], env=env, capture_output=True,
                            text=True, timeout=120)
    assert json.loads(result.stderr.strip().splitlines()[-1]) == 0, result.stderr
