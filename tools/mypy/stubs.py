"""Trimmed top-level stubs for the big provider SDKs, for a fast, still-checked mypy run.

`pulumi_aws/__init__.py` imports all ~250 subpackages under `typing.TYPE_CHECKING`, so
mypy analyses the whole SDK (~1 GB of source) whenever our code imports `pulumi_aws`, even
for the one subpackage (ec2) we use. The stub written here is that same `__init__`, minus
the subpackages our code never reads; every other module, `pulumi_aws.ec2` included, is
still the installed SDK's own file, found behind the stub in site-packages. So each call
we make into an SDK is checked against the SDK's real signatures, and a read of a
subpackage the stub lacks is a loud "Module has no attribute" error, never a silent Any.

That holds only if no SDK module itself reads a subpackage through the top-level namespace
(`from .. import SomeClass`, `import pulumi_aws`). `namespace_readers` checks exactly that
over the installed SDK, once per version; an SDK that fails it is not trimmed.
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
import tempfile
from dataclasses import dataclass
from pathlib import Path

STUB_FORMAT = 1  # bump when the generated files or the premise check change

_FROM_IMPORT = re.compile(r"^from\s+(\.*)([\w.]*)\s+import\s+(.+)$")
_IMPORT = re.compile(r"^import\s+(.+)$")


def default_cache_root() -> Path:
    env = os.environ.get("ANYCLOUD_MYPY_STUBS")
    return Path(env) if env else Path.home() / ".cache" / "anycloud" / "mypy-stubs"


@dataclass(frozen=True)
class InstalledSdk:
    name: str
    root: Path  # the package directory in site-packages
    version: str

    @property
    def init_source(self) -> str:
        return (self.root / "__init__.py").read_text(encoding="utf-8")


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


def _is_submodule(package_dir: Path, name: str) -> bool:
    return (package_dir / f"{name}.py").is_file() or (package_dir / name / "__init__.py").is_file()


def _import_lines(source: str) -> list[tuple[int, str]]:
    """Import statements at column 0, and relative imports at any indentation (under
    `if TYPE_CHECKING:`), with a parenthesised name list joined onto one line. Indented
    absolute imports are left out: in generated SDK code they are docstring examples."""
    out: list[tuple[int, str]] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("from ", "import ")) or line.lstrip().startswith("from ."):
            line = line.lstrip()
            start = i
            if "(" in line and ")" not in line:
                while i + 1 < len(lines) and ")" not in lines[i]:
                    i += 1
                    line += " " + lines[i].strip()
            out.append((start + 1, line.split("#")[0].replace("(", " ").replace(")", " ")))
        i += 1
    return out


def namespace_readers(sdk: InstalledSdk) -> list[str]:
    """Statements in the SDK (outside its top-level __init__) that read anything other than a
    submodule from the top-level package namespace — the reads a trimmed stub would break."""
    problems: list[str] = []
    for path in sorted(sdk.root.rglob("*.py")):
        rel = path.relative_to(sdk.root)
        if rel == Path("__init__.py"):
            continue
        package_parts = [sdk.name, *rel.parts[:-1]]
        for lineno, line in _import_lines(path.read_text(encoding="utf-8")):
            where = f"{path}:{lineno}: {line.strip()}"
            if (m := _IMPORT.match(line)) is not None:
                for item in m.group(1).split(","):
                    target = item.split(" as ")[0].strip()
                    if target == sdk.name or (target.startswith(sdk.name + ".")
                                              and " as " not in item):
                        problems.append(where)
                continue
            if (m := _FROM_IMPORT.match(line)) is None:
                continue
            dots, module, names = m.groups()
            if dots:
                base = package_parts[: len(package_parts) - (len(dots) - 1)]
                resolved = ".".join([*base, *([module] if module else [])])
            else:
                resolved = module
            if resolved != sdk.name:
                continue
            for item in names.split(","):
                imported = item.split(" as ")[0].strip()
                if imported and (imported == "*" or not _is_submodule(sdk.root, imported)):
                    problems.append(where)
    return problems


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING") or (
        isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")


def _bound_subpackage(sdk_name: str, stmt: ast.stmt) -> str:
    """`import pulumi_aws.ec2 as __ec2` and `ec2 = __ec2` both bind `ec2`."""
    if isinstance(stmt, ast.Import) and len(stmt.names) == 1:
        parts = stmt.names[0].name.split(".")
        if len(parts) == 2 and parts[0] == sdk_name:
            return parts[1]
    if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Name)):
        return stmt.targets[0].id
    raise ValueError(f"{sdk_name}/__init__.py: unexpected statement under TYPE_CHECKING: "
                     f"{ast.unparse(stmt)!r}")


def trimmed_init(sdk_name: str, source: str, keep: set[str]) -> str:
    """The SDK's own __init__ with only the TYPE_CHECKING subpackages in `keep` (and without
    its run-time registration calls, which mean nothing to a type checker)."""
    tree = ast.parse(source)
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Expr):
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            kept = [s for s in node.body if _bound_subpackage(sdk_name, s) in keep]
            node.body = kept or [ast.Pass()]
            node.orelse = []
        body.append(node)
    tree.body = body
    header = (f"# Generated by tools/mypy/stubs.py from {sdk_name}/__init__.py: only the "
              f"subpackages our code reads. Do not edit.\n")
    return header + ast.unparse(tree) + "\n"


@dataclass(frozen=True)
class StubPlan:
    """What to write: per trimmed SDK its kept names; per untrimmed SDK the reason."""

    sdks: dict[str, tuple[InstalledSdk, frozenset[str]]]
    untrimmed: dict[str, str]

    def key(self) -> str:
        doc = {
            "format": STUB_FORMAT,
            "sdks": {n: [s.version, str(s.root), hashlib.sha256(s.init_source.encode()).hexdigest(),
                         sorted(keep)] for n, (s, keep) in sorted(self.sdks.items())},
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _premise_holds(sdk: InstalledSdk, cache_root: Path) -> list[str]:
    """`namespace_readers`, remembered per installed SDK version (it reads the whole SDK)."""
    seed = f"{STUB_FORMAT}\0{sdk.root}\0{sdk.version}\0{sdk.init_source}"
    digest = hashlib.sha256(seed.encode()).hexdigest()
    marker = cache_root / "premise" / f"{sdk.name}-{digest[:16]}.json"
    if marker.is_file():
        result: list[str] = json.loads(marker.read_text())
        return result
    problems = namespace_readers(sdk)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(problems))
    return problems


def plan(subpackages: dict[str, set[str]], untrimmable: dict[str, str],
         cache_root: Path) -> StubPlan:
    sdks: dict[str, tuple[InstalledSdk, frozenset[str]]] = {}
    untrimmed: dict[str, str] = {}
    for name, keep in sorted(subpackages.items()):
        sdk = locate(name)
        if sdk is None:
            untrimmed[name] = "not installed"
        elif name in untrimmable:
            untrimmed[name] = untrimmable[name]
        elif problems := _premise_holds(sdk, cache_root):
            untrimmed[name] = f"the SDK reads its own top-level namespace: {problems[0]}"
        else:
            sdks[name] = (sdk, frozenset(keep))
    return StubPlan(sdks=sdks, untrimmed=untrimmed)


def write(stub_plan: StubPlan, cache_root: Path) -> Path:
    """The stub directory for this plan, written once (atomically) and reused."""
    target = cache_root / stub_plan.key()
    if target.is_dir():
        return target
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=cache_root))
    for name, (sdk, keep) in stub_plan.sdks.items():
        (staging / name).mkdir()
        (staging / name / "__init__.pyi").write_text(
            trimmed_init(name, sdk.init_source, set(keep)), encoding="utf-8")
    try:
        staging.rename(target)
    except OSError:  # another run wrote the same plan first
        shutil.rmtree(staging, ignore_errors=True)
        if not target.is_dir():
            raise
    return target
