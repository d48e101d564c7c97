"""Pack configuration: policy names, enforcement defaults, config schemas and data-file defaults.

Pulumi hands each policy only its own config section (``args.get_config()``), so a setting
two policies need (``gpuPools``) lives in both sections. The offline path reads the same
shape: the JSON of ``pulumi preview --policy-pack-config``, i.e.
``{"all": level, "<policy>": level | {"enforcementLevel": level, "<key>": value, ...}}``.

Cloudflare ranges and the x86_64 VM types are too long to pass on every run, so when a
section does not set them they come from ``data/cloudflare.toml`` and the generated
``data/catalog.sqlite`` (a ``data/catalog.toml`` there overrides it) next to this package.
If neither has them, the policy that needs them raises
``PolicyConfigError`` naming the config key and the file.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import sqlite3
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROVIDERS = ("aws", "gcp", "azure")

# Policy names (stable: they are config keys and appear in every violation).
NO_PUBLIC_INGRESS = "no-public-ingress"
NO_SSH_KEY = "no-ssh-key"
NO_CLOUD_CREDENTIAL = "no-cloud-credential"
AWS_IMDSV2 = "aws-imdsv2-hop-limit-1"
VM_TYPE_X86_64 = "vm-type-x86-64"
DAEMONSET_IMAGE_DIGEST = "daemonset-image-digest"
K3S_CHECKSUM_PINNED = "k3s-checksum-pinned"
POOL_LABELS_AND_TAINT = "pool-labels-and-taint"
GPU_WORKLOAD_REQUESTS = "gpu-workload-requests"
BOOTSTRAP_TOKEN = "bootstrap-token-ttl-and-secret"
VM_COUNT_GUARDRAIL = "guardrail-vms-per-pool"
GPU_COUNT_GUARDRAIL = "guardrail-gpus-per-pool"
COST_ALLOCATION_TAGS = "cost-allocation-tags"

MANDATORY = "mandatory"
ADVISORY = "advisory"
DISABLED = "disabled"
REMEDIATE = "remediate"
LEVELS = (ADVISORY, MANDATORY, REMEDIATE, DISABLED)

DEFAULT_LEVELS: dict[str, str] = {
    NO_PUBLIC_INGRESS: MANDATORY,
    NO_SSH_KEY: MANDATORY,
    NO_CLOUD_CREDENTIAL: MANDATORY,
    AWS_IMDSV2: MANDATORY,
    VM_TYPE_X86_64: MANDATORY,
    DAEMONSET_IMAGE_DIGEST: MANDATORY,
    K3S_CHECKSUM_PINNED: MANDATORY,
    POOL_LABELS_AND_TAINT: MANDATORY,
    GPU_WORKLOAD_REQUESTS: MANDATORY,
    BOOTSTRAP_TOKEN: MANDATORY,
    COST_ALLOCATION_TAGS: MANDATORY,
    VM_COUNT_GUARDRAIL: ADVISORY,
    GPU_COUNT_GUARDRAIL: ADVISORY,
}

# Static defaults; the schema carries them too so `pulumi policy` shows them.
DEFAULT_MAX_TOKEN_TTL_MINUTES = 60
DEFAULT_MAX_VMS_PER_POOL = 20
DEFAULT_MAX_GPUS_PER_POOL = 32

DATA_DIR_ENV = "ANYCLOUD_POLICY_DATA_DIR"


class PolicyConfigError(ValueError):
    """The pack lacks a setting it needs (neither config nor data file provides it)."""


def data_dir() -> Path:
    """``$ANYCLOUD_POLICY_DATA_DIR``, else ``data/`` of the checkout, else ``anycloud_data/``
    (where the wheel installs the same files, beside the package)."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    root = Path(__file__).resolve().parent.parent
    checkout, installed = root / "data", root / "anycloud_data"
    return installed if not checkout.is_dir() and installed.is_dir() else checkout


_GPU_POOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "GPU pool ids mapped to the nvidia.com/gpu count one Node advertises; "
    "pools not listed are CPU pools.",
    "additionalProperties": {"type": "integer", "minimum": 1},
}

CONFIG_SCHEMAS: dict[str, dict[str, dict[str, Any]]] = {
    NO_PUBLIC_INGRESS: {
        "cloudflareIpv4": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Allowed IPv4 source CIDRs (default: data/cloudflare.toml ipv4).",
        },
        "cloudflareIpv6": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Allowed IPv6 source CIDRs (default: data/cloudflare.toml ipv6).",
        },
    },
    NO_SSH_KEY: {
        "azureAdminPasswordAllowed": {
            "type": "boolean",
            # Azure refuses a Linux VM with neither a password nor an SSH key; pool VMs get
            # a random, never-shown password, and the rule still demands the user data turn
            # password SSH off. Set false to refuse any Azure admin password.
            "default": True,
            "description": "Allow an Azure adminPassword with password authentication on, "
            "provided the user data disables password SSH.",
        },
    },
    VM_TYPE_X86_64: {
        "allowedVmTypes": {
            "type": "object",
            "description": "x86_64 VM types per provider (aws, gcp, azure); "
            "default: the x86_64 entries of data/catalog.sqlite (or a catalog.toml there).",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
        "extraVmTypes": {
            "type": "object",
            "description": "x86_64 VM types per provider allowed on top of allowedVmTypes (or "
            "its default): types a live catalog refresh found that the shipped catalog lacks.",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
    },
    BOOTSTRAP_TOKEN: {
        "maxTokenTtlMinutes": {
            "type": "integer",
            "minimum": 1,
            "default": DEFAULT_MAX_TOKEN_TTL_MINUTES,
            "description": "Latest allowed expiration, in minutes after the policy run.",
        },
    },
    GPU_WORKLOAD_REQUESTS: {"gpuPools": _GPU_POOLS_SCHEMA},
    VM_COUNT_GUARDRAIL: {
        "maxVmsPerPool": {"type": "integer", "minimum": 1, "default": DEFAULT_MAX_VMS_PER_POOL},
    },
    GPU_COUNT_GUARDRAIL: {
        "maxGpusPerPool": {"type": "integer", "minimum": 1, "default": DEFAULT_MAX_GPUS_PER_POOL},
        "gpuPools": _GPU_POOLS_SCHEMA,
    },
}


# --- data files -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _load_toml(path: Path, mtime_ns: int) -> dict[str, Any]:
    # mtime in the key so an edited data file is re-read by a long-lived pack process.
    del mtime_ns
    with path.open("rb") as fh:
        return tomllib.load(fh)


def _read_toml(path: Path) -> dict[str, Any] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    try:
        return _load_toml(path, stat.st_mtime_ns)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyConfigError(f"{path}: invalid TOML: {exc}") from exc


def _string_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyConfigError(f"{where}: expected a list of strings, got {value!r}")
    return list(value)


@dataclass(frozen=True)
class CloudflareRanges:
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    def contains(self, cidr: str) -> bool:
        """True when ``cidr`` is a valid network inside one of the allowed ranges."""
        try:
            net = ipaddress.ip_network(cidr.strip(), strict=False)
        except ValueError:
            return False
        return any(
            net.version == allowed.version and net.subnet_of(allowed)  # type: ignore[arg-type]
            for allowed in self.networks
        )


def _parse_networks(
    values: Iterable[str], where: str
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    nets = []
    for value in values:
        try:
            nets.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError as exc:
            raise PolicyConfigError(f"{where}: {value!r} is not a CIDR: {exc}") from exc
    return tuple(nets)


def cloudflare_ranges(config: Mapping[str, Any]) -> CloudflareRanges:
    """Allowed ingress sources: config ``cloudflareIpv4``/``cloudflareIpv6``, else the data file."""
    v4 = config.get("cloudflareIpv4")
    v6 = config.get("cloudflareIpv6")
    if v4 is None and v6 is None:
        path = data_dir() / "cloudflare.toml"
        data = _read_toml(path)
        if data is None:
            raise PolicyConfigError(
                f"{NO_PUBLIC_INGRESS}: no Cloudflare ranges: set config "
                f"'{NO_PUBLIC_INGRESS}.cloudflareIpv4'/'cloudflareIpv6' or provide {path} "
                "with ipv4 = [...] and ipv6 = [...]"
            )
        v4, v6 = data.get("ipv4", []), data.get("ipv6", [])
        where = str(path)
    else:
        where = f"config {NO_PUBLIC_INGRESS}"
    cidrs = _string_list(v4 or [], f"{where}: ipv4") + _string_list(v6 or [], f"{where}: ipv6")
    if not cidrs:
        raise PolicyConfigError(f"{where}: the Cloudflare range list is empty")
    return CloudflareRanges(_parse_networks(cidrs, where))


# --- catalog ----------------------------------------------------------------------------------

_ARCH_KEYS = ("arch", "architecture", "cpu_arch", "cpuArchitecture")
_NAME_KEYS = ("name", "vm_type", "vmType", "instance_type", "machine_type", "size", "type", "id")
_GPU_KEYS = ("gpus", "gpu_count", "gpuCount", "gpu")
_PROVIDER_KEYS = ("provider", "cloud")
_X86_NAMES = {"x86_64", "amd64", "x86-64", "x64"}


def normalize_arch(value: str) -> str:
    return "x86_64" if value.strip().lower() in _X86_NAMES else value.strip().lower()


@dataclass(frozen=True)
class CatalogEntry:
    provider: str
    vm_type: str
    arch: str
    gpus: int


def _walk_catalog(
    node: Any, key: str | None, provider: str | None, out: list[CatalogEntry]
) -> None:
    # The catalog is written by another team; accept any nesting in which an entry is a table
    # carrying an arch key, found under a provider key or with a provider field.
    if isinstance(node, dict):
        if key in PROVIDERS:
            provider = key
        arch = next((node[k] for k in _ARCH_KEYS if isinstance(node.get(k), str)), None)
        if arch is not None:
            prov = next((node[k] for k in _PROVIDER_KEYS if isinstance(node.get(k), str)), provider)
            name = next((node[k] for k in _NAME_KEYS if isinstance(node.get(k), str)), key)
            gpus = next((node[k] for k in _GPU_KEYS if isinstance(node.get(k), int)), 0)
            if prov in PROVIDERS and name:
                out.append(CatalogEntry(prov, name, normalize_arch(arch), int(gpus)))
            return
        for k, v in node.items():
            _walk_catalog(v, k, provider, out)
    elif isinstance(node, list):
        if key is not None and normalize_arch(key) == "x86_64" and provider:
            for item in node:
                if isinstance(item, str):
                    out.append(CatalogEntry(provider, item, "x86_64", 0))
            return
        for item in node:
            _walk_catalog(item, key, provider, out)


def parse_catalog(data: Mapping[str, Any]) -> list[CatalogEntry]:
    out: list[CatalogEntry] = []
    _walk_catalog(dict(data), None, None, out)
    return out


def catalog_entries() -> list[CatalogEntry] | None:
    """The VM types of ``catalog.toml`` in the data dir if there is one (a hand-written
    override, any layout), else of the generated ``catalog.sqlite``; None if neither."""
    directory = data_dir()
    data = _read_toml(directory / "catalog.toml")
    if data is not None:
        return parse_catalog(data)
    db = directory / "catalog.sqlite"
    try:
        stat = db.stat()
    except FileNotFoundError:
        return None
    return _sqlite_entries(str(db), stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _sqlite_entries(path: str, _mtime_ns: int) -> list[CatalogEntry]:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            rows = con.execute("SELECT provider, name, arch, gpus FROM vm_types").fetchall()
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise PolicyConfigError(f"{path}: unreadable VM catalog: {exc}") from exc
    return [CatalogEntry(p, n, normalize_arch(a), int(g)) for p, n, a, g in rows
            if p in PROVIDERS]


def _catalog_where() -> str:
    directory = data_dir()
    return f"{directory / 'catalog.sqlite'} (python -m tools.catalog.generate) or catalog.toml"


def allowed_vm_types(config: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """x86_64 VM types per provider: config ``allowedVmTypes`` (else the data dir's catalog),
    plus config ``extraVmTypes``."""
    extra = config.get("extraVmTypes") or {}
    if not isinstance(extra, Mapping):
        raise PolicyConfigError(
            f"config {VM_TYPE_X86_64}.extraVmTypes: expected an object of provider -> [types], "
            f"got {extra!r}"
        )
    base = _base_vm_types(config)
    return {p: base[p] | frozenset(_string_list(extra.get(p, []), f"extraVmTypes.{p}"))
            for p in PROVIDERS}


def _base_vm_types(config: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    configured = config.get("allowedVmTypes")
    if configured is not None:
        if not isinstance(configured, Mapping):
            raise PolicyConfigError(
                f"config {VM_TYPE_X86_64}.allowedVmTypes: expected an object of "
                f"provider -> [types], got {configured!r}"
            )
        return {
            p: frozenset(_string_list(configured.get(p, []), f"allowedVmTypes.{p}"))
            for p in PROVIDERS
        }
    entries = catalog_entries()
    path = _catalog_where()
    if entries is None:
        raise PolicyConfigError(
            f"{VM_TYPE_X86_64}: no VM types: set config '{VM_TYPE_X86_64}.allowedVmTypes' "
            f"or provide {path}"
        )
    result = {
        p: frozenset(e.vm_type for e in entries if e.provider == p and e.arch == "x86_64")
        for p in PROVIDERS
    }
    if not any(result.values()):
        raise PolicyConfigError(
            f'{path}: no x86_64 VM types found (expected entries with arch = "x86_64" '
            "under [aws], [gcp] or [azure]); or set config "
            f"'{VM_TYPE_X86_64}.allowedVmTypes'"
        )
    return result


def catalog_gpus(provider: str, vm_type: str) -> int | None:
    """GPUs per VM from the catalog, or None when unknown (no catalog or no entry)."""
    entries = catalog_entries() or []
    return next((e.gpus for e in entries if e.provider == provider and e.vm_type == vm_type), None)


# --- typed getters over a policy's config section -------------------------------------------


def int_setting(config: Mapping[str, Any], policy: str, key: str, default: int) -> int:
    value = config.get(key, default)
    # JSON numbers arrive as float through protobuf Struct; accept 3.0, refuse 3.5 and "3".
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise PolicyConfigError(f"config {policy}.{key}: expected an integer, got {value!r}")
    if value < 1:
        raise PolicyConfigError(f"config {policy}.{key}: must be >= 1, got {value!r}")
    return int(value)


def bool_setting(config: Mapping[str, Any], policy: str, key: str, default: bool) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise PolicyConfigError(f"config {policy}.{key}: expected true/false, got {value!r}")
    return value


def gpu_pools(config: Mapping[str, Any], policy: str) -> dict[str, int]:
    raw = config.get("gpuPools") or {}
    if not isinstance(raw, Mapping):
        raise PolicyConfigError(f"config {policy}.gpuPools: expected an object, got {raw!r}")
    pools: dict[str, int] = {}
    for pool in raw:
        pools[str(pool)] = int_setting(raw, f"{policy}.gpuPools", str(pool), 0)
    return pools
