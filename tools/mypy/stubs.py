"""Trimmed package stubs for the big provider SDKs, for a fast, still-checked mypy run.

`pulumi_aws/__init__.py` imports all ~250 subpackages under `typing.TYPE_CHECKING`, and
`pulumi_aws/ec2/__init__.py` star-imports its ~180 modules, so mypy analyses the whole SDK
(~1 GB of source) whenever our code imports `pulumi_aws`, for the dozen classes we use.
The stubs written here are those same package `__init__` files, keeping only the
statements that provide a name something reads; every module, `pulumi_aws.ec2.instance`
included, is still the installed SDK's own file, found behind the stubs in site-packages.
So each call we make into an SDK is checked against the SDK's real signatures, and a read
of a name a stub lacks is a loud "has no attribute" error, never a silent Any.

Who reads a package namespace: our code (tools/mypy/usage.py finds every read) and the SDK's
own modules (`from ... import core as _core`, then `_core.v1.PodSpecArgs`). The packages
the SDK itself reads (`sdk_read_packages`, computed over the whole installed SDK once per
version) are never trimmed, nor anything below them; if that is the top-level package,
the SDK is not trimmed at all.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tools.mypy.usage import BIG_SDKS, SdkUsage

STUB_FORMAT = 4  # bump when the generated files or the SDK read check change

_FROM_IMPORT = re.compile(r"^from\s+(\.*)([\w.]*)\s+import\s+(.+)$")
_IMPORT = re.compile(r"^import\s+(.+)$")
_TYPE_CHECKING_BLOCK = re.compile(r"^\s*if\s+(typing\.)?TYPE_CHECKING\s*:", re.MULTILINE)
_ALL = re.compile(r"^__all__\s*=\s*\[(.*?)\]", re.MULTILINE | re.DOTALL)


def default_cache_root() -> Path:
    env = os.environ.get("ANYCLOUD_MYPY_STUBS")
    return Path(env) if env else Path.home() / ".cache" / "anycloud" / "mypy-stubs"


@dataclass(frozen=True)
class InstalledSdk:
    name: str
    root: Path  # the package directory in site-packages
    version: str

    def path_of(self, dotted: str) -> Path:
        return self.root.joinpath(*dotted.split(".")[1:])

    def is_package(self, dotted: str) -> bool:
        return (self.path_of(dotted) / "__init__.py").is_file()

    def is_module(self, dotted: str) -> bool:
        path = self.path_of(dotted)
        return self.is_package(dotted) or path.with_name(path.name + ".py").is_file()

    def init_source(self, package: str) -> str:
        return (self.path_of(package) / "__init__.py").read_text(encoding="utf-8")


def locate(name: str) -> InstalledSdk | None:
    """The SDK as this interpreter would import it; None when it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    try:
        version = importlib.metadata.version(name.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return InstalledSdk(name=name, root=root, version=version)


def _import_lines(source: str, indented_absolute: bool) -> list[tuple[int, str]]:
    """Import statements at column 0, and relative imports at any indentation (under
    `if TYPE_CHECKING:`), with a parenthesised name list joined onto one line. Indented
    absolute imports only when asked: in generated SDK modules they are docstring examples
    (and function bodies, which mypy skips in installed packages)."""
    out: list[tuple[int, str]] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if line.startswith(("from ", "import ")) or stripped.startswith("from .") or (
                indented_absolute and stripped.startswith(("from ", "import "))):
            line = line.lstrip()
            start = i
            if "(" in line and ")" not in line:
                while i + 1 < len(lines) and ")" not in lines[i]:
                    i += 1
                    line += " " + lines[i].strip()
            out.append((start + 1, line.split("#")[0].replace("(", " ").replace(")", " ")))
        i += 1
    return out


@dataclass
class SdkReads:
    """How the SDK's own modules read its package namespaces: a name imported from a package
    (`from .. import _utilities`: the package's binding wins over a same-named module), or
    the whole package (bound to a name, `from ... import core as _core`, then read as
    `_core.v1.PodSpecArgs`; or `import *` from it). Values: the first file:line doing so."""

    names: dict[str, dict[str, str]] = field(default_factory=dict)
    whole: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"names": self.names, "whole": self.whole}, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SdkReads:
        doc = json.loads(text)
        return cls(names=doc["names"], whole=doc["whole"])


def sdk_read_packages(sdk: InstalledSdk) -> SdkReads:
    """SdkReads over every module of the installed SDK. A package's own
    `import <it>.<sub> as __sub` lines are what the stubs trim, not reads."""
    reads = SdkReads()
    for path in sorted(sdk.root.rglob("*.py")):
        rel = path.relative_to(sdk.root)
        package = ".".join([sdk.name, *rel.parts[:-1]])
        is_init = rel.name == "__init__.py"
        text = path.read_text(encoding="utf-8")
        # The substring first: the anchored regex alone costs seconds over the SDKs' ~9
        # million lines, and only a few dozen files have the block.
        typed_block = is_init or ("TYPE_CHECKING" in text
                                  and _TYPE_CHECKING_BLOCK.search(text) is not None)
        for lineno, line in _import_lines(text, indented_absolute=typed_block):
            where = f"{path}:{lineno}: {line.strip()}"
            if (m := _IMPORT.match(line)) is not None:
                for item in m.group(1).split(","):
                    target, _, asname = (p.strip() for p in item.partition(" as "))
                    if target.split(".")[0] != sdk.name:
                        continue
                    if not asname:
                        reads.whole.setdefault(sdk.name, where)  # binds the top-level package
                    elif not (is_init and target.rpartition(".")[0] == package) and \
                            sdk.is_package(target):
                        reads.whole.setdefault(target, where)
                continue
            if (m := _FROM_IMPORT.match(line)) is None:
                continue
            dots, module, names = m.groups()
            if dots:
                parts = package.split(".")
                base = parts[: len(parts) - (len(dots) - 1)]
                source = ".".join([*base, *([module] if module else [])])
            else:
                source = module
            if source.split(".")[0] != sdk.name or not sdk.is_package(source):
                continue
            for item in names.split(","):
                name = item.partition(" as ")[0].strip()
                if name == "*":
                    reads.whole.setdefault(source, where)
                elif name:
                    reads.names.setdefault(source, {}).setdefault(name, where)
                    if sdk.is_package(f"{source}.{name}"):
                        reads.whole.setdefault(f"{source}.{name}", where)
    return reads


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING") or (
        isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")


def _bound_subpackage(package: str, stmt: ast.stmt) -> str:
    """`import pulumi_aws.ec2 as __ec2` and `ec2 = __ec2` both bind `ec2`."""
    if isinstance(stmt, ast.Import) and len(stmt.names) == 1:
        parent, _, sub = stmt.names[0].name.rpartition(".")
        if parent == package:
            return sub
    if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Name)):
        return stmt.targets[0].id
    raise ValueError(f"{package}/__init__.py: unexpected statement under TYPE_CHECKING: "
                     f"{ast.unparse(stmt)!r}")


def module_all(path: Path) -> set[str] | None:
    """The `__all__` of a generated SDK module (what `from .m import *` brings in)."""
    if not path.is_file():
        return None
    m = _ALL.search(path.read_text(encoding="utf-8"))
    return set(re.findall(r"['\"](\w+)['\"]", m.group(1))) if m else None


def trimmed_init(sdk: InstalledSdk, package: str, keep: set[str],
                 imported: frozenset[str] = frozenset()) -> str:
    """The package's own __init__ without its run-time registration calls and lazy imports,
    keeping every statement that binds a name in `keep` (so each such name is bound exactly as
    in the real file), and every statement that binds a name in `imported` (names the SDK's
    modules import from the package) to something other than the module of that name
    (mypy falls back to that very module when the package does not bind it). Statements of
    a shape not listed here are kept as they are."""
    tree = ast.parse(sdk.init_source(package))
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Expr):
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            # `import pkg.sub as __sub; sub = __sub`: module-like, kept for `keep` only.
            kept = [s for s in node.body if _bound_subpackage(package, s) in keep]
            node.body = kept or [ast.Pass()]
            node.orelse = []
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and \
                [a.name for a in node.names] == ["*"]:
            names = module_all(sdk.path_of(f"{package}.{node.module}").with_suffix(".py"))
            if names is not None and not names & (keep | imported):
                continue
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and not node.module:
            # `from . import outputs`: binds modules, module-like, kept for `keep` only.
            node.names = [a for a in node.names if (a.asname or a.name) in keep]
            if not node.names:
                continue
        body.append(node)
    tree.body = body
    header = (f"# Generated by tools/mypy/stubs.py from {package}/__init__.py, keeping only "
              f"the names something reads. Do not edit.\n")
    return header + ast.unparse(tree) + "\n"


@dataclass(frozen=True)
class StubPlan:
    """Per SDK package: the stub text to write. Plus, per SDK, why parts stay whole."""

    files: dict[str, str]  # dotted package -> __init__.pyi text
    whole: dict[str, str]  # dotted package -> why it is not trimmed

    def key(self) -> str:
        doc = {"format": STUB_FORMAT, "files": self.files}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _sdk_reads_marker(sdk: InstalledSdk, cache_root: Path) -> Path:
    """Where ``sdk``'s reads are kept: per installed SDK version and per version of this
    module's code (a change to the read check is never answered from the cache)."""
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    seed = f"{STUB_FORMAT}\0{code}\0{sdk.root}\0{sdk.version}\0{sdk.init_source(sdk.name)}"
    digest = hashlib.sha256(seed.encode()).hexdigest()[:16]
    return cache_root / "sdk-reads" / f"{sdk.name}-{digest}.json"


def sdk_reads_cached(sdk: InstalledSdk, cache_root: Path) -> SdkReads:
    """`sdk_read_packages`, remembered (it reads the whole SDK: ~8 s for the four)."""
    marker = _sdk_reads_marker(sdk, cache_root)
    if marker.is_file():
        return SdkReads.from_json(marker.read_text())
    print(f"typecheck: reading {sdk.name} {sdk.version} once, for the packages it reads "
          f"itself", file=sys.stderr)
    reads = sdk_read_packages(sdk)
    marker.parent.mkdir(parents=True, exist_ok=True)
    # Written whole or not at all: another process may read it meanwhile.
    with tempfile.NamedTemporaryFile("w", dir=marker.parent, delete=False) as out:
        out.write(reads.to_json())
    os.replace(out.name, marker)
    return reads


def seed_sdk_reads(cache_root: Path) -> None:
    """``cache_root``'s SDK reads taken from the user's stub cache (read there first when
    missing): a stub build into a fresh cache then skips reading the whole SDKs."""
    user = default_cache_root()
    for name in BIG_SDKS:
        sdk = locate(name)
        if sdk is None:
            continue
        sdk_reads_cached(sdk, user)
        marker = _sdk_reads_marker(sdk, cache_root)
        marker.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_sdk_reads_marker(sdk, user), marker)


def _under(package: str, prefixes: dict[str, str]) -> str | None:
    for prefix, why in prefixes.items():
        if package == prefix or package.startswith(prefix + "."):
            return f"{prefix}: {why}"
    return None


def plan_sdk(sdk: InstalledSdk, found: SdkUsage, sdk_reads: SdkReads) -> StubPlan:
    """Which names of each package of one SDK something reads, and the stubs for them."""
    needed: dict[str, set[str]] = {}
    reasons = {p: f"read by the SDK itself ({w})" for p, w in sdk_reads.whole.items()}
    value_uses: dict[str, str] = {}
    for path, where in sorted({**found.paths, **found.terminals}.items()):
        parts = path.split(".")
        for depth in range(1, len(parts)):
            package = ".".join(parts[:depth])
            needed.setdefault(package, set()).add(parts[depth])
            if not sdk.is_package(f"{package}.{parts[depth]}"):
                break
        else:
            if path in found.terminals and sdk.is_package(path):
                value_uses.setdefault(path, f"used as a value at {where}")
    reasons |= value_uses
    files: dict[str, str] = {}
    whole: dict[str, str] = dict(value_uses)
    for package in sorted(needed, key=lambda p: p.count(".")):
        parent = package.rpartition(".")[0]
        if parent and parent not in files:  # mypy takes a stub only under stubbed parents
            continue
        if (why := _under(package, reasons)) is not None:
            whole[package] = why
            continue
        imported = frozenset(sdk_reads.names.get(package, {}))
        try:
            files[package] = trimmed_init(sdk, package, needed[package], imported)
        except ValueError as exc:
            whole[package] = str(exc)
    return StubPlan(files=files, whole=whole)


def plan(found: SdkUsage, sdk_names: tuple[str, ...], cache_root: Path) -> StubPlan:
    files: dict[str, str] = {}
    whole: dict[str, str] = {}
    for name in sdk_names:
        sdk = locate(name)
        if sdk is None:
            whole[name] = "not installed"
            continue
        one = plan_sdk(sdk, found.in_sdk(name), sdk_reads_cached(sdk, cache_root))
        files |= one.files
        whole |= one.whole
    return StubPlan(files=files, whole=whole)


def write(stub_plan: StubPlan, cache_root: Path) -> Path:
    """The stub directory for this plan, written once (atomically) and reused."""
    target = cache_root / stub_plan.key()
    if target.is_dir():
        return target
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=cache_root))
    for package, text in stub_plan.files.items():
        directory = staging.joinpath(*package.split("."))
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "__init__.pyi").write_text(text, encoding="utf-8")
    try:
        staging.rename(target)
    except OSError:  # another run wrote the same plan first
        shutil.rmtree(staging, ignore_errors=True)
        if not target.is_dir():
            raise
    return target
