"""tools/mypy: the scan of our SDK usage, the trimmed SDK stubs, and their safety check."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.mypy import stubs, typecheck, usage


def scan(source: str) -> usage.SdkUsage:
    return usage.scan_source(textwrap.dedent(source), "mod.py")


def test_attribute_chains_name_the_subpackages_read() -> None:
    found = scan("""
        import pulumi_aws as aws
        import pulumi_kubernetes

        aws.ec2.Instance("x")
        provider = aws.Provider("p")
        pulumi_kubernetes.core.v1.Secret("s")
    """)
    assert found.subpackages["pulumi_aws"] == {"ec2", "Provider"}
    assert found.subpackages["pulumi_kubernetes"] == {"core"}
    assert found.untrimmable == {}


def test_imports_and_quoted_annotations_count() -> None:
    found = scan("""
        import pulumi_gcp.compute as compute
        from pulumi_kubernetes import apps
        from pulumi_kubernetes.node.v1 import RuntimeClass
        import pulumi_aws.ec2

        def later() -> "aws.s3.Bucket":
            import pulumi_aws as aws  # imported after the annotation that reads it
            return pulumi_aws.ec2.Vpc("v")
    """)
    assert found.subpackages["pulumi_gcp"] == {"compute"}
    assert found.subpackages["pulumi_kubernetes"] == {"apps", "node"}
    assert found.subpackages["pulumi_aws"] == {"ec2", "s3"}


@pytest.mark.parametrize(("source", "where", "rule"), [
    ("import pulumi_aws as aws\nhelpers = [aws]\n", ":2:", "`aws` used as a value"),
    ("import pulumi_aws as aws\ngetattr(aws, 'ec2')\n", ":2:", "`aws` used as a value"),
    ("from pulumi_aws import *\n", ":1:", "`from pulumi_aws import *`"),
])
def test_uses_the_scan_cannot_follow_keep_the_whole_sdk(source: str, where: str,
                                                        rule: str) -> None:
    found = usage.scan_source(source, "components/x.py")
    assert set(found.untrimmable) == {"pulumi_aws"}
    assert found.untrimmable["pulumi_aws"].startswith(f"components/x.py{where} ")
    assert rule in found.untrimmable["pulumi_aws"]


SDK_INIT = textwrap.dedent('''\
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
''')


def test_trimmed_init_keeps_only_the_subpackages_read() -> None:
    out = stubs.trimmed_init("fake_sdk", SDK_INIT, {"ec2", "Provider"})
    assert "import fake_sdk.ec2 as __ec2" in out and "ec2 = __ec2" in out
    assert "s3" not in out  # neither the import, the alias nor the run-time lazy import
    assert "register(" not in out
    assert "from .provider import *" in out and "from . import outputs" in out


def test_trimmed_init_with_nothing_read_is_still_valid() -> None:
    out = stubs.trimmed_init("fake_sdk", SDK_INIT, set())
    compile(out, "__init__.pyi", "exec")
    assert "__ec2" not in out and "__s3" not in out


def test_trimmed_init_refuses_an_unknown_shape() -> None:
    source = "import typing\nif typing.TYPE_CHECKING:\n    from .ec2 import Instance\n"
    with pytest.raises(ValueError, match=r"fake_sdk/__init__.py: unexpected statement .*"
                                         r"from \.ec2 import Instance"):
        stubs.trimmed_init("fake_sdk", source, {"ec2"})


def make_sdk(root: Path, files: dict[str, str]) -> stubs.InstalledSdk:
    package = root / "fake_sdk"
    for rel, text in {"__init__.py": SDK_INIT, "_utilities.py": "", "provider.py": "",
                      "outputs.py": "", "ec2/__init__.py": "", "s3/__init__.py": "",
                      **files}.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(textwrap.dedent(text))
    return stubs.InstalledSdk(name="fake_sdk", root=package, version="1.0")


def test_an_sdk_importing_only_submodules_from_its_top_level_passes(tmp_path: Path) -> None:
    sdk = make_sdk(tmp_path, {"ec2/instance.py": '''\
        """Example:

            import fake_sdk as sdk
            from fake_sdk import Provider
        """
        from .. import _utilities
        from .. import s3 as _s3
        from . import outputs
        from .. import (
            _utilities,
            outputs,
        )
    '''})
    assert stubs.namespace_readers(sdk) == []


@pytest.mark.parametrize("line", [
    "from .. import Provider",
    "from fake_sdk import Provider",
    "import fake_sdk",
    "from .. import *",
    "from .. import (\n    _utilities,\n    Provider,\n)",
    "import typing\nif typing.TYPE_CHECKING:\n    from .. import Provider",
])
def test_an_sdk_reading_names_from_its_top_level_is_reported(tmp_path: Path, line: str) -> None:
    sdk = make_sdk(tmp_path, {"ec2/instance.py": line + "\n"})
    problems = stubs.namespace_readers(sdk)
    assert len(problems) == 1
    assert "fake_sdk/ec2/instance.py:" in problems[0]


def test_an_sdk_that_fails_the_check_is_not_trimmed(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    make_sdk(tmp_path / "site", {"ec2/instance.py": "from .. import Provider\n"})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    plan = stubs.plan({"fake_sdk": {"ec2"}}, {}, tmp_path / "cache")
    assert plan.sdks == {}
    assert "reads its own top-level namespace" in plan.untrimmed["fake_sdk"]
    assert "from .. import Provider" in plan.untrimmed["fake_sdk"]


def test_stub_directory_is_keyed_by_what_is_kept(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    make_sdk(tmp_path / "site", {})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    first = stubs.write(stubs.plan({"fake_sdk": {"ec2"}}, {}, tmp_path / "c"), tmp_path / "c")
    again = stubs.write(stubs.plan({"fake_sdk": {"ec2"}}, {}, tmp_path / "c"), tmp_path / "c")
    wider = stubs.write(stubs.plan({"fake_sdk": {"ec2", "s3"}}, {}, tmp_path / "c"),
                        tmp_path / "c")
    assert first == again != wider
    assert "__s3" not in (first / "fake_sdk" / "__init__.pyi").read_text()
    assert "__s3" in (wider / "fake_sdk" / "__init__.pyi").read_text()


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
def test_installed_sdks_read_only_submodules_from_their_top_level() -> None:
    """The premise of the trimmed stubs, over the SDK versions actually installed."""
    for name in usage.BIG_SDKS:
        sdk = stubs.locate(name)
        assert sdk is not None, f"{name} is a dependency and must be installed"
        assert stubs.namespace_readers(sdk) == []


PROBE = '''\
import pulumi_aws as aws

aws.ec2.Instance("probe", ami="ami-1", instance_type="t3.micro")
aws.ec2.Instance("probe", ami="ami-1", instance_typo="t3.micro")
'''


@pytest.mark.slow
def test_trimmed_mypy_still_reports_a_wrong_keyword_to_an_sdk_class(tmp_path: Path) -> None:
    """mypy through the trimmed stubs, cold, on a package calling into pulumi_aws.ec2."""
    (tmp_path / "probe_pkg").mkdir()
    (tmp_path / "probe_pkg" / "__init__.py").write_text(PROBE)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mypy]\npackages = ["probe_pkg"]\nignore_missing_imports = true\n')
    config, plan = typecheck.prepare(tmp_path, cache_root=tmp_path / "stubs")
    assert sorted(plan.sdks["pulumi_aws"][1]) == ["ec2"]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-pretty"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 1, result.stdout + result.stderr
    assert all(line.startswith("probe_pkg/__init__.py:4:") for line in errors), errors
    assert any('Unexpected keyword argument "instance_typo"' in line for line in errors), errors
