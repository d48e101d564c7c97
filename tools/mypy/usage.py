"""Which names of the big provider SDKs our code reads, as full dotted paths.

`import pulumi_aws as aws` followed by `aws.ec2.Instance(...)` reads `ec2` from the
`pulumi_aws` namespace and `Instance` from the `pulumi_aws.ec2` namespace. Those package
namespaces are what the trimmed stubs shrink, so every such read must be found here.

Two kinds of reads: a *path* (`pulumi_aws.ec2.Instance`: each package on the way is read for
the next name) and a *terminal* (the last name of an expression). A terminal that turns out
to be a package means the module object itself is used as a value (`helpers = [aws]`,
`getattr(aws.ec2, name)`), which could read any name in it: that package is then kept whole.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# The SDKs whose package __init__ files import hundreds of modules for the type checker.
BIG_SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_kubernetes")


@dataclass
class SdkUsage:
    paths: dict[str, str] = field(default_factory=dict)  # dotted path -> first file:line
    terminals: dict[str, str] = field(default_factory=dict)  # dotted path -> first file:line

    def add(self, other: SdkUsage) -> None:
        for path, where in other.paths.items():
            self.paths.setdefault(path, where)
        for path, where in other.terminals.items():
            self.terminals.setdefault(path, where)

    def in_sdk(self, sdk: str) -> SdkUsage:
        def mine(path: str) -> bool:
            return path == sdk or path.startswith(sdk + ".")

        return SdkUsage({p: w for p, w in self.paths.items() if mine(p)},
                        {p: w for p, w in self.terminals.items() if mine(p)})


def _is_sdk(dotted: str) -> bool:
    return dotted.split(".")[0] in BIG_SDKS


def _chain(node: ast.Attribute) -> tuple[ast.Name, list[str]] | None:
    """`a.b.c` -> (Name a, ["b", "c"]); None when the chain does not start at a name."""
    attrs: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        attrs.append(current.attr)
        current = current.value
    return (current, attrs[::-1]) if isinstance(current, ast.Name) else None


def scan_source(source: str, where: str) -> SdkUsage:
    tree = ast.parse(source, filename=where)
    found = SdkUsage()
    aliases: dict[str, str] = {}  # local name -> the SDK module path it is bound to

    def read(path: str, node: ast.AST, terminal: bool) -> None:
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        (found.terminals if terminal else found.paths).setdefault(path, at)

    # Aliases first: an import may sit below its first use (inside a function).
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_sdk(alias.name):
                    read(alias.name, node, terminal=False)
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if not _is_sdk(node.module):
                continue
            for alias in node.names:
                if alias.name == "*":
                    read(node.module, node, terminal=True)  # every name of the module
                else:
                    path = f"{node.module}.{alias.name}"
                    read(path, node, terminal=False)
                    aliases[alias.asname or alias.name] = path

    chain_names: set[int] = set()  # Name nodes that head a chain already recorded
    extended: set[int] = set()  # Attribute nodes that are the value of a longer chain
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            extended.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in extended:
            chain = _chain(node)
            if chain is not None and chain[0].id in aliases:
                head, attrs = chain
                read(".".join([aliases[head.id], *attrs]), node, terminal=True)
                chain_names.add(id(head))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # Quoted annotations ("aws.ec2.Instance") are strings to the AST.
            for local, path in aliases.items():
                for m in re.finditer(rf"(?<![\w.]){re.escape(local)}((?:\.\w+)+)", node.value):
                    read(path + m.group(1), node, terminal=True)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                and node.id in aliases and id(node) not in chain_names):
            read(aliases[node.id], node, terminal=True)  # the bound object used as a value
    return found


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
