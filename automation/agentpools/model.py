"""The AgentPool resource (anycloud.sh/v1) as pydantic models, and its offline validator.

``validate_manifest`` refuses exactly what the API server refuses when the manifest is
applied with ``kubectl apply`` against ``k8s/crd/agentpool-crd.yaml``: the schema's types,
bounds and patterns, its CEL rules, the unknown fields kubectl's strict field validation
refuses, and the name rules of the API server. The two are kept in step by
tests/automation/agentpools/test_crd_api_server.py, which gives every case to both.

How the API server reads a manifest, and so how this module does:
- a ``null`` object field counts as absent (the server prunes it, then applies defaults);
- an integral float (``3.0``) is an integer (kubectl sends it as ``3``); ``3.5``, ``"3"`` and
  ``true`` are not;
- ``status`` is ignored on create (the status subresource owns it);
- CEL rules (``maxReplicas >= minReplicas`` ...) are reported after the schema's own errors.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AliasGenerator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from automation.errors import InvalidInput
from automation.models import CAMEL_JSON

GROUP = "anycloud.sh"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "AgentPool"
INT32_MAX = 2**31 - 1

MAX_REPLICAS_RULE = "maxReplicas must be greater than or equal to minReplicas"
MAX_IDLE_RULE = "maxIdle must be greater than or equal to minIdle"
LABELS_RULE = "must carry at least one label: the pool's pods are found by their labels"
LABEL_KEY_RULE = ("every label key must be a Kubernetes label key: an optional DNS subdomain "
                  "prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.'")
DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = rf"{DNS_LABEL}(\.{DNS_LABEL})*"
LABEL_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY = re.compile(rf"({DNS_SUBDOMAIN}/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN)
_DNS_LABEL = re.compile(DNS_LABEL)
# ObjectMeta's fields: kubectl apply refuses any other key under metadata.
OBJECT_META = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields"})


def _integral(value: Any) -> Any:
    """``3.0`` is the integer 3, as kubectl sends it; anything else is left to the type check."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _without_nulls(value: Any) -> Any:
    """The API server prunes null fields of an object before defaulting and validating."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value


# Strict: a string or a bool is not a count. Every count fits an int32, as in the CRD.
Count = Annotated[int, BeforeValidator(_integral), Field(strict=True, ge=0, le=INT32_MAX)]
Slots = Annotated[int, BeforeValidator(_integral), Field(strict=True, ge=1, le=INT32_MAX)]
LabelValue = Annotated[str, Field(strict=True, max_length=63, pattern=rf"^({LABEL_NAME})?$")]
Text = Annotated[str, Field(strict=True)]


class _Manifest(BaseModel):
    """A part of the manifest: camelCase keys, unknown keys refused (kubectl apply's strict
    field validation), nulls dropped. Also built by snake_case name from Python."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=AliasGenerator(alias=to_camel),
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _prune_nulls(cls, data: Any) -> Any:
        return _without_nulls(data)


class AutoscalerSpec(_Manifest):
    """spec.autoscaler: how many agents, and how many idle slots, the pool keeps."""

    min_replicas: Count = 0
    max_replicas: Count
    min_idle: Count
    max_idle: Count
    idle_decay_second: Count = 60
    kill_unknown_after_second: Count = 300
    default_slots_per_agent: Slots = 1

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalerSpec:
        # The CRD's two CEL rules, with the same messages.
        if self.max_replicas < self.min_replicas:
            raise PydanticCustomError("cel", "{rule}", {
                "field": "maxReplicas", "value": self.max_replicas,
                "rule": f"{MAX_REPLICAS_RULE} ({self.min_replicas})"})
        if self.max_idle < self.min_idle:
            raise PydanticCustomError("cel", "{rule}", {
                "field": "maxIdle", "value": self.max_idle,
                "rule": f"{MAX_IDLE_RULE} ({self.min_idle})"})
        return self


class TemplateMetadata(_Manifest):
    labels: dict[str, LabelValue] = Field(strict=True)
    annotations: dict[str, Text] | None = Field(default=None, strict=True)

    @field_validator("labels", "annotations", mode="before")
    @classmethod
    def _prune_null_values(cls, value: Any) -> Any:
        return _without_nulls(value)

    @field_validator("labels")
    @classmethod
    def _label_keys(cls, labels: dict[str, str]) -> dict[str, str]:
        if not labels:
            raise PydanticCustomError("cel", "{rule}",
                                      {"field": "", "value": labels, "rule": LABELS_RULE})
        if len(labels) > 64:
            raise PydanticCustomError("max_properties", "must have at most 64 labels")
        for key in labels:
            if not label_key_ok(key):
                raise PydanticCustomError("cel", "{rule}",
                                          {"field": "", "value": key, "rule": LABEL_KEY_RULE})
        return labels


class Container(BaseModel):
    """One container of the template: only its name is checked here; the API server checks
    the rest when the operator creates the pods."""

    model_config = ConfigDict(extra="allow")

    name: Annotated[str, Field(strict=True, min_length=1)]

    @model_validator(mode="before")
    @classmethod
    def _prune_nulls(cls, data: Any) -> Any:
        return _without_nulls(data)


class PodSpecHead(BaseModel):
    """The template's PodSpec, open like the CRD's (``x-kubernetes-preserve-unknown-fields``):
    every field is kept; only a non-empty ``containers`` list is required."""

    model_config = ConfigDict(extra="allow")

    containers: list[Container] = Field(min_length=1, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _prune_nulls(cls, data: Any) -> Any:
        return _without_nulls(data)


class PodTemplate(_Manifest):
    metadata: TemplateMetadata
    spec: PodSpecHead


class AgentPoolSpec(_Manifest):
    autoscaler: AutoscalerSpec
    template: PodTemplate
    node_pool: Annotated[str, Field(strict=True, max_length=63,
                                    pattern=rf"^{DNS_LABEL}$")] | None = None


class AgentPool(BaseModel):
    """One AgentPool: its name, namespace (None: the kubectl context's) and spec."""

    model_config = ConfigDict(frozen=True)

    name: str
    namespace: str | None
    spec: AgentPoolSpec


def label_key_ok(key: str) -> bool:
    """The CRD's label-key rule: ``[prefix/]name``, prefix a DNS subdomain of at most 253
    characters, name at most 63."""
    if not _LABEL_KEY.fullmatch(key):
        return False
    prefix, _, name = key.rpartition("/")
    return len(prefix) <= 253 and len(name) <= 63


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_RULES = {
    "missing": "required",
    "extra_forbidden": "unknown field: kubectl apply refuses it (strict field validation)",
    "int_type": "must be an integer",
    "string_type": "must be a string",
    "dict_type": "must be an object (a map of strings)",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
}


def _problem(error: Any, prefix: tuple[str, ...]) -> tuple[bool, InvalidInput]:
    """One pydantic error as (is a CEL rule, InvalidInput naming field, value and rule)."""
    loc = (*prefix, *error["loc"])
    kind = error["type"]
    value = None if kind == "missing" else error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "cel":
        field = _path(loc + ((ctx["field"],) if ctx["field"] else ()))
        return True, InvalidInput(field, ctx["value"], ctx["rule"])
    if kind == "greater_than_equal":
        rule = f"must be greater than or equal to {ctx['ge']}"
    elif kind == "less_than_equal":
        rule = f"must be less than or equal to {ctx['le']}"
    elif kind == "string_pattern_mismatch":
        rule = f"must match {ctx['pattern']}"
    elif kind in ("string_too_short", "too_short"):
        unit = "item" if kind == "too_short" else "character"
        rule = f"must have at least {ctx['min_length']} {unit}"
    elif kind == "string_too_long":
        rule = f"must be at most {ctx['max_length']} characters"
    else:
        rule = _RULES.get(kind, error["msg"])
    if kind == "extra_forbidden":
        value = None
    return False, InvalidInput(_path(loc), value, rule)


def problems(doc: Any) -> list[InvalidInput]:
    """Every reason the API server would refuse this manifest; [] when it would accept it.
    Schema errors come first, then the CEL rules' (the order the API server reports)."""
    if not isinstance(doc, dict):
        return [InvalidInput("(document)", type(doc).__name__, "must be a YAML/JSON object")]
    found: list[InvalidInput] = []
    if doc.get("apiVersion") != API_VERSION:
        rule = f"must be {API_VERSION}"
        if doc.get("kind") == KIND:  # another product's AgentPool (the seed's velda.io/v1)
            rule += (f": change that one line to `apiVersion: {API_VERSION}`; the rest of the "
                     "manifest is read as written")
        found.append(InvalidInput("apiVersion", doc.get("apiVersion"), rule))
    if doc.get("kind") != KIND:
        found.append(InvalidInput("kind", doc.get("kind"), f"must be {KIND}"))
    unknown = sorted(set(doc) - {"apiVersion", "kind", "metadata", "spec", "status"})
    found += [InvalidInput(k, None, _RULES["extra_forbidden"]) for k in unknown]
    found += _metadata_problems(doc.get("metadata"))
    cel: list[InvalidInput] = []
    spec = doc.get("spec")
    if spec is None:
        found.append(InvalidInput("spec", None, "required"))
    else:
        try:
            AgentPoolSpec.model_validate(spec, by_alias=True, by_name=False)
        except ValidationError as exc:
            for is_cel, problem in (_problem(e, ("spec",)) for e in exc.errors()):
                (cel if is_cel else found).append(problem)
    return found + cel


def _metadata_problems(metadata: Any) -> list[InvalidInput]:
    if metadata is None:
        return [InvalidInput("metadata.name", None, "required (kubectl apply needs a name)")]
    if not isinstance(metadata, dict):
        return [InvalidInput("metadata", metadata, "must be an object")]
    name, namespace = metadata.get("name"), metadata.get("namespace")
    found = [InvalidInput(f"metadata.{k}", None, _RULES["extra_forbidden"])
             for k in sorted(set(metadata) - OBJECT_META)]
    if not name:
        found.append(InvalidInput("metadata.name", name, "required (kubectl apply needs a name)"))
    elif not isinstance(name, str) or not _DNS_SUBDOMAIN.fullmatch(name):
        found.append(InvalidInput("metadata.name", name, "must be a DNS-1123 subdomain"))
    elif len(name) > 63:
        found.append(InvalidInput(
            "metadata.name", name, "must be at most 63 characters: the operator puts it in "
            "the anycloud.sh/agent-pool label of every worker pod"))
    if namespace is not None and (not isinstance(namespace, str)
                                  or not _DNS_LABEL.fullmatch(namespace)
                                  or len(namespace) > 63):
        found.append(InvalidInput("metadata.namespace", namespace, "must be a DNS-1123 label"))
    return found


def validate_manifest(doc: Any) -> AgentPool:
    """The AgentPool a manifest declares, with the CRD's defaults filled in; InvalidInput
    (the first of ``problems``) when the API server would refuse it."""
    found = problems(doc)
    if found:
        raise found[0]
    spec = AgentPoolSpec.model_validate(doc["spec"], by_alias=True, by_name=False)
    return AgentPool(name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"),
                     spec=spec)


def is_agent_pool(doc: Any) -> bool:
    """A document meant for this CRD: its apiVersion is in the anycloud.sh group (a wrong
    version or kind there is a mistake to report, not another kind of object to skip), or
    its kind is AgentPool in another group (velda.io/v1: one line away from ours, and never
    to be passed as valid)."""
    return isinstance(doc, dict) and (
        str(doc.get("apiVersion", "")).split("/")[0] == GROUP or doc.get("kind") == KIND)



class DocumentVerdict(BaseModel):
    """What ``anycloud agent-pool validate`` says of one document of a YAML stream."""

    model_config = CAMEL_JSON

    source: str
    index: int  # 1-based position in its stream, empty documents counted
    kind: str | None
    name: str | None
    namespace: str | None
    verdict: Literal["valid", "invalid", "skipped"]
    problems: list[dict[str, Any]] = []
    autoscaler: AutoscalerSpec | None = None  # a valid pool's, with the defaults filled in


def check_stream(text: str, source: str) -> list[DocumentVerdict]:
    """The verdict of every non-empty document of a YAML stream. Documents of another API
    group (the agents' ConfigMap beside its pools) are skipped, not judged."""
    import yaml

    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise InvalidInput("-f", source, f"must be YAML: {' '.join(str(exc).split())}") from exc
    out = []
    for index, doc in enumerate(docs, 1):
        if doc is None:
            continue
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        head: dict[str, Any] = {"source": source, "index": index,
                "kind": doc.get("kind") if isinstance(doc, dict) else None,
                "name": meta.get("name"), "namespace": meta.get("namespace")}
        if not is_agent_pool(doc):
            out.append(DocumentVerdict(**head, verdict="skipped"))
            continue
        found = problems(doc)
        if found:
            out.append(DocumentVerdict(**head, verdict="invalid",
                                       problems=[p.to_dict() for p in found]))
        else:
            out.append(DocumentVerdict(**head, verdict="valid",
                                       autoscaler=validate_manifest(doc).spec.autoscaler))
    return out
