"""Which subpackages of the big provider SDKs our code reaches through their top-level module.

`import pulumi_aws as aws` followed by `aws.ec2.Instance(...)` reads `ec2` from the
`pulumi_aws` namespace. That namespace is what the trimmed stubs shrink, so every such read
must be found here. Anything this scanner cannot follow (the module object passed around,
`getattr`, a star import) makes the whole SDK "untrimmable": it is then checked in full.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# The SDKs whose top-level __init__ imports hundreds of subpackages under TYPE_CHECKING.
BIG_SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_kubernetes")


@dataclass
class SdkUsage:
    """Per SDK: the subpackage names read from its top-level module, or untrimmable."""

    subpackages: dict[str, set[str]] = field(default_factory=lambda: {s: set() for s in BIG_SDKS})
    untrimmable: dict[str, str] = field(default_factory=dict)  # sdk -> why, naming file:line

    def add(self, other: SdkUsage) -> None:
        for sdk, names in other.subpackages.items():
            self.subpackages[sdk] |= names
        for sdk, why in other.untrimmable.items():
            self.untrimmable.setdefault(sdk, why)


class _ModuleScanner:
    def __init__(self, where: str) -> None:
        self.where = where
        self.usage = SdkUsage()
        self.aliases: dict[str, str] = {}  # local name -> SDK whose top-level module it is
        self.chain_heads: set[int] = set()  # ids of Name nodes that start an a.b chain

    def _refuse(self, sdk: str, node: ast.AST, why: str) -> None:
        line = getattr(node, "lineno", 0)
        self.usage.untrimmable.setdefault(sdk, f"{self.where}:{line}: {why}")

    def add_import(self, node: ast.Import) -> None:
        for alias in node.names:
            top, _, rest = alias.name.partition(".")
            if top not in BIG_SDKS:
                continue
            if rest:
                # `import pulumi_aws.ec2 [as x]` loads the subpackage itself; without `as`
                # the name bound is the top-level module, read as `pulumi_aws.ec2...` later.
                self.usage.subpackages[top].add(rest.split(".")[0])
                if alias.asname is None:
                    self.aliases[top] = top
            else:
                self.aliases[alias.asname or top] = top

    def add_import_from(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        top, _, rest = node.module.partition(".")
        if top not in BIG_SDKS:
            return
        if rest:
            self.usage.subpackages[top].add(rest.split(".")[0])
            return
        for alias in node.names:
            if alias.name == "*":
                self._refuse(top, node, f"`from {top} import *` reads the whole namespace")
            else:
                # A subpackage or a top-level name (Provider, ...): keep it either way.
                self.usage.subpackages[top].add(alias.name)

    def add_string(self, node: ast.Constant) -> None:
        # Quoted annotations ("aws.ec2.Instance") are strings to the AST.
        if isinstance(node.value, str):
            for local, sdk in self.aliases.items():
                for match in re.finditer(rf"\b{re.escape(local)}\.(\w+)", node.value):
                    self.usage.subpackages[sdk].add(match.group(1))

    def check_bare_uses(self, tree: ast.Module) -> None:
        """A bare use of an SDK alias (not `alias.x`) may read any attribute at run time."""
        for node in ast.walk(tree):
            if (isinstance(node, ast.Name) and node.id in self.aliases
                    and id(node) not in self.chain_heads and isinstance(node.ctx, ast.Load)):
                self._refuse(self.aliases[node.id], node,
                             f"`{node.id}` used as a value, not as `{node.id}.<name>`")


def scan_source(source: str, where: str) -> SdkUsage:
    tree = ast.parse(source, filename=where)
    scanner = _ModuleScanner(where)
    # Two passes: aliases first (imports may sit below their first use in a function).
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            scanner.add_import(node)
        elif isinstance(node, ast.ImportFrom):
            scanner.add_import_from(node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in scanner.aliases:
                scanner.usage.subpackages[scanner.aliases[node.value.id]].add(node.attr)
                scanner.chain_heads.add(id(node.value))
        elif isinstance(node, ast.Constant):
            scanner.add_string(node)
    scanner.check_bare_uses(tree)
    return scanner.usage


def python_files(roots: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        files.extend([root] if root.is_file() else sorted(root.rglob("*.py")))
    return files


def scan_files(files: Iterable[Path]) -> SdkUsage:
    usage = SdkUsage()
    for path in files:
        usage.add(scan_source(path.read_text(encoding="utf-8"), str(path)))
    return usage
