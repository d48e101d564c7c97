"""The provisioner set: named provisioners of three types, and the global default.

``ANYCLOUD_PROVISIONER_SET_JSON`` names them (several of one type are allowed: two clusters,
two static fleets); ``ANYCLOUD_DEFAULT_PROVISIONER`` names the one used where neither the
project nor its org chose one. Rill's names for the two (``RILL_ADMIN_PROVISIONER_SET_JSON``,
``RILL_ADMIN_DEFAULT_PROVISIONER``) are read when ours are unset, with a one-line notice, and
the set may carry comments (``// ...`` and ``/* ... */``: JSON with comments, as Rill's
documented example has them), so a set written for Rill is pasted as it is. The set is
checked whole when the control plane starts, so a typo is refused there (exit 2) rather than
when a deployment first starts:

- every type: optional ``data_bucket`` and ``metastore_id``, the shared data its runtimes
  use (templates get them; a move between provisioners that differ is refused);
- ``static``: runtimes with ``host``, ``slots``, ``data_dir``, ``audience_url``;
- ``kubernetes``: ``timeout_seconds``, ``data_dir``, ``host`` (its ``*`` becomes the
  deployment's provision id), ``namespace``, ``image``, ``kubeconfig_path``, ``template_paths``,
  and optional ``per_slot`` (``cpu``, ``memory``, ``storage`` of one slot: a deployment's
  resources are its slots times these, unless it names its own);
- ``nodepool``: the kubernetes type aimed at one of our node pools (``node_pool``): its objects
  go to the pool's own namespace on the pool's cluster, so it names no namespace or kubeconfig.

Every error names the field (``<provisioner>.spec.runtimes[0].slots``), the value and the rule.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from automation.errors import InvalidInput
from automation.provisioners.templates import TEMPLATE_KINDS, check_template
from automation.validation import QUANTITY

SET_ENV = "ANYCLOUD_PROVISIONER_SET_JSON"
DEFAULT_ENV = "ANYCLOUD_DEFAULT_PROVISIONER"
# Rill's names for the same two, read when ours are unset.
ALIASES = {SET_ENV: "RILL_ADMIN_PROVISIONER_SET_JSON",
           DEFAULT_ENV: "RILL_ADMIN_DEFAULT_PROVISIONER"}

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_NAME = re.compile(r"[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _SharedData(_Spec):
    """Where every runtime of the provisioner keeps its durable data (seed 002: a moved
    runtime finds its data there again): passed to the templates, and compared on a move."""

    data_bucket: str | None = Field(None, min_length=1)
    metastore_id: str | None = Field(None, min_length=1)


class StaticRuntime(_Spec):
    host: str = Field(min_length=1)
    slots: int = Field(ge=1)
    data_dir: str = Field(min_length=1)
    audience_url: str = Field(min_length=1)


class StaticSpec(_SharedData):
    runtimes: list[StaticRuntime] = Field(min_length=1)


class TemplatePaths(_Spec):
    """The objects a runtime is made of; a Deployment and its Service at least."""

    deployment: str
    service: str
    pvc: str | None = None
    http_ingress: str | None = None
    grpc_ingress: str | None = None


class PerSlot(_Spec):
    """What one slot is worth on a templated runtime: a deployment that asks N slots and no
    explicit --cpu/--memory/--storage gets N times these (Rill sizes its runtimes by slots)."""

    cpu: str = "1"
    memory: str = "2Gi"
    storage: str = "10Gi"

    @field_validator("cpu", "memory", "storage")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not QUANTITY.fullmatch(value):
            raise ValueError("must be a positive Kubernetes quantity such as 500m, 2, 4Gi")
        return value


class _TemplatedSpec(_SharedData):
    timeout_seconds: int = Field(ge=1)
    data_dir: str = Field(min_length=1)
    host: str
    image: str = Field(min_length=1)
    template_paths: TemplatePaths
    per_slot: PerSlot = PerSlot()

    @field_validator("host")
    @classmethod
    def _one_wildcard(cls, host: str) -> str:
        # Without exactly one '*' every deployment would get the same host (or an ambiguous one).
        if host.count("*") != 1:
            raise ValueError("must hold exactly one '*', replaced by the deployment's "
                             "provision id (e.g. http://node-*.localhost)")
        return host


class KubernetesSpec(_TemplatedSpec):
    namespace: str
    kubeconfig_path: str = Field(min_length=1)

    @field_validator("namespace")
    @classmethod
    def _dns_label(cls, namespace: str) -> str:
        if not _DNS_LABEL.fullmatch(namespace):
            raise ValueError("must be a Kubernetes namespace name (DNS-1123 label)")
        return namespace


class NodePoolSpec(_TemplatedSpec):
    node_pool: str = Field(min_length=1)
    cluster: str | None = None  # needed only when pools of that name exist on two clusters


class StaticEntry(_Spec):
    type: Literal["static"]
    spec: StaticSpec


class KubernetesEntry(_Spec):
    type: Literal["kubernetes"]
    spec: KubernetesSpec


class NodePoolEntry(_Spec):
    type: Literal["nodepool"]
    spec: NodePoolSpec


Provisioner = Annotated[StaticEntry | KubernetesEntry | NodePoolEntry,
                        Field(discriminator="type")]
TYPES = ("static", "kubernetes", "nodepool")


class _Tagged(BaseModel):
    provisioner: Provisioner


class ProvisionerSet(BaseModel):
    model_config = ConfigDict(frozen=True)

    provisioners: dict[str, StaticEntry | KubernetesEntry | NodePoolEntry]
    default: str

    def get(self, name: str) -> StaticEntry | KubernetesEntry | NodePoolEntry:
        return self.provisioners[name]

    def shared_data(self, name: str) -> tuple[str | None, str | None]:
        """(data_bucket, metastore_id) of a provisioner; (None, None) when not in the set."""
        entry = self.provisioners.get(name)
        return (entry.spec.data_bucket, entry.spec.metastore_id) if entry else (None, None)


def strip_comments(text: str) -> str:
    """JSON with comments as JSON: each ``//`` comment (to the end of its line) and each
    ``/* */`` comment outside a string becomes spaces, newlines kept, so an error's line and
    column still point into the text as written."""
    out = list(text)
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            in_string = c != '"'
        elif c == '"':
            in_string = True
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = [ch if ch == "\n" else " " for ch in text[i:end]]
            i = end
            continue
        i += 1
    return "".join(out)


def parse_json(text: str, field: str = SET_ENV) -> Any:
    """JSON (comments allowed), or an error with the line and column."""
    try:
        return json.loads(strip_comments(text))
    except json.JSONDecodeError as err:
        lines = text.split("\n")  # the decoder counts lines by "\n" only
        line = lines[err.lineno - 1] if err.lineno <= len(lines) else ""
        raise InvalidInput(field, _shorten(line.strip()),
                           f"must be JSON (comments allowed): line {err.lineno} column "
                           f"{err.colno}: {err.msg}") from None


def load(raw: Any, default: str | None, base_dir: Path, field: str = SET_ENV) -> ProvisionerSet:
    """The set from its parsed JSON, checked whole: types, fields, templates, hosts, default."""
    if not isinstance(raw, Mapping) or not raw:
        raise InvalidInput(field, _shorten(json.dumps(raw)),
                           "must be a JSON object of provisioner name -> {type, spec}")
    provisioners = {}
    for name, entry in raw.items():
        if not _NAME.fullmatch(name):
            raise InvalidInput(f"{field} key", name, "a provisioner name is 1-63 letters, "
                               "digits, '-', '_' or '.', starting and ending alphanumeric")
        provisioners[name] = _provisioner(name, entry, field)
    _check_hosts(provisioners, field)
    for name, p in provisioners.items():
        if not isinstance(p, StaticEntry):
            _check_templates(name, p.spec.template_paths, base_dir, field)
    if not default:
        raise InvalidInput(DEFAULT_ENV, default, f"must name the global default provisioner: "
                           f"one of {', '.join(sorted(provisioners))}")
    if default not in provisioners:
        raise InvalidInput(DEFAULT_ENV, default, f"must name a provisioner of the set: "
                           f"one of {', '.join(sorted(provisioners))}")
    return ProvisionerSet(provisioners=provisioners, default=default)


def load_from_env(environ: Mapping[str, str], base_dir: Path,
                  notice: Callable[[str], None] | None = None) -> ProvisionerSet | None:
    """The set the environment names, or None when it names none (templates resolve
    against ``base_dir``). Rill's variable names stand in for unset ones (``notice`` says so,
    on stderr by default)."""
    say = notice or (lambda line: print(line, file=sys.stderr))

    def read(name: str) -> tuple[str | None, str]:
        if environ.get(name):
            return environ[name], name
        alias = ALIASES[name]
        if environ.get(alias):
            say(f"anycloud: reading {alias} as {name} (unset)")
            return environ[alias], alias
        return None, name

    text, field = read(SET_ENV)
    default, default_field = read(DEFAULT_ENV)
    if not text:
        if default:
            raise InvalidInput(SET_ENV, None, f"is required when {default_field} is set")
        return None
    return load(parse_json(text, field), default, base_dir, field)


def required(found: ProvisionerSet | None) -> ProvisionerSet:
    """The set, where starting a deployment needs one (refused by name when none is set)."""
    if found is None:
        raise InvalidInput(SET_ENV, None, f"is required to start deployments: a JSON object of "
                           f"named provisioners, with {DEFAULT_ENV} naming the default "
                           "(README, \"Deployments and the provisioner set\")")
    return found


def _provisioner(name: str, entry: Any, field: str) -> Any:
    kind = entry.get("type") if isinstance(entry, Mapping) else None
    if kind not in TYPES:
        raise InvalidInput(f"{field}.{name}.type", kind,
                           f"must be one of {', '.join(TYPES)}")
    try:
        return _Tagged.model_validate({"provisioner": entry}).provisioner
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(_step(s) for s in first["loc"][2:]).replace(".[", "[")
        value = first.get("input")
        rule = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            value, rule = None, "is required"
        elif first["type"] == "extra_forbidden":
            rule = f"is not a field of a {kind} provisioner"
        raise InvalidInput(f"{field}.{name}.{where}", _shorten(value), rule) from None


def _step(loc: int | str) -> str:
    return f"[{loc}]" if isinstance(loc, int) else str(loc)


def _check_hosts(provisioners: Mapping[str, Any], field: str) -> None:
    """A host is one runtime: two static runtimes, or two host patterns, may not share it."""
    seen: dict[str, str] = {}
    for name, p in provisioners.items():
        hosts = ([(f"{name}.spec.runtimes[{i}].host", r.host)
                  for i, r in enumerate(p.spec.runtimes)] if isinstance(p, StaticEntry)
                 else [(f"{name}.spec.host", p.spec.host)])
        for where, host in hosts:
            key = host.rstrip("/").lower()
            if key in seen:
                raise InvalidInput(f"{field}.{where}", host,
                                   f"must be unique in the set: {seen[key]} has it too")
            seen[key] = where


def _check_templates(name: str, paths: TemplatePaths, base_dir: Path, field: str) -> None:
    for kind in TEMPLATE_KINDS:
        path = getattr(paths, kind)
        if path is not None:
            where = f"{field}.{name}.spec.template_paths.{kind}"
            check_template(where, base_dir / path, kind)


def _shorten(value: Any, limit: int = 80) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit - 1] + "…"
    return value
