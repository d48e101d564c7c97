"""Build ``data/catalog.sqlite`` from the pinned public data, or check the committed one.

    python -m tools.catalog_generator.generate          # write data/catalog.sqlite
    python -m tools.catalog_generator.generate --check  # regenerate into a temp dir, compare,
                                                        # exit 1 naming the first difference
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tools.catalog_generator import aws, curated, long_csv
from tools.catalog_generator.rows import Collected, Source
from tools.catalog_generator.store import logical, write

OUTPUT = Path(__file__).resolve().parents[2] / "data" / "catalog.sqlite"

CYCLENERD = ("https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/"
             "fd66b26ff84fee5cdd94f341ea89206e76c06b99/pricing.yml")
SKYPILOT = "https://github.com/anycloud-sh/catalog/tree/62ff0a987e0c257a89235415d2877812fb1aaf29"


def collect() -> Collected:
    raw = curated.load()
    out = curated.collect(raw)
    out.extend(aws.collect())
    out.extend(long_csv.collect("gcp", "gcp-2026-07.csv.gz", [
        Source("gcp-types", "GCP machine types and on-demand prices (pricing.yml, via "
               "sources/gcp-2026-07.csv.gz)", CYCLENERD, "Apache-2.0", "2026-07-30"),
        Source("gcp-zones", "GCP zones offering each type (SkyPilot-format gcp/vms.csv, via "
               "sources/gcp-2026-07.csv.gz)", SKYPILOT + "/gcp", "Apache-2.0", "2026-05-20"),
    ], zones_source="gcp-zones"))
    out.extend(long_csv.collect("azure", "azure-2026-05.csv.gz", [
        Source("azure-types", "Azure sizes and on-demand prices (SkyPilot-format azure/vms.csv "
               "from the Retail Prices data, via sources/azure-2026-05.csv.gz)",
               SKYPILOT + "/azure", "Apache-2.0", "2026-05-20"),
    ], zones_source=None, region_zones=curated.azure_region_zones(raw),
        region_source="azure-zones"))
    return out


def first_difference(committed: Path, fresh: Path) -> str | None:
    old, new = logical(committed), logical(fresh)
    for table in old:
        a, b = old[table], new[table]
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return f"table {table}, row {i}: committed {x!r}, regenerated {y!r}"
        if len(a) != len(b):
            extra = (a if len(a) > len(b) else b)[min(len(a), len(b))]
            side = "committed" if len(a) > len(b) else "regenerated"
            return (f"table {table}: {len(a)} committed rows, {len(b)} regenerated; "
                    f"first extra ({side}): {extra!r}")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.catalog_generator.generate",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if the committed catalog differs from a fresh build")
    parser.add_argument("--output", type=Path, default=OUTPUT,
                        help=f"the catalog file (default {OUTPUT})")
    args = parser.parse_args(argv)
    data = collect()
    if not args.check:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        write(data, args.output)
        print(f"{args.output}: {len(data.vm_types)} VM types, {len(data.offerings)} offerings, "
              f"{args.output.stat().st_size:,} bytes")
        return 0
    if not args.output.exists():
        print(f"{args.output}: missing; run python -m tools.catalog_generator.generate",
              file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "catalog.sqlite"
        write(data, fresh)
        diff = first_difference(args.output, fresh)
    if diff:
        print(f"{args.output} is not what the generator builds: {diff}\n"
              "run python -m tools.catalog_generator.generate and commit the result",
              file=sys.stderr)
        return 1
    print(f"{args.output}: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
