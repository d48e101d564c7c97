"""The pinned PyPI wheels the generator reads: fetched with pip, checked by sha256, read as zips."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path

PINS = Path(__file__).with_name("pins.toml")
CACHE_ENV = "ANYCLOUD_CATALOG_SOURCES"


class WheelError(RuntimeError):
    pass


@dataclass(frozen=True)
class Pin:
    package: str
    version: str
    wheel: str
    sha256: str
    licence: str


def pins() -> dict[str, Pin]:
    with PINS.open("rb") as fh:
        raw = tomllib.load(fh)
    return {name: Pin(package=name, **spec) for name, spec in raw.items()}


def cache_dir() -> Path:
    # Outside the repository: the wheels are tens of MB and pinned by hash, not committed.
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache/anycloud/catalog-sources")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Wheel:
    """One pinned wheel, opened as a zip file after its hash matched the pin."""

    def __init__(self, pin: Pin) -> None:
        self.pin = pin
        path = cache_dir() / pin.wheel
        if not path.exists():
            cache_dir().mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                 f"{pin.package}=={pin.version}", "-d", str(cache_dir())],
                check=True,
            )
        actual = _sha256(path)
        if actual != pin.sha256:
            raise WheelError(
                f"{path}: sha256 {actual} does not match the pin {pin.sha256} in {PINS}"
            )
        self.zip = zipfile.ZipFile(path)

    def read(self, member: str) -> bytes:
        return self.zip.read(member)

    def members(self, prefix: str) -> list[str]:
        return sorted(n for n in self.zip.namelist() if n.startswith(prefix))

    def member_date(self, member: str) -> str:
        """The date stored for ``member`` in the wheel: when the packager wrote the data."""
        y, m, d = self.zip.getinfo(member).date_time[:3]
        return date(y, m, d).isoformat()

    def url(self) -> str:
        return f"https://pypi.org/project/{self.pin.package}/{self.pin.version}/"
