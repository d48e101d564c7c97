"""The Kubernetes objects of a runtime, from Jinja templates (kubernetes and nodepool types).

A template renders one object with these variables: ``provision_id``, ``host``, ``image``,
``data_dir``, ``namespace``, ``resources`` (``cpu``, ``memory``, ``storage``) and ``names``
(``deployment``, ``service``, ``pvc``, ``http_ingress``, ``grpc_ingress``: the objects'
names, ``runtime-<provision id>`` and ``-http``/``-grpc`` for the ingresses), and the set's
``data_bucket`` and ``metastore_id`` (None when it names none). An object whose
template leaves ``metadata.name`` out gets its ``names`` entry (Rill names objects itself,
so its templates have none). Undefined variables are errors, never empty strings. A template
is checked when the set is loaded: it must be readable, parse, render with sample values,
and give one object of its kind. A template written for Rill (Go's ``{{ .Host }}``) is
refused with the Jinja variable to use for each name it holds.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from automation.errors import InvalidInput

# template_paths key -> the kind of object it must render
TEMPLATE_KINDS: dict[str, str] = {
    "deployment": "Deployment",
    "service": "Service",
    "pvc": "PersistentVolumeClaim",
    "http_ingress": "Ingress",
    "grpc_ingress": "Ingress",
}


_QUANTITY_PARTS = re.compile(r"([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)")


@dataclass(frozen=True)
class Resources:
    cpu: str = "1"
    memory: str = "2Gi"
    storage: str = "10Gi"

    def given_or_per_slot(self, slots: int, cpu: str | None, memory: str | None,
                          storage: str | None) -> Resources:
        """What a deployment asked, each field it left out ``slots`` times this one (these
        being one slot's worth): ``slots=3`` of ``500m``/``2Gi`` is ``1500m``/``6Gi``."""
        return Resources(cpu=cpu or times(self.cpu, slots),
                         memory=memory or times(self.memory, slots),
                         storage=storage or times(self.storage, slots))


def times(quantity: str, factor: int) -> str:
    """A Kubernetes quantity multiplied, its suffix kept (``2Gi`` x 3 = ``6Gi``)."""
    found = _QUANTITY_PARTS.fullmatch(quantity)
    if found is None:
        raise ValueError(f"not a Kubernetes quantity: {quantity!r}")
    total = f"{Decimal(found[1]) * factor:f}"
    return (total.rstrip("0").rstrip(".") if "." in total else total) + found[2]


def object_names(provision_id: str) -> dict[str, str]:
    """template_paths key -> the name its object gets (``names`` in the templates)."""
    base = f"runtime-{provision_id}"
    return {"deployment": base, "service": base, "pvc": base,
            "http_ingress": f"{base}-http", "grpc_ingress": f"{base}-grpc"}


@dataclass(frozen=True)
class TemplateValues:
    provision_id: str
    host: str
    image: str
    data_dir: str
    namespace: str
    resources: Resources = field(default_factory=Resources)
    names: dict[str, str] = field(default_factory=dict)
    data_bucket: str | None = None  # the set's shared data (None when it names none)
    metastore_id: str | None = None

    def __post_init__(self) -> None:
        if not self.names:
            object.__setattr__(self, "names", object_names(self.provision_id))


# Rill's Go-template fields -> ours (Jinja), for a template written for Rill.
RILL_FIELDS = {
    "Names.Deployment": "names.deployment", "Names.Service": "names.service",
    "Names.PVC": "names.pvc", "Names.HTTPIngress": "names.http_ingress",
    "Names.GRPCIngress": "names.grpc_ingress", "Host": "host", "Image": "image",
    "ImageTag": "image (the whole reference: repository:tag)", "DataDir": "data_dir",
    "Namespace": "namespace", "ProvisionID": "provision_id", "CPU": "resources.cpu",
    "MemoryGB": "resources.memory (a quantity such as 4Gi, not a number of GB)",
    "StorageBytes": "resources.storage (a quantity such as 100Gi, not bytes)",
    "Slots": "none: a deployment's slots size resources.cpu/memory/storage (per_slot)",
}
_GO_FIELD = re.compile(r"\{\{-?\s*\.([A-Za-z][\w.]*)")


def _refuse_go_template(field_name: str, path: Path, text: str) -> None:
    used = list(dict.fromkeys(_GO_FIELD.findall(text)))
    if not used:
        return
    hints = "; ".join(f"{{{{ .{name} }}}} -> {{{{ {RILL_FIELDS.get(name, '(no equivalent)')} "
                      f"}}}}" for name in used[:8])
    raise InvalidInput(field_name, str(path), "must be a Jinja2 template ({{ host }}), not a "
                       f"Go template as Rill's are ({{{{ .{used[0]} }}}}): {hints}")


SAMPLE = TemplateValues(provision_id="sample-0123", host="http://node-sample-0123.localhost",
                        image="example/runtime:1", data_dir="/mnt/data", namespace="sample")


def _environment() -> Any:
    import jinja2

    # Autoescaping is for HTML; YAML values are quoted by the template author.
    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def read_template(field_name: str, path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise InvalidInput(field_name, str(path), "must be a readable template file: "
                           "no such file") from None
    except IsADirectoryError:
        raise InvalidInput(field_name, str(path), "must be a template file, not a "
                           "directory") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise InvalidInput(field_name, str(path),
                           f"must be a readable UTF-8 template file: {err}") from None


def render(field_name: str, path: Path, text: str, values: TemplateValues) -> dict[str, Any]:
    """One Kubernetes object, or an error naming the template, the line and why."""
    import jinja2
    import yaml

    _refuse_go_template(field_name, path, text)
    try:
        rendered = _environment().from_string(text).render(asdict(values))
    except jinja2.TemplateSyntaxError as err:
        raise InvalidInput(field_name, str(path),
                           f"must be a valid template: line {err.lineno}: {err.message}") from None
    except jinja2.UndefinedError as err:
        raise InvalidInput(field_name, str(path), f"must use only the documented variables "
                           f"(provision_id, host, image, data_dir, namespace, resources, "
                           f"names): {err.message}") from None
    try:
        docs = [d for d in yaml.safe_load_all(rendered) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at rendered line {mark.line + 1}" if mark is not None else ""
        raise InvalidInput(field_name, str(path),
                           f"must render YAML{where}: {getattr(err, 'problem', err)}") from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InvalidInput(field_name, str(path),
                           f"must render exactly one Kubernetes object (got {len(docs)})")
    return docs[0]


def check_template(field_name: str, path: Path, key: str) -> None:
    """Load-time check: readable, parses, renders the sample, gives one object of its kind."""
    obj = render(field_name, path, read_template(field_name, path), SAMPLE)
    expected = TEMPLATE_KINDS[key]
    if obj.get("kind") != expected or not obj.get("apiVersion"):
        raise InvalidInput(field_name, str(path),
                           f"must render a {expected} (apiVersion and kind), got "
                           f"kind {obj.get('kind')!r}")
