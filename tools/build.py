#!/usr/bin/env python3
"""Build the Go programs the test suite runs, from the pinned modules under ``tools/``.

Each tool set is a Go module here (``go.mod`` + ``go.sum`` pin every version), built by one
``go build`` of all its programs. Its binaries go to a cache outside the clone, in a folder
named after a hash of everything that decides their bytes (the Go version, the module files,
the recipe below), so a second run, or another clone with the same pins, reuses them::

    ${ANYCLOUD_TOOLS_CACHE:-~/.cache/anycloud/tools}/<set>-<hash>/bin/<binary>
    ${ANYCLOUD_TOOLS_CACHE:-~/.cache/anycloud/tools}/<set>-<hash>/build.json

Usage: ``python3 tools/build.py [--only PROGRAM ...] [--json] [--locate]``. Standard library
only: ``.ci/run`` calls it before any virtualenv exists. Progress and the summary table go to
stderr; ``--json`` prints the manifest of every set on stdout.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

TOOLS_DIR = Path(__file__).resolve().parent
RECIPE_VERSION = "1"  # bump when the build steps below change the bytes they produce
# Sets built side by side. A Go build keeps both cores busy only part of the time
# (type-checking a big package, the link, are one thread), so two sets at once fill the
# gaps; more only adds memory (a kube-apiserver link takes ~2 GiB).
DEFAULT_JOBS = 2


@dataclass(frozen=True)
class ToolSet:
    name: str
    # Binary name -> Go package path, built from inside the set's module.
    binaries: dict[str, str]
    ldflags: tuple[str, ...] = ()
    # Binary name -> the upstream release it is (for humans and for tests).
    versions: dict[str, str] = field(default_factory=dict)
    # Pulumi plugins among the binaries: binary -> (kind, plugin name, version).
    plugins: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # A package of a dependency module to copy into the set's module before building,
    # because its main embeds files that a ``go run generate.go`` step writes.
    generated_main: tuple[str, str] | None = None  # (module path, package dir in module)
    generate_env: dict[str, str] = field(default_factory=dict)
    # Data files a binary needs at run time, copied from a dependency module into ``share/``
    # (binary, module path, file path in module).
    share: tuple[tuple[str, str, str], ...] = ()
    # The module's folder under tools/ when it is not the set's name (a part of a set).
    module: str = ""

    @property
    def module_dir(self) -> Path:
        return TOOLS_DIR / (self.module or self.name)

    def only(self, names: list[str]) -> ToolSet:
        """The same recipe for some of the binaries, in a cache folder of its own (what a
        container image needs, without building the rest)."""
        keep = [b for b in self.binaries if b in names]
        packages = {self.binaries[b] for b in keep}
        generated = self.generated_main
        if generated is not None and f"./{generated[1]}" not in packages:
            generated = None
        return replace(
            self, name=f"{self.name}-{'-'.join(keep)}", module=self.module or self.name,
            binaries={b: self.binaries[b] for b in keep},
            versions={b: v for b, v in self.versions.items() if b in keep},
            plugins={b: p for b, p in self.plugins.items() if b in keep},
            generated_main=generated,
            generate_env=self.generate_env if generated else {},
            share=tuple(s for s in self.share if s[0] in keep))


K8S = "v1.36.3"
K8S_VERSION_PKG = "k8s.io/component-base/version"
PULUMI = "v3.274.1"
# The only published build of the kubernetes provider: the commit PyPI's pulumi-kubernetes
# 4.25.0a1768448096 was released from (tools/pulumi-kubernetes/go.mod).
PULUMI_KUBERNETES = "4.25.0-alpha.1768448096"
HELM = "v4.2.4"
KWOK = "v0.8.0"

# Each set is one module and one `go build` of all its programs, so what they share compiles
# once: the control plane and the programs that drive it share one set of Kubernetes v0.36.3
# libraries. The kubernetes provider joins neither that set nor the CLI's: its code needs the
# Kubernetes v0.33 libraries and the Pulumi SDK v3.215 it was released with (it fails to
# compile against v0.36's structured-merge-diff v6 and against SDK v3.274's codegen schema).
# An -X flag sets its variable only in the binaries that link its package.
TOOL_SETS: tuple[ToolSet, ...] = (
    ToolSet(
        name="kubernetes",
        binaries={
            "etcd": "./cmd/etcd",
            **{name: f"k8s.io/kubernetes/cmd/{name}" for name in (
                "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")},
            "kwok": "sigs.k8s.io/kwok/cmd/kwok",
            "helm": "helm.sh/helm/v4/cmd/helm",
        },
        ldflags=(
            f"-X {K8S_VERSION_PKG}.gitVersion={K8S}",
            f"-X {K8S_VERSION_PKG}.gitMajor=1",
            f"-X {K8S_VERSION_PKG}.gitMinor=36",
            f"-X {K8S_VERSION_PKG}.gitTreeState=clean",
            f"-X k8s.io/client-go/pkg/version.gitVersion={K8S}",
            "-X k8s.io/client-go/pkg/version.gitMajor=1",
            "-X k8s.io/client-go/pkg/version.gitMinor=36",
            f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK.lstrip('v')}",
            f"-X helm.sh/helm/v4/internal/version.version={HELM}",
            "-X helm.sh/helm/v4/internal/version.gitTreeState=clean",
        ),
        versions={"etcd": "v3.6.16", "kube-apiserver": K8S, "kube-controller-manager": K8S,
                  "kube-scheduler": K8S, "kubectl": K8S, "kwok": KWOK, "helm": HELM},
        # kwok runs no stages of its own: these are its documented "fast" Node and Pod
        # lifecycles and the heartbeat that keeps Nodes Ready (with a Lease).
        share=tuple(("kwok", "sigs.k8s.io/kwok", f"kustomize/stage/{path}") for path in (
            "node/fast/node-initialize.yaml",
            "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
            "pod/fast/pod-ready.yaml",
            "pod/fast/pod-complete.yaml",
            "pod/fast/pod-delete.yaml",
        )),
    ),
    ToolSet(
        name="pulumi",
        binaries={"pulumi": "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"},
        ldflags=(f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={PULUMI}",),
        versions={"pulumi": PULUMI},
    ),
    ToolSet(
        name="pulumi-kubernetes",
        binaries={"pulumi-resource-kubernetes": "./cmd/pulumi-resource-kubernetes"},
        ldflags=(
            "-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version="
            + PULUMI_KUBERNETES,
        ),
        versions={"pulumi-resource-kubernetes": PULUMI_KUBERNETES},
        plugins={"pulumi-resource-kubernetes": ("resource", "kubernetes", PULUMI_KUBERNETES)},
        generated_main=("github.com/pulumi/pulumi-kubernetes/provider/v4",
                        "cmd/pulumi-resource-kubernetes"),
        generate_env={"VERSION": PULUMI_KUBERNETES},
    ),
)
BY_NAME = {t.name: t for t in TOOL_SETS}
# Cold build times in seconds (in the tree, two at a time, 2026-12-06), for the order only.
BUILD_WEIGHT = {"pulumi-kubernetes": 1158, "kubernetes": 910, "pulumi": 359}


class BuildError(RuntimeError):
    pass


def cache_root() -> Path:
    explicit = os.environ.get("ANYCLOUD_TOOLS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "anycloud" / "tools"


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("`go` is not on PATH: install Go 1.26 (https://go.dev/dl/) to build "
                         "the test tools, or point ANYCLOUD_TOOLS_BIN at prebuilt binaries")
    return subprocess.run([go, "version"], check=True, capture_output=True,
                          text=True).stdout.strip()


def fingerprint(tool_set: ToolSet, go: str) -> str:
    """A hash of everything that decides the binaries' bytes."""
    h = hashlib.sha256()
    # Empty fields are left out, so adding a field to ToolSet changes no existing hash.
    recipe = {k: v for k, v in vars(tool_set).items() if v}
    h.update(json.dumps([RECIPE_VERSION, go, recipe], sort_keys=True, default=str).encode())
    module = tool_set.module_dir
    for path in sorted(module.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(module)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def set_dir(tool_set: ToolSet, go: str) -> Path:
    return cache_root() / f"{tool_set.name}-{fingerprint(tool_set, go)}"


def manifest(tool_set: ToolSet, go: str) -> dict[str, object] | None:
    """The set's build.json when it is built (every binary present), else None."""
    path = set_dir(tool_set, go) / "build.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if all(Path(p).is_file() for p in data.get("binaries", {}).values()):
        return dict(data)
    return None


def _go(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(["go", *args], cwd=cwd, env={**os.environ, **(env or {})},
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"`go {' '.join(args)}` in {cwd} failed:\n{proc.stderr[-4000:]}")


def _module_dir(module: str, cwd: Path) -> Path:
    # `go mod download` fetches the module when the module cache lacks it (a fresh machine);
    # `go list -m` would answer without a Dir then.
    proc = subprocess.run(["go", "mod", "download", "-json", module], cwd=cwd,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"`go mod download {module}` failed:\n{proc.stderr[-2000:]}")
    found = json.loads(proc.stdout)
    if "Dir" not in found:
        raise BuildError(f"`go mod download {module}` gave no directory: {found.get('Error')}")
    return Path(found["Dir"])


def _prepare_source(tool_set: ToolSet, work: Path) -> Path:
    """The directory to build in: the set's module itself, or a writable copy of it with the
    dependency's main package beside it and its embedded files generated."""
    module = tool_set.module_dir
    if tool_set.generated_main is None:
        return module
    src = work / "src"
    shutil.copytree(module, src)
    dep_module, package = tool_set.generated_main
    upstream = _module_dir(dep_module, src) / package
    target = src / package
    shutil.copytree(upstream, target)
    for path in [target, *target.rglob("*")]:  # the module cache is read-only
        path.chmod(0o755 if path.is_dir() else 0o644)
    _go(["run", "generate.go"], cwd=target, env=tool_set.generate_env)
    return src


def _trace_flag(tool_set: ToolSet) -> list[str]:
    """``-debug-trace`` when ANYCLOUD_GO_TRACE_DIR names a folder: go writes the start and end
    of every compile and link there (Chrome trace JSON), to see where a cold build's time
    goes. It does not change the binaries' bytes."""
    folder = os.environ.get("ANYCLOUD_GO_TRACE_DIR")
    if not folder:
        return []
    Path(folder).mkdir(parents=True, exist_ok=True)
    return [f"-debug-trace={Path(folder) / tool_set.name}.json"]


def build(tool_set: ToolSet, go: str, *, force: bool = False) -> dict[str, object]:
    """Build one set into the cache (reusing it when present) and return its manifest."""
    existing = None if force else manifest(tool_set, go)
    if existing is not None:
        return {**existing, "reused": True}
    final = set_dir(tool_set, go)
    final.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f".{tool_set.name}-", dir=final.parent) as tmp:
        work = Path(tmp)
        src = _prepare_source(tool_set, work)
        bin_dir = work / "out" / "bin"
        bin_dir.mkdir(parents=True)
        ldflags = " ".join(("-s", "-w", *tool_set.ldflags))
        # One `go build` of every main package of the set: they share one action graph, so
        # common packages compile once and the links run side by side. With several packages
        # and ``-o DIR/`` go names each binary after its package's last element.
        packages = list(tool_set.binaries.values())
        out = str(bin_dir / next(iter(tool_set.binaries))) if len(packages) == 1 \
            else f"{bin_dir}{os.sep}"
        _go(["build", "-trimpath", f"-ldflags={ldflags}", *_trace_flag(tool_set), "-o", out,
             *packages], cwd=src)
        for binary in tool_set.binaries:
            if not (bin_dir / binary).is_file():
                raise BuildError(f"`go build` of {tool_set.name} made no {binary}")
        share = work / "out" / "share"
        for _, module, path in tool_set.share:
            share.mkdir(exist_ok=True)
            shutil.copyfile(_module_dir(module, src) / path, share / Path(path).name)
        seconds = round(time.monotonic() - started, 1)
        data: dict[str, object] = {
            "set": tool_set.name,
            "go": go,
            "versions": tool_set.versions,
            "binaries": {b: str(final / "bin" / b) for b in tool_set.binaries},
            "plugins": {
                b: {"kind": k, "name": n, "version": v, "path": str(final / "bin" / b)}
                for b, (k, n, v) in tool_set.plugins.items()
            },
            "share": sorted(str(final / "share" / Path(p).name) for _, _, p in tool_set.share),
            "buildSeconds": seconds,
            "sizeBytes": sum(p.stat().st_size for p in bin_dir.iterdir()),
        }
        (work / "out" / "build.json").write_text(json.dumps(data, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(work / "out", final)
    return {**data, "reused": False}


def _build_or_error(tool_set: ToolSet, go: str, force: bool) -> dict[str, object]:
    print(f"building {tool_set.name} …", file=sys.stderr, flush=True)
    try:
        row = build(tool_set, go, force=force)
    except BuildError as exc:
        # Keep going: one tool that cannot be built must not cost the others.
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return {"set": tool_set.name, "versions": tool_set.versions, "error": str(exc)}
    took = "cached" if row.get("reused") else f"{row['buildSeconds']} s"
    print(f"built {tool_set.name} ({took})", file=sys.stderr, flush=True)
    return row


def build_all(tool_sets: list[ToolSet], go: str, *, force: bool = False,
              jobs: int = DEFAULT_JOBS) -> list[dict[str, object]]:
    """Build these sets, ``jobs`` at a time, longest first; rows in the sets' order."""
    # The longest builds start first, so the short ones fill in beside them at the end.
    order = sorted(tool_sets, key=lambda t: -BUILD_WEIGHT.get(t.name, 0))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {t.name: pool.submit(_build_or_error, t, go, force) for t in order}
    return [futures[t.name].result() for t in tool_sets]


def link_current(manifests: list[dict[str, object]]) -> None:
    """Point ``<cache>/bin/<binary>`` at these builds: what anycloud itself looks up
    (``automation.devcluster.binaries``) when no exact pins are asked for."""
    links = cache_root() / "bin"
    links.mkdir(parents=True, exist_ok=True)
    for data in manifests:
        for binary, path in dict(data.get("binaries") or {}).items():  # type: ignore[call-overload]
            link = links / binary
            tmp = links / f".{binary}.tmp"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(path)
            os.replace(tmp, link)


def locate(names: list[str] | None = None) -> dict[str, dict[str, object]]:
    """Manifests of the sets already built for the current pins (no building)."""
    go = go_version()
    found = {}
    for tool_set in TOOL_SETS:
        if names and tool_set.name not in names:
            continue
        data = manifest(tool_set, go)
        if data is not None:
            found[tool_set.name] = data
    return found


def point_at_built_tools() -> None:
    """Put the sets built for the current pins first on the search path of
    ``automation.devcluster.binaries`` (``ANYCLOUD_TOOLS_BIN``), after a folder already given
    there: what the test suite and the benchmarks run."""
    try:
        built = locate()
    except BuildError:
        return
    folders = [str(Path(str(b)).parent) for m in built.values()
               for b in dict(m["binaries"]).values()]  # type: ignore[call-overload]
    given = os.environ.get("ANYCLOUD_TOOLS_BIN")
    os.environ["ANYCLOUD_TOOLS_BIN"] = os.pathsep.join(
        [*([given] if given else []), *dict.fromkeys(folders)])


def pick(names: list[str]) -> list[ToolSet]:
    """The sets to build: every one, or for ``--only``, the part of each that builds those."""
    if not names:
        return list(TOOL_SETS)
    known = [b for t in TOOL_SETS for b in t.binaries]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise BuildError(f"--only: no tool set builds {', '.join(unknown)}; the programs "
                         f"built here are {', '.join(known)}")
    return [t if set(t.binaries) <= set(names) else t.only(names)
            for t in TOOL_SETS if set(names) & set(t.binaries)]


def _summary(rows: list[dict[str, object]], total: float) -> str:
    lines = [f"{'tool set':<20}{'versions':<44}{'build':>10}{'size':>10}"]
    for r in rows:
        named = r.get("versions")
        versions = ", ".join(dict.fromkeys(named.values())) if isinstance(named, dict) else ""
        if r.get("error"):
            took = "not built" if r["error"] == "not built" else "FAILED"
        else:
            took = "cached" if r.get("reused") else f"{r['buildSeconds']} s"
        size = f"{int(r.get('sizeBytes') or 0) / 2**20:.0f} MiB"
        lines.append(f"{r['set']!s:<20}{versions:<44}{took:>10}{size:>10}")
    lines.append(f"total {total:.1f} s; cache {cache_root()}")
    return "\n".join(lines)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a whole number of at least 1")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="BINARY",
                        help="build only this program (repeatable), into a folder of its own")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    parser.add_argument("--locate", action="store_true",
                        help="build nothing; report the sets already built")
    parser.add_argument("--json", action="store_true", help="print the manifests on stdout")
    parser.add_argument("--jobs", type=_positive, default=DEFAULT_JOBS,
                        help=f"sets built at once (default {DEFAULT_JOBS})")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        go = go_version()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        chosen = pick(args.only or [])
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.locate:
        rows = [manifest(t, go) or {"set": t.name, "versions": t.versions, "error": "not built"}
                for t in chosen]
    else:
        rows = build_all(chosen, go, force=args.force, jobs=args.jobs)
    failed = any(r.get("error") for r in rows)
    if not args.locate:
        link_current([r for r in rows if not r.get("error")])
    print(_summary(rows, time.monotonic() - started), file=sys.stderr)
    if args.json:
        print(json.dumps({str(r["set"]): r for r in rows}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
