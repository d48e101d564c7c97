"""tools/mypy: the scan of our SDK reads, the SDK's own reads, and the trimmed SDK stubs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.mypy import stubs, typecheck, usage


def scan(source: str) -> usage.SdkUsage:
    return usage.scan_source(textwrap.dedent(source), "mod.py")


def test_attribute_chains_are_read_as_full_paths() -> None:
    found = scan("""
        import pulumi_aws as aws
        import pulumi_kubernetes

        aws.ec2.Instance("x").id
        provider = aws.Provider("p")
        pulumi_kubernetes.core.v1.Secret("s")
    """)
    assert set(found.terminals) == {"pulumi_aws.ec2.Instance", "pulumi_aws.Provider",
                                    "pulumi_kubernetes.core.v1.Secret"}
    assert found.terminals["pulumi_aws.ec2.Instance"] == "mod.py:5"


def test_imports_aliases_and_quoted_annotations_count() -> None:
    found = scan("""
        import pulumi_gcp.compute as compute
        from pulumi_kubernetes.node.v1 import RuntimeClass
        import pulumi_aws.ec2

        def later() -> "aws.s3.Bucket":
            import pulumi_aws as aws  # imported below the annotation that reads it
            RuntimeClass("r")
            compute.Instance("i")
            return pulumi_aws.ec2.Vpc("v")
    """)
    assert set(found.paths) == {"pulumi_gcp.compute", "pulumi_kubernetes.node.v1.RuntimeClass",
                                "pulumi_aws.ec2", "pulumi_aws"}
    assert set(found.terminals) == {
        "pulumi_aws.s3.Bucket", "pulumi_kubernetes.node.v1.RuntimeClass",
        "pulumi_gcp.compute.Instance", "pulumi_aws.ec2.Vpc"}


@pytest.mark.parametrize(("source", "terminal"), [
    ("import pulumi_aws as aws\nhelpers = [aws]\n", "pulumi_aws"),
    ("import pulumi_aws as aws\ngetattr(aws.ec2, 'Vpc')\n", "pulumi_aws.ec2"),
    ("from pulumi_aws.ec2 import *\n", "pulumi_aws.ec2"),
])
def test_a_module_used_as_a_value_is_a_terminal(source: str, terminal: str) -> None:
    assert terminal in usage.scan_source(source, "components/x.py").terminals


SDK_INIT = '''\
import builtins as _builtins
from . import _utilities
import typing
from .provider import *
from . import outputs

if typing.TYPE_CHECKING:
    import fake_sdk.ec2 as __ec2
    ec2 = __ec2
    import fake_sdk.s3 as __s3
    s3 = __s3
else:
    ec2 = _utilities.lazy_import('fake_sdk.ec2')
    s3 = _utilities.lazy_import('fake_sdk.s3')

_utilities.register(resource_modules="[]")
'''

EC2_INIT = '''\
from .. import _utilities
from .instance import *
from .vpc import *
from ._inputs import *
from . import outputs
'''


def make_sdk(root: Path, files: dict[str, str] | None = None) -> stubs.InstalledSdk:
    package = root / "fake_sdk"
    for rel, text in {
        "__init__.py": SDK_INIT, "_utilities.py": "", "outputs.py": "",
        "provider.py": "__all__ = ['ProviderArgs', 'Provider']\n",
        "ec2/__init__.py": EC2_INIT, "ec2/outputs.py": "",
        "ec2/instance.py": "from . import outputs\n__all__ = ['InstanceArgs', 'Instance']\n",
        "ec2/vpc.py": "__all__ = ['Vpc']\n", "ec2/_inputs.py": "__all__ = [\n 'VpcArgs',\n]\n",
        "s3/__init__.py": "", **(files or {}),
    }.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(textwrap.dedent(text))
    return stubs.InstalledSdk(name="fake_sdk", root=package, version="1.0")


def test_trimmed_top_level_keeps_only_the_subpackages_read(tmp_path: Path) -> None:
    out = stubs.trimmed_init(make_sdk(tmp_path), "fake_sdk", {"ec2", "Provider"})
    assert "import fake_sdk.ec2 as __ec2" in out and "ec2 = __ec2" in out
    assert "s3" not in out  # neither its import, its alias nor its run-time lazy import
    assert "register(" not in out
    assert "from .provider import *" in out
    assert "outputs" not in out


def test_trimmed_package_keeps_the_star_imports_that_export_a_name_read(tmp_path: Path) -> None:
    sdk = make_sdk(tmp_path)
    out = stubs.trimmed_init(sdk, "fake_sdk.ec2", {"Instance", "outputs"})
    assert "from .instance import *" in out and "from . import outputs" in out
    assert "from .vpc import *" not in out and "from ._inputs import *" not in out
    assert "from .vpc import *" in stubs.trimmed_init(sdk, "fake_sdk.ec2", {"Vpc"})
    # a multi-line __all__
    assert "from ._inputs import *" in stubs.trimmed_init(sdk, "fake_sdk.ec2", {"VpcArgs"})


def test_names_the_sdk_imports_are_kept_only_when_not_the_module_itself(tmp_path: Path) -> None:
    sdk = make_sdk(tmp_path)
    # `from . import outputs` and `ec2 = __ec2` bind the module mypy falls back to anyway.
    out = stubs.trimmed_init(sdk, "fake_sdk", set(), frozenset({"outputs", "ec2", "Provider"}))
    assert "outputs" not in out and "ec2" not in out
    assert "from .provider import *" in out  # binds the class, not the module `provider`
    compile(out, "__init__.pyi", "exec")


def test_trimmed_init_refuses_an_unknown_shape(tmp_path: Path) -> None:
    sdk = make_sdk(tmp_path, {"__init__.py": "import typing\nif typing.TYPE_CHECKING:\n"
                                             "    from .ec2 import Instance\n"})
    with pytest.raises(ValueError, match=r"fake_sdk/__init__.py: unexpected statement .*"
                                         r"from \.ec2 import Instance"):
        stubs.trimmed_init(sdk, "fake_sdk", {"ec2"})


def test_sdk_reads_of_its_own_packages(tmp_path: Path) -> None:
    sdk = make_sdk(tmp_path, {"ec2/instance.py": '''\
        """Example:

            import fake_sdk as sdk
            from fake_sdk import Provider
        """
        from .. import _utilities
        from . import outputs
        from .. import (
            outputs,
            Provider,
        )
        from .. import s3 as _s3
    '''})
    reads = stubs.sdk_read_packages(sdk)
    assert reads.whole == {"fake_sdk.s3": reads.whole["fake_sdk.s3"]}
    assert reads.whole["fake_sdk.s3"].endswith("ec2/instance.py:12: from .. import s3 as _s3")
    assert set(reads.names["fake_sdk"]) == {"_utilities", "outputs", "Provider", "s3"}
    assert set(reads.names["fake_sdk.ec2"]) == {"outputs"}


@pytest.mark.parametrize(("line", "whole"), [
    ("import fake_sdk", "fake_sdk"),
    ("from .. import *", "fake_sdk"),
    ("from fake_sdk.ec2 import *", "fake_sdk.ec2"),
    ("from ... import ec2 as _ec2", None),  # above the SDK: not ours
    ("import typing\nif typing.TYPE_CHECKING:\n    from .. import ec2 as _ec2", "fake_sdk.ec2"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fake_sdk", "fake_sdk"),
    ('def f():\n    """\n    import fake_sdk\n    """', None),  # a docstring example
])
def test_sdk_reads_of_a_whole_package(tmp_path: Path, line: str, whole: str | None) -> None:
    reads = stubs.sdk_read_packages(make_sdk(tmp_path, {"s3/bucket.py": line + "\n"}))
    assert set(reads.whole) == ({whole} if whole else set())


def plan_for(tmp_path: Path, source: str, files: dict[str, str] | None = None,
             ) -> stubs.StubPlan:
    sdk = make_sdk(tmp_path / "site", files)
    found = usage.scan_source(textwrap.dedent(source).replace("pulumi_aws", "fake_sdk"), "m.py")
    return stubs.plan_sdk(sdk, found, stubs.sdk_read_packages(sdk))


def test_plan_stubs_every_package_on_the_way_to_a_name_read(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            ) -> None:
    monkeypatch.setattr(usage, "BIG_SDKS", ("fake_sdk",))
    plan = plan_for(tmp_path, "import pulumi_aws as aws\naws.ec2.Vpc('v')\n")
    assert set(plan.files) == {"fake_sdk", "fake_sdk.ec2"}
    assert "__s3" not in plan.files["fake_sdk"]
    assert "from .vpc import *" in plan.files["fake_sdk.ec2"]
    assert "from .instance import *" not in plan.files["fake_sdk.ec2"]
    assert plan.whole == {}


def test_plan_keeps_whole_what_the_sdk_or_our_code_reads_whole(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               ) -> None:
    monkeypatch.setattr(usage, "BIG_SDKS", ("fake_sdk",))
    plan = plan_for(tmp_path, "import pulumi_aws as aws\nx = aws.ec2\naws.s3.thing\n",
                    {"ec2/instance.py": "from .. import s3 as _s3\n"})
    assert set(plan.files) == {"fake_sdk"}  # the top level, trimmed to ec2 and s3
    assert "used as a value at m.py:2" in plan.whole["fake_sdk.ec2"]
    assert "read by the SDK itself" in plan.whole["fake_sdk.s3"]
    value = plan_for(tmp_path / "b", "import pulumi_aws as aws\nf(aws)\n")
    assert value.files == {} and "used as a value" in value.whole["fake_sdk"]


def test_stub_directory_is_keyed_by_its_content(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    make_sdk(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cache = tmp_path / "cache"

    def write(source: str) -> Path:
        found = usage.scan_source(source, "m.py")
        return stubs.write(stubs.plan(found, ("fake_sdk",), cache), cache)

    monkeypatch.setattr(usage, "BIG_SDKS", ("fake_sdk",))
    first = write("import fake_sdk as f\nf.ec2.Vpc\n")
    again = write("import fake_sdk as f\nf.ec2.Vpc\n")
    wider = write("import fake_sdk as f\nf.ec2.Vpc\nf.s3.Bucket\n")
    assert first == again != wider
    assert "__s3" not in (first / "fake_sdk" / "__init__.pyi").read_text()
    assert "__s3" in (wider / "fake_sdk" / "__init__.pyi").read_text()
    assert (first / "fake_sdk" / "ec2" / "__init__.pyi").is_file()
    assert len(list((cache / "sdk-reads").iterdir())) == 1  # read once, then remembered


def test_config_is_the_pyproject_settings_plus_the_stub_path() -> None:
    settings: dict[str, object] = {
        "packages": ["automation", "stacks"], "check_untyped_defs": True,
        "mypy_path": "typings",
        "overrides": [{"module": ["kopf.*", "yaml"], "ignore_missing_imports": True}],
    }
    ini = typecheck.mypy_ini(settings, Path("/stubs/k"), Path("/repo/.mypy_cache/trimmed"))
    assert ini.splitlines() == [
        "[mypy]", "packages = automation,stacks", "check_untyped_defs = True",
        "mypy_path = /stubs/k:typings", "cache_dir = /repo/.mypy_cache/trimmed", "",
        "[mypy-kopf.*,yaml]", "ignore_missing_imports = True",
    ]


@pytest.mark.slow
def test_installed_sdks_top_levels_are_read_only_for_their_modules() -> None:
    """What makes trimming worth it holds for the SDK versions installed: no SDK reads its
    top-level package whole, and the Kubernetes SDK reads core and meta whole."""
    reads = {name: stubs.sdk_read_packages(sdk) for name in usage.BIG_SDKS
             if (sdk := stubs.locate(name)) is not None}
    assert set(reads) == set(usage.BIG_SDKS), "the provider SDKs are dependencies"
    for name, read in reads.items():
        assert name not in read.whole, read.whole[name]
    assert {"pulumi_kubernetes.core", "pulumi_kubernetes.meta"} <= set(
        reads["pulumi_kubernetes"].whole)


PROBE = '''\
import pulumi_aws as aws
import pulumi_kubernetes as k8s

aws.ec2.Instance("probe", ami="ami-1", instance_type="t3.micro")
k8s.apps.v1.DaemonSet("d", spec=k8s.apps.v1.DaemonSetSpecArgs(
    selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"a": "b"}),
    template=k8s.core.v1.PodTemplateSpecArgs(spec=k8s.core.v1.PodSpecArgs(containers=[]))))
aws.ec2.Instance("probe", ami="ami-1", instance_typo="t3.micro")
k8s.apps.v1.DaemonSetSpecArgs(selector=k8s.meta.v1.LabelSelectorArgs(), template=3)
'''


@pytest.mark.slow
def test_trimmed_mypy_still_checks_our_calls_into_the_sdks(tmp_path: Path) -> None:
    """mypy through the trimmed stubs, cold, on calls into pulumi_aws.ec2 and, across
    Kubernetes subpackages, pulumi_kubernetes.apps.v1."""
    (tmp_path / "probe_pkg").mkdir()
    (tmp_path / "probe_pkg" / "__init__.py").write_text(PROBE)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mypy]\npackages = ["probe_pkg"]\nignore_missing_imports = true\n')
    # The SDK reads from the user's cache (keyed by SDK version and stubs.py's code); reading
    # them has its own test above.
    stubs.seed_sdk_reads(tmp_path / "stubs")
    config, plan = typecheck.prepare(tmp_path, cache_root=tmp_path / "stubs")
    assert {"pulumi_aws", "pulumi_aws.ec2", "pulumi_kubernetes.apps.v1"} <= set(plan.files)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-pretty"],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 1, result.stdout + result.stderr
    assert {line.split(":")[1] for line in errors} == {"8", "9"}, errors
    assert any('Unexpected keyword argument "instance_typo"' in line for line in errors), errors
    assert any('"template" to "DaemonSetSpecArgs" has incompatible type "int"' in line
               for line in errors), errors
