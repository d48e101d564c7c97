"""The offline AgentPool validator and ``anycloud agent-pool validate``: the rules of the CRD,
each case's verdict and named field, and hypothesis over the autoscaler's integers.

test_crd_api_server.py gives the same cases to the real API server."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from automation.agentpools.model import (
    INT32_MAX,
    AgentPool,
    AutoscalerSpec,
    label_key_ok,
    problems,
    validate_manifest,
)
from automation.cli import cli
from automation.errors import InvalidInput
from tests.automation.agentpools.cases import CASES, EXAMPLES, POOL_EXAMPLES, Case, example

FIELDS = ("minReplicas", "maxReplicas", "minIdle", "maxIdle", "idleDecaySecond",
          "killUnknownAfterSecond", "defaultSlotsPerAgent")
DEFAULTS = {"minReplicas": 0, "idleDecaySecond": 60, "killUnknownAfterSecond": 300,
            "defaultSlotsPerAgent": 1}
REQUIRED = ("maxReplicas", "minIdle", "maxIdle")


# -- the seed's examples ---------------------------------------------------------------------


@pytest.mark.parametrize("name", POOL_EXAMPLES)
def test_examples_are_valid(name: str) -> None:
    pool = validate_manifest(example(name))
    assert isinstance(pool, AgentPool)
    assert pool.namespace == "default"
    assert pool.name == example(name)["metadata"]["name"]


def test_defaults_fill_what_the_shell_pool_leaves_out() -> None:
    auto = validate_manifest(example("shell-pool.yaml")).spec.autoscaler
    assert auto.model_dump() == {
        "minReplicas": 0, "maxReplicas": 4, "minIdle": 1, "maxIdle": 2, "idleDecaySecond": 60,
        "killUnknownAfterSecond": 300, "defaultSlotsPerAgent": 1}


def test_gpu_example_selects_anycloud_accelerator_label_not_gkes() -> None:
    spec = validate_manifest(example("gpu-pool.yaml")).spec.template.spec.model_dump()
    assert spec["nodeSelector"] == {"anycloud.sh/accelerator": "nvidia"}
    assert "cloud.google.com/gke-accelerator" not in json.dumps(spec)


@pytest.mark.parametrize("name", POOL_EXAMPLES)
def test_examples_need_no_config_map_and_no_privilege(name: str) -> None:
    # The operator gives the agents the broker (env, or its ConfigMap); PodSecurity
    # "restricted" admits them (test_seed_manifests.py applies them to an API server).
    spec = example(name)["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert "volumes" not in spec and "volumeMounts" not in container
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}}
    pool = example(name)["metadata"]["name"]
    assert container["args"] == [f"--pool={pool}"]


def test_agent_config_map_carries_the_broker_address() -> None:
    config = example("agent-config.yaml")
    assert config["kind"] == "ConfigMap" and config["metadata"]["name"] == "anycloud-agent-config"
    assert yaml.safe_load(config["data"]["anycloud.yaml"])["broker"]["address"]


def test_template_is_kept_whole() -> None:
    """The operator builds pods from the template: every PodSpec field survives the model."""
    doc = example("gpu-pool.yaml")
    spec = validate_manifest(doc).spec
    assert spec.template.spec.model_dump() == doc["spec"]["template"]["spec"]
    assert spec.template.metadata.labels == doc["spec"]["template"]["metadata"]["labels"]


# -- every shared case -------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_verdict(case: Case) -> None:
    doc = case.doc("shell")
    if case.field is None:
        assert problems(doc) == []
        validate_manifest(doc)
    else:
        with pytest.raises(InvalidInput) as raised:
            validate_manifest(doc)
        assert raised.value.field == case.field, raised.value.message
        assert raised.value.rule


def test_refusal_names_field_value_and_rule() -> None:
    doc = Case("x", lambda d: d["spec"]["autoscaler"].update(minIdle=3, maxIdle=1), "").doc("s")
    with pytest.raises(InvalidInput) as raised:
        validate_manifest(doc)
    err = raised.value
    assert (err.field, err.value) == ("spec.autoscaler.maxIdle", 1)
    assert err.rule == "maxIdle must be greater than or equal to minIdle (3)"
    assert err.exit_code == 2


def test_status_and_nulls_are_pruned_like_the_api_server() -> None:
    doc = example("shell-pool.yaml")
    doc["status"] = {"replicas": "x"}
    doc["spec"]["autoscaler"]["idleDecaySecond"] = None
    doc["spec"]["template"]["metadata"]["labels"]["extra"] = None
    pool = validate_manifest(doc)
    assert pool.spec.autoscaler.idle_decay_second == 60
    assert "extra" not in pool.spec.template.metadata.labels


@pytest.mark.parametrize("doc,field", [
    ({"apiVersion": "anycloud.sh/v2", "kind": "AgentPool"}, "apiVersion"),
    ({"apiVersion": "anycloud.sh/v1", "kind": "AgentPol"}, "kind"),
    ({"apiVersion": "anycloud.sh/v1", "kind": "AgentPool", "spec": {}}, "metadata.name"),
])
def test_wrong_api_version_kind_or_no_name(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        validate_manifest(doc)
    assert raised.value.field == field


def test_unknown_metadata_field_refused_known_ones_kept() -> None:
    doc = example("shell-pool.yaml")
    doc["metadata"]["labels"] = {"team": "ml"}
    validate_manifest(doc)
    doc["metadata"]["lables"] = {"team": "ml"}
    with pytest.raises(InvalidInput) as raised:
        validate_manifest(doc)
    assert raised.value.field == "metadata.lables"


def test_snake_case_keys_are_unknown_in_a_manifest() -> None:
    """Python code builds the model by field name; a manifest must use the CRD's names."""
    assert AutoscalerSpec(max_replicas=2, min_idle=0, max_idle=1).max_replicas == 2
    doc = example("shell-pool.yaml")
    doc["spec"]["autoscaler"]["max_replicas"] = 2
    with pytest.raises(InvalidInput) as raised:
        validate_manifest(doc)
    assert raised.value.field == "spec.autoscaler.max_replicas"


@pytest.mark.parametrize("key,ok", [
    ("app", True), ("anycloud.sh/agent-pool", True), ("a" * 63, True), ("a" * 64, False),
    ("A.b/x", False), ("", False), ("/x", False), ("a/b/c", False), ("x/", False),
    ("-a", False), ("a_b.c-d", True), ("a" * 253 + "/x", True), ("a" * 254 + "/x", False),
])
def test_label_keys(key: str, ok: bool) -> None:
    assert label_key_ok(key) is ok


# -- hypothesis: the offline verdict equals the rule ------------------------------------------

# Mostly small counts, where the CEL rules' edges are; wide ones; the int32 edges; None for
# a field left out.
counts = st.one_of(st.integers(-2, 8), st.integers(-(2**40), 2**40),
                   st.sampled_from([0, 1, INT32_MAX, INT32_MAX + 1, -1]), st.none())
autoscalers = st.fixed_dictionaries(
    {f: counts for f in REQUIRED},
    optional={f: counts for f in FIELDS if f not in REQUIRED},
).map(lambda d: {k: v for k, v in d.items() if v is not None})


def _rule_verdict(auto: dict[str, int]) -> set[str]:
    """The fields the CRD's rules refuse, computed from the rules as written."""
    bad = {f for f in REQUIRED if f not in auto}
    lowest = {f: 1 if f == "defaultSlotsPerAgent" else 0 for f in FIELDS}
    bad |= {f for f, v in auto.items() if not lowest[f] <= v <= 2**31 - 1}
    if bad:
        return bad
    full = {**DEFAULTS, **auto}
    if full["maxReplicas"] < full["minReplicas"]:
        bad.add("maxReplicas")
    if full["maxIdle"] < full["minIdle"]:
        bad.add("maxIdle")
    return bad


@settings(max_examples=400, deadline=None)
@given(autoscalers)
def test_autoscaler_verdict_is_the_rule(auto: dict[str, int]) -> None:
    doc = example("shell-pool.yaml")
    doc["spec"]["autoscaler"] = dict(auto)
    bad = _rule_verdict(auto)
    found = problems(doc)
    assert bool(found) == bool(bad)
    if bad:
        assert found[0].field in {f"spec.autoscaler.{f}" for f in bad}
        assert {p.field for p in found} <= {f"spec.autoscaler.{f}" for f in bad}
    else:
        assert validate_manifest(doc).spec.autoscaler.model_dump() == {**DEFAULTS, **auto}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIELDS),
       st.one_of(st.integers(-2, 5), st.floats(allow_nan=True, allow_infinity=True),
                 st.booleans(), st.text(max_size=3), st.none(),
                 st.lists(st.integers(), max_size=1)))
def test_only_integers_are_counts(field: str, value: Any) -> None:
    """An integral float is an integer (kubectl sends 3.0 as 3); a null is absent (pruned);
    a bool, string, list or fraction is refused."""
    doc = example("shell-pool.yaml")
    doc["spec"]["autoscaler"] = {"maxReplicas": 5, "minIdle": 0, "maxIdle": 5, field: value}
    integral = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer())
    if value is None:
        accepted = field not in REQUIRED
    elif not integral:
        accepted = False
    else:
        accepted = not _rule_verdict({"maxReplicas": 5, "minIdle": 0, "maxIdle": 5,
                                      field: int(value)})
    assert (problems(doc) == []) == accepted


# -- the CLI ------------------------------------------------------------------------------------


def _validate(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["agent-pool", "validate", *args], input=stdin)


def test_cli_examples_valid_config_map_skipped() -> None:
    files = [str(EXAMPLES / n) for n in ("agent-config.yaml", *POOL_EXAMPLES)]
    result = _validate(*[a for f in files for a in ("-f", f)], "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["valid"] is True
    assert [(d["kind"], d["verdict"]) for d in out["documents"]] == [
        ("ConfigMap", "skipped"), ("AgentPool", "valid"), ("AgentPool", "valid"),
        ("AgentPool", "valid")]
    shell = out["documents"][3]
    assert shell["name"] == "shell"
    assert shell["autoscaler"]["killUnknownAfterSecond"] == 300  # camelCase, defaults filled


def test_cli_stream_from_stdin_names_the_invalid_document() -> None:
    good = example("cpu-pool.yaml")
    bad = example("shell-pool.yaml")
    bad["spec"]["autoscaler"]["maxIdle"] = 0
    stream = "---\n".join(yaml.safe_dump(d) for d in (good, bad)) + "---\n"
    result = _validate("-f", "-", "--json", stdin=stream)
    assert result.exit_code == 2
    out = json.loads(result.stdout)
    assert out["valid"] is False
    assert [d["verdict"] for d in out["documents"]] == ["valid", "invalid"]
    problem = out["documents"][1]["problems"][0]
    assert out["documents"][1]["index"] == 2
    assert (problem["field"], problem["value"]) == ("spec.autoscaler.maxIdle", 0)
    assert "minIdle" in problem["rule"]

    human = _validate("-f", "-", stdin=stream)
    assert human.exit_code == 2
    assert "stdin document 2 (shell): spec.autoscaler.maxIdle 0:" in human.stderr
    assert "invalid" in human.stdout


def test_cli_refuses_unreadable_and_non_yaml_input(tmp_path: Any) -> None:
    result = _validate("-f", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2 and "readable file" in result.stderr
    result = _validate("-f", "-", "--json", stdin="a: [1\n")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["field"] == "-f"
