"""``data/catalog.sqlite``: the schema, writing it, and its logical content for ``--check``.

Keyed the way they are read: a ``create`` is one indexed lookup of (provider, type) joined
to its offering in the region by primary key (type id, region id); names are stored once.
Sources are a table referenced by id so every figure carries where it came from and its
date; a later refresh overlay adds sources and offering rows of the same shape.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tools.catalog_generator.rows import Collected

FORMAT = "1"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE sources (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, url TEXT NOT NULL, licence TEXT NOT NULL,
  as_of TEXT NOT NULL, stale INTEGER NOT NULL, note TEXT NOT NULL);
CREATE TABLE providers (
  key TEXT PRIMARY KEY, name TEXT NOT NULL, isolated_networking INTEGER NOT NULL,
  zone_style TEXT NOT NULL, source_id INTEGER NOT NULL REFERENCES sources) WITHOUT ROWID;
CREATE TABLE regions (
  id INTEGER PRIMARY KEY, provider TEXT NOT NULL, region TEXT NOT NULL,
  zones TEXT NOT NULL, source_id INTEGER NOT NULL REFERENCES sources,
  UNIQUE (provider, region));
CREATE TABLE vm_types (
  id INTEGER PRIMARY KEY, provider TEXT NOT NULL, name TEXT NOT NULL, arch TEXT NOT NULL,
  vcpus INTEGER NOT NULL, memory_gib REAL NOT NULL, gpus INTEGER NOT NULL, gpu_model TEXT,
  family TEXT NOT NULL, source_id INTEGER NOT NULL REFERENCES sources,
  UNIQUE (provider, name));
-- zones_mask: bit i set = the i-th zone of the region's zone list offers the type;
-- NULL = which zones is unknown. price_usd_hour NULL = unknown.
CREATE TABLE offerings (
  type_id INTEGER NOT NULL REFERENCES vm_types, region_id INTEGER NOT NULL REFERENCES regions,
  zones_mask INTEGER, zones_source_id INTEGER REFERENCES sources,
  price_usd_hour REAL, price_source_id INTEGER REFERENCES sources,
  PRIMARY KEY (type_id, region_id)) WITHOUT ROWID;
CREATE TABLE other_types (
  provider TEXT NOT NULL, name TEXT NOT NULL, family TEXT NOT NULL,
  source_id INTEGER NOT NULL REFERENCES sources,
  PRIMARY KEY (provider, name)) WITHOUT ROWID;
"""
TABLES = ("meta", "sources", "providers", "regions", "vm_types", "offerings", "other_types")


def write(data: Collected, path: Path) -> None:
    """A fresh file at ``path`` (ids in key order, rows inserted in key order, vacuumed:
    stable bytes for one SQLite version)."""
    path.unlink(missing_ok=True)
    ids = {s.key: n for n, s in enumerate(data.sources, start=1)}
    if len(ids) != len(data.sources):
        raise ValueError("two sources share a key")

    def sid(key: str | None) -> int | None:
        return None if key is None else ids[key]

    regions = sorted(data.regions, key=lambda r: (r.provider, r.region))
    region_ids = {(r.provider, r.region): n for n, r in enumerate(regions, start=1)}
    region_zones = {(r.provider, r.region): r.zones for r in regions}
    types = sorted(data.vm_types, key=lambda t: (t.provider, t.name))
    type_ids = {(t.provider, t.name): n for n, t in enumerate(types, start=1)}

    def mask(provider: str, region: str, zones: tuple[str, ...] | None) -> int | None:
        if zones is None:
            return None
        order = region_zones[(provider, region)]
        missing = set(zones) - set(order)
        if missing:
            raise ValueError(f"{provider} {region}: zones {sorted(missing)} not in {order}")
        return sum(1 << order.index(z) for z in zones)

    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        con.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
        con.executemany("INSERT INTO sources VALUES (?,?,?,?,?,?,?)", [
            (ids[s.key], s.name, s.url, s.licence, s.as_of, int(s.stale), s.note)
            for s in data.sources])
        con.executemany("INSERT INTO providers VALUES (?,?,?,?,?)", sorted(
            (p.key, p.name, int(p.isolated_networking), p.zone_style, ids[p.source])
            for p in data.providers))
        con.executemany("INSERT INTO regions VALUES (?,?,?,?,?)", [
            (region_ids[(r.provider, r.region)], r.provider, r.region, " ".join(r.zones),
             ids[r.source]) for r in regions])
        con.executemany("INSERT INTO vm_types VALUES (?,?,?,?,?,?,?,?,?,?)", [
            (type_ids[(t.provider, t.name)], t.provider, t.name, t.arch, t.vcpus, t.memory_gib,
             t.gpus, t.gpu_model, t.family, ids[t.source]) for t in types])
        con.executemany("INSERT INTO offerings VALUES (?,?,?,?,?,?)", sorted(
            (type_ids[(o.provider, o.vm_type)], region_ids[(o.provider, o.region)],
             mask(o.provider, o.region, o.zones), sid(o.zones_source), o.price_usd_hour,
             sid(o.price_source)) for o in data.offerings))
        con.executemany("INSERT INTO other_types VALUES (?,?,?,?)", sorted(
            (o.provider, o.name, o.family, ids[o.source]) for o in data.other_types))
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()


def logical(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows in key order: what ``--check`` compares (bytes vary with SQLite)."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return {t: sorted(con.execute(f"SELECT * FROM {t}"), key=repr) for t in TABLES}
    finally:
        con.close()
