import re

from automation.catalog import load_catalog


def test_each_isolated_cloud_lists_cpu_gpu_and_arm_types() -> None:
    catalog = load_catalog()
    assert catalog.isolated_providers == ["aws", "azure", "gcp"]
    for key in catalog.isolated_providers:
        types = catalog.providers[key].vm_types
        x86_cpu = [t for t in types if t.arch == "x86_64" and t.gpus == 0]
        gpu_counts = {t.gpus for t in types if t.arch == "x86_64" and t.gpus}
        assert x86_cpu, key
        assert {1, 4, 8} <= gpu_counts, (key, gpu_counts)
        assert any(t.arch == "arm64" for t in types), key
        assert all(t.gpu_model and t.gpu_model.startswith("NVIDIA") for t in types if t.gpus)


def test_zones_belong_to_their_region() -> None:
    catalog = load_catalog()
    for key, cloud in catalog.providers.items():
        for region, zones in cloud.regions.items():
            for zone in zones:
                if cloud.zone_style == "suffix":
                    assert re.fullmatch(re.escape(region) + r"-?[a-z]", zone), zone
                else:
                    assert cloud.zone_style == "digit" and zone.isdigit() and len(zone) == 1, key


def test_type_names_are_unique_per_provider() -> None:
    for cloud in load_catalog().providers.values():
        names = [t.name for t in cloud.vm_types]
        assert len(names) == len(set(names))
