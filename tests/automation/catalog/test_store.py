"""The shipped VM catalog (data/catalog.sqlite): every row valid, sources dated, the API."""

import pickle
import re
import shutil
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from automation.catalog.store import ListFilter, load_catalog
from tools.catalog_generator import generate, wheels

CATALOG = load_catalog()


def _db() -> sqlite3.Connection:
    return sqlite3.connect(f"file:{CATALOG.path}?mode=ro&immutable=1", uri=True)


def test_each_isolated_cloud_lists_cpu_gpu_and_arm_types() -> None:
    assert CATALOG.isolated_providers == ["aws", "azure", "gcp"]
    for key in CATALOG.isolated_providers:
        types = CATALOG.providers[key].vm_types
        assert len(types) > 300, key  # every type of the families, not a hand-picked few
        assert {1, 4, 8} <= {t.gpus for t in types if t.arch == "x86_64" and t.gpus}, key
        assert any(t.arch == "arm64" for t in types), key
        assert {t.family for t in types} == {"general-purpose", "compute-optimised", "gpu"}, key


def test_every_type_row_is_valid() -> None:
    for cloud in CATALOG.providers.values():
        names = [t.name for t in cloud.vm_types]
        assert len(names) == len(set(names)), cloud.key
        for t in cloud.vm_types:
            assert t.vcpus > 0 and t.memory_gib > 0, t
            assert t.arch in ("x86_64", "arm64"), t
            if t.gpus:
                assert t.family == "gpu" and t.gpu_model and t.gpu_model.startswith("NVIDIA "), t
            else:
                assert t.gpu_model is None and t.family != "gpu", t


@pytest.mark.parametrize(("provider", "vm", "gpus", "model"), [
    ("aws", "p4d.24xlarge", 8, "A100"), ("aws", "g5.xlarge", 1, "A10G"),
    ("aws", "g5.12xlarge", 4, "A10G"), ("aws", "p5.48xlarge", 8, "H100"),
    ("aws", "g6.xlarge", 1, "L4"), ("aws", "g4dn.xlarge", 1, "T4"),
    ("gcp", "a2-highgpu-4g", 4, "A100"), ("gcp", "a2-highgpu-1g", 1, "A100"),
    ("gcp", "a3-highgpu-8g", 8, "H100"), ("gcp", "g2-standard-4", 1, "L4"),
    ("gcp", "g2-standard-48", 4, "L4"), ("gcp", "a2-ultragpu-8g", 8, "A100 80GB"),
    ("azure", "Standard_NC24ads_A100_v4", 1, "A100 80GB"),
    ("azure", "Standard_NC96ads_A100_v4", 4, "A100 80GB"),
    ("azure", "Standard_ND96isr_H100_v5", 8, "H100"), ("azure", "Standard_NC4as_T4_v3", 1, "T4"),
    ("azure", "Standard_NC64as_T4_v3", 4, "T4"),
])
def test_gpu_count_is_the_models_known_count(provider: str, vm: str, gpus: int,
                                              model: str) -> None:
    found = CATALOG.providers[provider].vm_type(vm)
    assert found is not None and found.gpus == gpus and found.gpu_model == f"NVIDIA {model}"


@pytest.mark.parametrize(("provider", "vm", "why"), [
    ("aws", "g6f.large", "an L4 partition"), ("aws", "g4ad.xlarge", "AMD GPU"),
    ("aws", "inf2.xlarge", "Inferentia"), ("aws", "r5.large", "memory-optimised"),
    ("aws", "mac2.metal", "macOS"), ("aws", "hpc7a.96xlarge", "HPC"),
    ("gcp", "e2-micro", "shared core"), ("gcp", "g4-standard-12", "a quarter GPU"),
    ("azure", "Standard_NV12ads_A10_v5", "a third of an A10"),
    ("azure", "Standard_ND96isr_MI300X_v5", "AMD GPU"),
])
def test_types_outside_the_families_are_left_out(provider: str, vm: str, why: str) -> None:
    assert CATALOG.providers[provider].vm_type(vm) is None, why


def test_zones_belong_to_their_region_and_follow_the_zone_style() -> None:
    for key, cloud in CATALOG.providers.items():
        for region, zones in cloud.regions.items():
            assert len(zones) == len(set(zones)), (key, region)
            for zone in zones:
                if cloud.zone_style == "suffix":
                    assert re.fullmatch(re.escape(region) + r"-?[a-z]", zone), zone
                else:
                    assert cloud.zone_style == "digit" and zone in ("1", "2", "3"), key
            if cloud.zone_style == "none":
                assert zones == [], key
    with _db() as db:
        # An offering's zones are a subset of its region's (the mask has no bit beyond them).
        bad = db.execute(
            "SELECT count(*) FROM offerings o JOIN regions r ON r.id = o.region_id "
            "WHERE o.zones_mask IS NOT NULL AND (o.zones_mask = 0 OR o.zones_mask >= "
            "(1 << (length(r.zones) - length(replace(r.zones, ' ', '')) + 1)))"
        ).fetchone()[0]
    assert bad == 0


def test_every_figure_names_a_dated_source() -> None:
    with _db() as db:
        sources = {r[0]: r for r in db.execute("SELECT id, name, url, as_of, stale FROM sources")}
        for sid, name, url, as_of, _ in sources.values():
            assert name and url.startswith("https://") and re.fullmatch(
                r"\d{4}-\d{2}-\d{2}", as_of), sid
        for table, column in [("providers", "source_id"), ("regions", "source_id"),
                              ("vm_types", "source_id"), ("other_types", "source_id")]:
            ids = {r[0] for r in db.execute(f"SELECT DISTINCT {column} FROM {table}")}
            assert ids and ids <= set(sources), table
        # A known price or zone set always says where it came from.
        orphans = db.execute(
            "SELECT count(*) FROM offerings WHERE (price_usd_hour IS NOT NULL AND "
            "price_source_id IS NULL) OR (zones_mask IS NOT NULL AND zones_source_id IS NULL)"
        ).fetchone()[0]
    assert orphans == 0
    prices = CATALOG.providers["aws"].offering("p5.48xlarge", "us-east-1")
    assert prices is not None and prices.price_source is not None
    assert prices.price_source.as_of == "2025-03-02" and prices.price_source.stale


def test_offering_prices_and_where_a_type_is_offered() -> None:
    aws = CATALOG.providers["aws"]
    m5 = aws.offering("m5.xlarge", "us-east-1")
    assert m5 is not None and "us-east-1e" not in (m5.zones or [])
    assert m5.price_usd_hour is None  # libcloud's 0 (unknown), not a free VM
    east2 = aws.offering("m5.xlarge", "us-east-2")
    assert east2 is not None and east2.price_usd_hour == 0.204  # libcloud's figure, as shipped
    assert "us-east-1" not in aws.regions_offering("p5e.48xlarge")
    n2 = CATALOG.offering("n2-standard-4", "us-central1")
    assert n2 is not None and n2.provider == "gcp" and n2.price_usd_hour == pytest.approx(0.194236)
    d4 = CATALOG.offering("Standard_D4s_v5", "eastus")
    assert d4 is not None and d4.zones is None and d4.price_usd_hour == 0.192
    assert CATALOG.providers["azure"].zones_offering("eastus", "Standard_D4s_v5") == ["1", "2", "3"]
    assert aws.closest("m5.xlarg", "us-east-1") == ["m5.xlarge", "m5n.xlarge"]
    assert aws.outside_families("x2iedn.xlarge") == "memory-optimised"
    assert aws.outside_families("m5.xlarge") is None


def test_listing_filters_and_sorts_by_price_unknown_last() -> None:
    listed = CATALOG.listing(ListFilter(gpu="H100"))
    assert listed and all(x.vm.gpu_model and "H100" in x.vm.gpu_model for x in listed)
    prices = [x.price_usd_hour for x in listed]
    known = [p for p in prices if p is not None]
    assert known == sorted(known) and prices[:len(known)] == known
    in_region = CATALOG.listing(ListFilter(provider="aws", region="us-east-1", zone="us-east-1e",
                                           min_vcpus=4, arch="x86_64", max_price=0.2))
    assert in_region and all(
        x.region == "us-east-1" and x.vm.vcpus >= 4 and (x.price_usd_hour or 1) <= 0.2
        and x.zones is not None and "us-east-1e" in x.zones for x in in_region)
    assert "m5.xlarge" not in {x.vm.name for x in in_region}  # not offered in us-east-1e


def test_check_accepts_the_committed_catalog_and_names_a_changed_row(tmp_path: Path) -> None:
    copy = tmp_path / "catalog.sqlite"
    shutil.copy(CATALOG.path, copy)
    assert generate.main(["--check", "--output", str(copy)]) == 0
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE vm_types SET vcpus = 5 WHERE provider = 'aws' AND name = 'm5.xlarge'")
    diff = generate.first_difference(copy, CATALOG.path)
    assert diff is not None and "table vm_types" in diff and "'m5.xlarge'" in diff
    assert generate.main(["--check", "--output", str(copy)]) == 1


def test_check_names_a_missing_row(tmp_path: Path) -> None:
    copy = tmp_path / "catalog.sqlite"
    shutil.copy(CATALOG.path, copy)
    with sqlite3.connect(copy) as db:
        db.execute("DELETE FROM other_types WHERE name = 'r5.large'")
    diff = generate.first_difference(copy, CATALOG.path)
    assert diff is not None and "table other_types" in diff and "'r5.large'" in diff


def test_catalog_is_usable_from_threads_and_after_pickling() -> None:
    # SQLite connections may not cross threads or processes: each gets its own.
    aws = CATALOG.providers["aws"]
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda region: aws.offering("m5.xlarge", region),
                              ["us-east-1", "us-east-2", "us-west-2", "eu-west-1"] * 2))
    assert all(o is not None and o.vm_type == "m5.xlarge" for o in found)
    copy = pickle.loads(pickle.dumps(CATALOG))
    assert copy.path == CATALOG.path
    assert copy.providers["gcp"].offering("n2-standard-4", "us-central1") is not None


def test_a_wheel_that_does_not_match_its_pin_is_refused(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pin = wheels.pins()["botocore"]
    (tmp_path / pin.wheel).write_bytes(b"not the pinned wheel")
    monkeypatch.setenv(wheels.CACHE_ENV, str(tmp_path))
    with pytest.raises(wheels.WheelError, match=f"does not match the pin {pin.sha256}"):
        wheels.Wheel(pin)
