"""The provisioner set: every configuration error of issue 12 is refused at load with the
field, the value and the rule; the seed's example (minus its comments) loads."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from automation.errors import InvalidInput
from automation.provisioners.provisioner_set import (
    DEFAULT_ENV,
    SET_ENV,
    KubernetesEntry,
    NodePoolEntry,
    StaticEntry,
    load,
    load_from_env,
    parse_json,
)

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = ROOT / "k8s" / "runtime-templates"
PATHS = {k: f"templates/{k}.yaml"
         for k in ("http_ingress", "grpc_ingress", "service", "deployment", "pvc")}

# The seed's example set, in our names (SEED_TEXT below: as written, comments and all).
SEED_SET: dict[str, Any] = {
    "static-example": {"type": "static", "spec": {"runtimes": [
        {"host": "http://localhost:8081", "slots": 50, "data_dir": "/mnt/data",
         "audience_url": "http://localhost:8081"}]}},
    "kubernetes-example": {"type": "kubernetes", "spec": {
        "timeout_seconds": 30, "data_dir": "/mnt/data", "host": "http://node-*.localhost",
        "namespace": "cloud-runtime", "image": "example/runtime", "kubeconfig_path":
        "kubeconfig.yaml", "template_paths": PATHS}},
}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    shutil.copytree(TEMPLATES, tmp_path / "templates")
    return tmp_path


def refused(raw: Any, base: Path, default: str | None = "static-example") -> InvalidInput:
    with pytest.raises(InvalidInput) as err:
        load(raw, default, base)
    return err.value


def with_change(path: str, value: Any) -> dict[str, Any]:
    """SEED_SET with one value set (``value`` None deletes it); path like
    ``kubernetes-example.spec.host`` or ``static-example.spec.runtimes.0.slots``."""
    raw = copy.deepcopy(SEED_SET)
    *head, last = path.split(".")
    node: Any = raw
    for step in head:
        node = node[int(step)] if step.isdigit() else node[step]
    if value is None:
        del node[int(last) if last.isdigit() else last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return raw


def test_the_seeds_example_loads_with_several_types(base: Path) -> None:
    loaded = load(SEED_SET, "kubernetes-example", base)
    assert isinstance(loaded.get("static-example"), StaticEntry)
    k8s = loaded.get("kubernetes-example")
    assert isinstance(k8s, KubernetesEntry) and k8s.spec.namespace == "cloud-runtime"
    assert loaded.default == "kubernetes-example"


def test_two_of_one_type_and_a_nodepool_provisioner(base: Path) -> None:
    raw = copy.deepcopy(SEED_SET)
    second = copy.deepcopy(raw["kubernetes-example"])
    second["spec"]["host"] = "http://eu-*.example.com"
    raw["k8s-eu"] = second
    raw["gpu-pool"] = {"type": "nodepool", "spec": {
        "node_pool": "gpu-a10", "timeout_seconds": 60, "data_dir": "/data",
        "host": "http://gpu-*.example.com", "image": "example/runtime",
        "template_paths": {"deployment": PATHS["deployment"], "service": PATHS["service"]}}}
    loaded = load(raw, "gpu-pool", base)
    assert isinstance(loaded.get("gpu-pool"), NodePoolEntry)
    assert sorted(loaded.provisioners) == ["gpu-pool", "k8s-eu", "kubernetes-example",
                                           "static-example"]


@pytest.mark.parametrize("path,value,field,rule", [
    ("static-example.type", "ec2", "static-example.type", "must be one of static, kubernetes"),
    ("static-example.spec.runtimes.0.slots", 0, "static-example.spec.runtimes[0].slots",
     "greater than or equal to 1"),
    ("static-example.spec.runtimes.0.host", None, "static-example.spec.runtimes[0].host",
     "is required"),
    ("static-example.spec.runtimes", [], "static-example.spec.runtimes", "at least 1"),
    ("static-example.spec.extra", 1, "static-example.spec.extra",
     "is not a field of a static provisioner"),
    ("kubernetes-example.spec.host", "http://node.localhost", "kubernetes-example.spec.host",
     "exactly one '*'"),
    ("kubernetes-example.spec.namespace", "Cloud_Runtime",
     "kubernetes-example.spec.namespace", "DNS-1123"),
    ("kubernetes-example.spec.timeout_seconds", 0,
     "kubernetes-example.spec.timeout_seconds", "greater than or equal to 1"),
    ("kubernetes-example.spec.template_paths.deployment", None,
     "kubernetes-example.spec.template_paths.deployment", "is required"),
    ("kubernetes-example.spec.kubeconfig_path", None,
     "kubernetes-example.spec.kubeconfig_path", "is required"),
])
def test_a_bad_field_names_the_field_value_and_rule(
    base: Path, path: str, value: Any, field: str, rule: str
) -> None:
    err = refused(with_change(path, value), base)
    assert err.field == f"{SET_ENV}.{field}" and rule in (err.rule or ""), err.message


def test_missing_or_unknown_default(base: Path) -> None:
    assert refused(SEED_SET, base, default=None).field == DEFAULT_ENV
    err = refused(SEED_SET, base, default="nope")
    assert err.field == DEFAULT_ENV and err.value == "nope"
    assert "kubernetes-example, static-example" in (err.rule or "")


def test_duplicate_hosts_are_refused_naming_both(base: Path) -> None:
    raw = with_change("static-example.spec.runtimes", [
        {"host": "http://a:1", "slots": 1, "data_dir": "/d", "audience_url": "http://a:1"},
        {"host": "http://A:1/", "slots": 2, "data_dir": "/d", "audience_url": "http://a:1"}])
    err = refused(raw, base)
    assert err.field == f"{SET_ENV}.static-example.spec.runtimes[1].host"
    assert "static-example.spec.runtimes[0].host has it too" in (err.rule or "")
    twin = copy.deepcopy(SEED_SET)
    twin["k8s-2"] = copy.deepcopy(SEED_SET["kubernetes-example"])
    assert refused(twin, base).field == f"{SET_ENV}.k8s-2.spec.host"


def test_a_template_that_is_missing_a_directory_broken_or_the_wrong_kind(base: Path) -> None:
    field = f"{SET_ENV}.kubernetes-example.spec.template_paths"
    (base / "templates" / "pvc.yaml").unlink()
    err = refused(SEED_SET, base)
    assert err.field == f"{field}.pvc" and "no such file" in (err.rule or "")
    (base / "templates" / "pvc.yaml").mkdir()
    assert "not a directory" in (refused(SEED_SET, base).rule or "")
    (base / "templates" / "pvc.yaml").rmdir()
    (base / "templates" / "pvc.yaml").write_text("kind: PersistentVolumeClaim\n{% if %}\n")
    assert "line 2" in (refused(SEED_SET, base).rule or "")
    (base / "templates" / "pvc.yaml").write_text(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: {{ volume_name }}}\n")
    assert "volume_name" in (refused(SEED_SET, base).rule or "")
    (base / "templates" / "pvc.yaml").write_text("apiVersion: v1\nkind: Service\n")
    assert "must render a PersistentVolumeClaim" in (refused(SEED_SET, base).rule or "")
    (base / "templates" / "pvc.yaml").write_text("a: [1\n")
    assert "must render YAML" in (refused(SEED_SET, base).rule or "")


def test_bad_json_gives_line_and_column_where_it_was_written() -> None:
    with pytest.raises(InvalidInput) as err:
        parse_json('{\n  "a": 1, /* two\n lines */\n  "b": 2 // slots\n  "c": 3\n}')
    assert err.value.field == SET_ENV
    assert "line 5 column 3" in (err.value.rule or "")  # the missing comma, as written
    with pytest.raises(InvalidInput, match="line 1 column 1"):
        parse_json("")


# Rill's documented example, pasted as it is (its // comments included).
SEED_TEXT = """{
  "static-example":
    {
      "type": "static",
      "spec":
        {
          "runtimes":
            [
              {
                "host": "http://localhost:8081",          // Runtime host
                "slots": 50,                              // Amount of slots
                "data_dir": "/mnt/data",                  // Directory for DB files etc.
                "audience_url": "http://localhost:8081"   // Audience URL (JWT)
              }
            ]
        }
    },
  "kubernetes-example":
    {
      "type": "kubernetes",
      "spec":
        {
          "timeout_seconds": 30,                  // Maximum time to wait for the runtime
          "data_dir": "/mnt/data",
          "host": "http://node-*.localhost",      // '*' becomes the provision id
          "namespace": "cloud-runtime",
          "image": "example/runtime",
          "kubeconfig_path": "kubeconfig.yaml",   /* K8s config file */
          "template_paths":
            {
              "http_ingress": "templates/http_ingress.yaml",
              "grpc_ingress": "templates/grpc_ingress.yaml",
              "service": "templates/service.yaml",  // "a // in a comment"
              "deployment": "templates/deployment.yaml",
              "pvc": "templates/pvc.yaml"
            }
        }
    }
}"""


def test_the_seeds_example_as_written_loads_with_its_comments(base: Path) -> None:
    assert parse_json(SEED_TEXT) == SEED_SET
    assert parse_json('{"url": "http://x//y", "c": "/* not a comment */"}') == {
        "url": "http://x//y", "c": "/* not a comment */"}


def test_rills_variable_names_stand_in_for_unset_ones(base: Path) -> None:
    said: list[str] = []
    env = {"RILL_ADMIN_PROVISIONER_SET_JSON": SEED_TEXT,
           "RILL_ADMIN_DEFAULT_PROVISIONER": "kubernetes-example"}
    loaded = load_from_env(env, base, notice=said.append)
    assert loaded is not None and loaded.default == "kubernetes-example"
    assert said == [f"anycloud: reading RILL_ADMIN_PROVISIONER_SET_JSON as {SET_ENV} (unset)",
                    f"anycloud: reading RILL_ADMIN_DEFAULT_PROVISIONER as {DEFAULT_ENV} "
                    "(unset)"]
    # Ours win when both are set, and say nothing.
    said.clear()
    ours = load_from_env({**env, SET_ENV: json.dumps(SEED_SET), DEFAULT_ENV: "static-example"},
                         base, notice=said.append)
    assert ours is not None and ours.default == "static-example" and said == []
    # A refusal names the variable the user set.
    with pytest.raises(InvalidInput) as err:
        load_from_env({"RILL_ADMIN_PROVISIONER_SET_JSON": "{", DEFAULT_ENV: "x"}, base,
                      notice=said.append)
    assert err.value.field == "RILL_ADMIN_PROVISIONER_SET_JSON"


def test_not_an_object_and_bad_names(base: Path) -> None:
    assert "JSON object" in (refused([], base).rule or "")
    assert "JSON object" in (refused({}, base).rule or "")
    assert refused({"bad name": SEED_SET["static-example"]}, base, "bad name").field == \
        f"{SET_ENV} key"


def test_from_the_environment(base: Path) -> None:
    assert load_from_env({}, base) is None
    env = {SET_ENV: json.dumps(SEED_SET), DEFAULT_ENV: "static-example"}
    loaded = load_from_env(env, base)
    assert loaded is not None and loaded.default == "static-example"
    with pytest.raises(InvalidInput, match=f"{SET_ENV}.*required when {DEFAULT_ENV}"):
        load_from_env({DEFAULT_ENV: "x"}, base)


@given(st.text(max_size=60))
def test_any_text_either_loads_or_is_refused_cleanly(text: str) -> None:
    try:
        raw = parse_json(text)
        load(raw, "x", Path("/nonexistent"))
    except InvalidInput as err:
        assert err.field and err.rule


def test_a_template_written_for_rill_is_refused_with_the_jinja_to_use(base: Path) -> None:
    (base / "templates" / "deployment.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Names.Deployment }}\n"
        "spec:\n  template:\n    spec:\n      containers:\n        - image: {{ .ImageTag }}\n"
        "          resources: {requests: {memory: '{{ .MemoryGB }}Gi'}}\n")
    err = refused(SEED_SET, base)
    assert err.field == "ANYCLOUD_PROVISIONER_SET_JSON.kubernetes-example.spec.template_paths." \
        "deployment"
    rule = err.rule or ""
    assert rule.startswith("must be a Jinja2 template ({{ host }}), not a Go template")
    assert "{{ .Names.Deployment }} -> {{ names.deployment }}" in rule
    assert "{{ .ImageTag }} -> {{ image (the whole reference: repository:tag) }}" in rule
    assert "{{ .MemoryGB }} -> {{ resources.memory" in rule


def test_a_template_without_a_name_is_named_from_the_provision_id(base: Path) -> None:
    from automation.provisioners.base import ProvisionRequest
    from automation.provisioners.kubernetes import KubernetesProvisioner

    (base / "templates" / "service.yaml").write_text(
        "apiVersion: v1\nkind: Service\nspec:\n  selector: {app: '{{ names.deployment }}'}\n"
        "  ports: [{port: 80}]\n")
    loaded = load(SEED_SET, "static-example", base)
    entry = loaded.get("kubernetes-example")
    assert isinstance(entry, KubernetesEntry)
    objects = KubernetesProvisioner("k", entry.spec, base).render("rt-abc", ProvisionRequest())
    service = next(o.body for o in objects if o.kind == "Service")
    assert service["metadata"]["name"] == "runtime-rt-abc"
    assert service["spec"]["selector"] == {"app": "runtime-rt-abc"}
    ingress = next(o.body for o in objects if o.key == "grpc_ingress")
    assert ingress["metadata"]["name"] == "runtime-rt-abc-grpc"
