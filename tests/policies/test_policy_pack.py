"""The pack as a whole: enforcement levels, the offline path, the engine's gRPC path,
the advisory guardrails, and the shape of __main__.py (which is never imported: it blocks)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from policies import PolicyConfigError, Violation, check_resources
from policies import config as cfg
from policies.offline import split_config
from policies.rules import build_policies

AWS = "aws:ec2/instance:Instance"
PACK_DIR = Path(__file__).resolve().parents[2] / "policies"


def bad_aws_vm(s: SimpleNamespace) -> dict[str, Any]:
    return s.aws_vm() | {"keyName": "ops"}


# --- pack shape --------------------------------------------------------------------------------


def test_every_policy_is_built_once_with_its_default_level() -> None:
    policies = build_policies()
    assert [p.name for p in policies] == list(cfg.DEFAULT_LEVELS)
    for policy in policies:
        assert policy.enforcement_level == EnforcementLevel(cfg.DEFAULT_LEVELS[policy.name])
    stack = {p.name for p in policies if isinstance(p, StackValidationPolicy)}
    assert stack == {cfg.VM_COUNT_GUARDRAIL, cfg.GPU_COUNT_GUARDRAIL}
    assert all(isinstance(p, ResourceValidationPolicy) for p in policies if p.name not in stack)


def test_main_only_constructs_the_pack() -> None:
    tree = ast.parse((PACK_DIR / "__main__.py").read_text())
    calls = [
        n.value.func for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
    ]
    # Besides making the package importable and leaving with the engine, the file only
    # builds the pack.
    assert [ast.unparse(f) for f in calls] == ["sys.path.insert", "exit_with_the_engine",
                                               "PolicyPack"]
    assert not [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert "runtime:" in (PACK_DIR / "PulumiPolicy.yaml").read_text()


def test_policies_import_nothing_else_of_ours() -> None:
    ours = {"automation", "stacks", "components"}
    for path in PACK_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not {n.split(".")[0] for n in names} & ours, (path.name, names)


# --- enforcement levels ------------------------------------------------------------------------


def test_default_level_is_mandatory(s: SimpleNamespace) -> None:
    found = s.check(cfg.NO_SSH_KEY, AWS, bad_aws_vm(s))
    assert [v.enforcement_level for v in found] == ["mandatory"]


@pytest.mark.parametrize(
    ("config", "level"),
    [
        ({cfg.NO_SSH_KEY: "advisory"}, "advisory"),
        ({cfg.NO_SSH_KEY: {"enforcementLevel": "advisory"}}, "advisory"),
        ({"all": "advisory"}, "advisory"),
        ({"all": "advisory", cfg.NO_SSH_KEY: "mandatory"}, "mandatory"),
        ({cfg.NO_SSH_KEY: "remediate"}, "mandatory"),  # reported as mandatory, like the engine
        ({cfg.NO_SSH_KEY: "disabled"}, None),
        ({"all": "disabled"}, None),
    ],
)
def test_levels_from_config(s: SimpleNamespace, config: dict[str, Any], level: str | None) -> None:
    found = s.check(cfg.NO_SSH_KEY, AWS, bad_aws_vm(s), config)
    assert [v.enforcement_level for v in found] == ([level] if level else [])


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"no-such-policy": "advisory"}, "'no-such-policy': no such policy"),
        ({cfg.NO_SSH_KEY: "loud"}, "level 'loud'"),
        ({cfg.NO_SSH_KEY: {"enforcementLevel": 3}}, "no-ssh-key.enforcementLevel"),
        ({cfg.BOOTSTRAP_TOKEN: {"maxTokenTtlMinutes": "soon"}}, "maxTokenTtlMinutes"),
    ],
)
def test_bad_config_names_the_key(s: SimpleNamespace, config: dict[str, Any], match: str) -> None:
    secret = {"type": "bootstrap.kubernetes.io/token", "stringData": {"expiration": "x"}}
    with pytest.raises(PolicyConfigError, match=match):
        check_resources(
            [s.resource(AWS, s.aws_vm()), s.resource("kubernetes:core/v1:Secret", secret)], config
        )


def test_split_config_keeps_properties_per_policy() -> None:
    levels, props = split_config(
        {cfg.BOOTSTRAP_TOKEN: {"enforcementLevel": "advisory", "maxTokenTtlMinutes": 5}}
    )
    assert levels[cfg.BOOTSTRAP_TOKEN] == "advisory"
    assert props[cfg.BOOTSTRAP_TOKEN] == {"maxTokenTtlMinutes": 5}


# --- offline path ------------------------------------------------------------------------------


def test_offline_violation_shape(s: SimpleNamespace) -> None:
    res = s.resource(AWS, bad_aws_vm(s), name="vm-a1")
    found = check_resources([res])
    assert found == [
        Violation(
            policy=cfg.NO_SSH_KEY,
            enforcement_level="mandatory",
            urn=res["urn"],
            message=f"{AWS} keyName='ops': pool VMs carry no SSH key pair",
        )
    ]


def test_offline_runs_the_policy_objects_it_is_given(s: SimpleNamespace) -> None:
    seen: list[str] = []
    probe = ResourceValidationPolicy("probe", "probe", lambda args, report: seen.append(args.urn))
    check_resources([s.resource(AWS, s.aws_vm())], policies=[probe])
    assert seen == [s.resource(AWS, s.aws_vm())["urn"]]


def test_offline_rejects_malformed_resources() -> None:
    with pytest.raises(ValueError, match=r"resources\[0\]"):
        check_resources([{"type": AWS, "inputs": {}}])


# --- engine path: the SDK's own gRPC servicer, fed protobuf requests -----------------------------


def _servicer(config: dict[str, Any] | None = None) -> _PolicyAnalyzerServicer:
    servicer = _PolicyAnalyzerServicer(
        "anycloud-node-pool", "0.1.0", build_policies(), EnforcementLevel.MANDATORY
    )
    request = proto.ConfigureAnalyzerRequest()
    for name, section in (config or {}).items():
        request.policyConfig[name].properties.update(section)
        # The CLI sends each configured policy's level (its default unless overridden).
        default = cfg.DEFAULT_LEVELS[name]
        request.policyConfig[name].enforcementLevel = (
            proto.MANDATORY if default == cfg.MANDATORY else proto.ADVISORY
        )
    servicer.Configure(request, None)
    return servicer


def _analyze(servicer: _PolicyAnalyzerServicer, rtype: str, props: dict[str, Any]) -> list[Any]:
    struct = struct_pb2.Struct()
    json_format.ParseDict(props, struct)
    request = proto.AnalyzeRequest(
        type=rtype, properties=struct, urn=f"urn:x::{rtype}::r", name="r"
    )
    return list(servicer.Analyze(request, None).diagnostics)


def test_engine_path_compliant_vm_has_no_diagnostic(s: SimpleNamespace) -> None:
    assert _analyze(_servicer(), AWS, s.aws_vm()) == []


def test_engine_path_sees_secret_user_data_in_plain(s: SimpleNamespace) -> None:
    vm = s.aws_vm()
    # How the engine sends a secret input: wrapped in the secret signature.
    vm["userData"] = {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": s.user_data("aws")}
    assert _analyze(_servicer(), AWS, vm) == []
    vm["userData"]["value"] = "curl -sfL https://get.k3s.io | sh -"
    names = {d.policyName for d in _analyze(_servicer(), AWS, vm)}
    assert names == {cfg.K3S_CHECKSUM_PINNED, cfg.POOL_LABELS_AND_TAINT}


def test_engine_path_unknown_user_data_is_advisory_at_preview(s: SimpleNamespace) -> None:
    vm = s.aws_vm() | {"userData": UNKNOWN_STRING_VALUE, "keyName": "ops"}
    diags = _analyze(_servicer(), AWS, vm)
    by_policy = {d.policyName: d for d in diags}
    assert by_policy[cfg.NO_SSH_KEY].enforcementLevel == proto.MANDATORY
    assert by_policy[cfg.K3S_CHECKSUM_PINNED].enforcementLevel == proto.ADVISORY
    assert "during preview" in by_policy[cfg.K3S_CHECKSUM_PINNED].message


def test_engine_path_reads_policy_config(s: SimpleNamespace) -> None:
    servicer = _servicer({cfg.VM_TYPE_X86_64: {"allowedVmTypes": {"aws": ["c7i.large"]}}})
    diags = _analyze(servicer, AWS, s.aws_vm())
    assert [d.policyName for d in diags] == [cfg.VM_TYPE_X86_64]


def test_engine_path_checks_token_secret_outputs(s: SimpleNamespace) -> None:
    secret = {
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": "abcdef", "expiration": "2099-01-01T00:00:00Z"},
    }
    struct = struct_pb2.Struct()
    json_format.ParseDict(secret, struct)
    opts = proto.AnalyzerResourceOptions(additionalSecretOutputs=["data", "stringData"])
    request = proto.AnalyzeRequest(
        type="kubernetes:core/v1:Secret",
        properties=struct,
        urn="urn:x::s::tok",
        name="tok",
        options=opts,
    )
    messages = [d.message for d in _servicer().Analyze(request, None).diagnostics]
    assert len(messages) == 1 and "is later than now + 60 min" in messages[0]


# --- advisory guardrails -----------------------------------------------------------------------


def _vms(
    s: SimpleNamespace, count: int, pool: str = "pool-1", vm_type: str = "m5.large"
) -> list[Any]:
    out = []
    for i in range(count):
        vm = s.aws_vm()
        vm["instanceType"] = vm_type
        vm["tags"].update({"anycloud.sh/node-pool": pool, "anycloud.sh/attempt": f"a{i}"})
        vm["userData"] = s.user_data("aws", pool=pool, attempt=f"a{i}")
        out.append(s.resource(AWS, vm, name=f"{pool}-{i}"))
    return out


def test_vm_count_guardrail_is_advisory(s: SimpleNamespace) -> None:
    config = {cfg.VM_COUNT_GUARDRAIL: {"maxVmsPerPool": 2}}
    assert check_resources(_vms(s, 2), config) == []
    found = check_resources(_vms(s, 3) + _vms(s, 1, pool="pool-2"), config)
    assert [(v.policy, v.enforcement_level, v.urn) for v in found] == [
        (cfg.VM_COUNT_GUARDRAIL, "advisory", None)
    ]
    assert "pool 'pool-1' has 3 VMs, above maxVmsPerPool=2" in found[0].message


def test_gpu_count_guardrail_from_config_and_catalog(s: SimpleNamespace) -> None:
    vms = _vms(s, 3, pool="gpu", vm_type="g5.2xlarge")  # catalog: 1 GPU each
    limit = {cfg.GPU_COUNT_GUARDRAIL: {"maxGpusPerPool": 2}}
    found = check_resources(vms, limit)
    assert [v.policy for v in found] == [cfg.GPU_COUNT_GUARDRAIL]
    assert "has 3 GPUs over 3 VMs" in found[0].message
    per_node = {cfg.GPU_COUNT_GUARDRAIL: {"maxGpusPerPool": 8, "gpuPools": {"gpu": 4}}}
    assert "has 12 GPUs" in check_resources(vms, per_node)[0].message
    assert check_resources(vms, {cfg.GPU_COUNT_GUARDRAIL: {"maxGpusPerPool": 3}}) == []


def test_offline_accepts_the_mock_engine_record_shape(s: SimpleNamespace) -> None:
    # automation.engine.mock.program.RegisteredResource.to_dict() spells the secret lists this way.
    token = {
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": "abcdef", "expiration": "2026-11-30T21:30:00Z"},
    }
    record = s.resource("kubernetes:core/v1:Secret", token) | {
        "secretInputs": [],
        "options": {"additionalSecretOutputs": ["data", "stringData"]},
    }
    assert check_resources([record], clock=lambda: s.NOW) == []
    record["options"] = {}
    assert [v.policy for v in check_resources([record], clock=lambda: s.NOW)] == [
        cfg.BOOTSTRAP_TOKEN
    ]


# --- the real pack process, over gRPC --------------------------------------------------------


def test_pack_process_serves_the_policies_over_grpc(s: SimpleNamespace) -> None:
    """Start __main__.py the way the engine does (by path), then talk to it as the engine would."""
    import subprocess
    import sys

    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2_grpc

    process = subprocess.Popen(
        [sys.executable, str(PACK_DIR / "__main__.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=PACK_DIR,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().decode().strip() or "0")
        assert port > 0, process.stderr.read().decode() if process.stderr else ""
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            assert info.name == "anycloud-node-pool"
            assert [p.name for p in info.policies] == list(cfg.DEFAULT_LEVELS)
            schema = next(p for p in info.policies if p.name == cfg.BOOTSTRAP_TOKEN).configSchema
            assert "maxTokenTtlMinutes" in schema.properties
            struct = struct_pb2.Struct()
            json_format.ParseDict(bad_aws_vm(s), struct)
            request = proto.AnalyzeRequest(type=AWS, properties=struct, urn="urn:x::vm", name="vm")
            diags = stub.Analyze(request, timeout=30).diagnostics
            assert [(d.policyName, d.enforcementLevel) for d in diags] == [
                (cfg.NO_SSH_KEY, proto.MANDATORY)
            ]
    finally:
        process.kill()
        process.wait(timeout=10)


def test_data_files_default_to_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cfg.DATA_DIR_ENV)
    assert cfg.data_dir() == PACK_DIR.parent / "data"


def test_engine_path_stack_guardrail(s: SimpleNamespace) -> None:
    servicer = _servicer({cfg.VM_COUNT_GUARDRAIL: {"maxVmsPerPool": 1}})
    resources = []
    for record in _vms(s, 2):
        struct = struct_pb2.Struct()
        json_format.ParseDict(record["inputs"], struct)
        resources.append(
            proto.AnalyzerResource(
                type=record["type"], properties=struct, urn=record["urn"], name=record["name"]
            )
        )
    response = servicer.AnalyzeStack(proto.AnalyzeStackRequest(resources=resources), None)
    diags = [(d.policyName, d.enforcementLevel, d.urn) for d in response.diagnostics]
    assert diags == [(cfg.VM_COUNT_GUARDRAIL, proto.ADVISORY, "")]
