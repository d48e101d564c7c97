"""Run a Pulumi stack program under the SDK's mock engine and return what it registered.

This is the engine-less half of the StackRunner story: the real resource registration path
of the Pulumi SDK runs, but a pluggable *cloud* object answers instead of provider plugins.
It assigns ids and addresses (``new_resource``) and answers invokes (``call``, e.g.
``aws:ec2/getAmi:getAmi`` with the newest image it has; ``publish_image`` publishes a newer
one, as an image's owner would). The result is plain data: every resource with its inputs under
the engine's wire names (camelCase), secrets replaced by ``"[secret]"``, plus the stack
outputs. Used by ``anycloud node-pool plan``, the offline policy check and tests.

Pulumi is imported lazily so importing this module costs nothing.
"""

from __future__ import annotations

import contextvars
import hashlib
import ipaddress
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

SECRET = "[secret]"
UNKNOWN = "[unknown]"
STACK_TYPE = "pulumi:pulumi:Stack"
_IMAGE_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # when the simulated clouds' first images date

__all__ = [
    "SECRET",
    "Cloud",
    "CloudFailure",
    "ProgramRun",
    "RegisteredResource",
    "SimulatedCloud",
    "run_program",
]


class Cloud(Protocol):
    """What the mock engine asks of a (simulated) cloud."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """Return the physical id and the *extra* output properties (wire names)."""
        ...

    def call(self, args: MockCallArgs) -> dict[str, Any]:
        """Answer a provider function (invoke); return its result under wire names."""
        ...


class CloudFailure(Exception):
    """Raised by a simulated cloud to make one resource's creation fail."""


@dataclass(frozen=True)
class RegisteredResource:
    urn: str
    type: str
    name: str
    custom: bool
    id: str | None
    parent: str | None
    provider: str | None
    inputs: dict[str, Any]
    secret_inputs: tuple[str, ...]
    outputs: dict[str, Any]
    secret_outputs: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "custom": self.custom,
            "id": self.id,
            "parent": self.parent,
            "provider": self.provider,
            "inputs": self.inputs,
            "secretInputs": list(self.secret_inputs),
            "outputs": self.outputs,
            "secretOutputs": list(self.secret_outputs),
            "options": self.options,
        }


@dataclass(frozen=True)
class ProgramRun:
    resources: tuple[RegisteredResource, ...]
    outputs: dict[str, Any]
    secret_outputs: tuple[str, ...]
    stack_urn: str
    invokes: tuple[dict[str, Any], ...] = ()

    def of_type(self, type_: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> RegisteredResource:
        found = self.of_type(type_)
        if len(found) != 1:
            raise LookupError(f"expected one {type_}, found {len(found)}")
        return found[0]

    def by_urn(self, urn: str) -> RegisteredResource:
        for r in self.resources:
            if r.urn == urn:
                return r
        raise LookupError(urn)

    def children_of(self, urn: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.parent == urn]

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack_urn,
            "resources": [r.to_dict() for r in self.resources],
            "outputs": self.outputs,
            "secretOutputs": list(self.secret_outputs),
            "invokes": list(self.invokes),
        }


# --------------------------------------------------------------------------- simulated cloud


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def _uuid_from(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw[:16])


class SimulatedCloud:
    """A deterministic cloud: ids and addresses derive from the resource type and name.

    ``fail`` makes creation of matching resources raise (``CloudFailure``); it receives the
    type and the logical name.
    """

    _PUBLIC_NET = ipaddress.ip_network("198.18.0.0/15")  # benchmarking range, never routed

    def __init__(
        self,
        fail: Callable[[str, str], bool] | None = None,
        images: dict[str, list[dict[str, str]]] | None = None,
    ) -> None:
        self._fail = fail
        self._lock = threading.Lock()
        self._ips: dict[str, str] = {}
        self._ip_owner: dict[str, str] = {}  # Azure public IP name -> VM resource name
        # Published images per lookup key, oldest first (``publish_image``); a key nobody
        # published to answers with one deterministic image. Pass another cloud's ``images``
        # to see what it published (a preview sees the images an ``up`` would).
        self.images: dict[str, list[dict[str, str]]] = images if images is not None else {}
        self._azure_exact: dict[str, str] = {}  # Azure VM name + key -> version built from

    # -- images ---------------------------------------------------------------------------
    #
    # Lookup keys (``image_key``): ``aws:<name pattern>`` (getAmi's name filter),
    # ``gcp:<project>/<family>`` (getImage by family), ``azure:<publisher>:<offer>:<sku>`` (a
    # VM's imageReference with version ``latest``: Azure resolves it when it creates the VM
    # and reports the version it took as ``exactVersion``).

    def newest_image(self, key: str) -> dict[str, str]:
        """The newest image under a lookup key: ``id`` (AMI id, GCP selfLink, Azure
        version), ``name`` and ``created``."""
        with self._lock:
            published = self.images.get(key)
            return dict(published[-1]) if published else _sim_image(key, None, 0)

    def publish_image(self, provider: str, kind: str, image_id: str | None = None) -> str:
        """Publish a newer image for the pinned lookup of ``provider``'s ``kind`` (cpu|gpu)
        VMs, as the image's owner would; return its id. ``image_id``: an AMI id, a GCP image
        name or selfLink, an Azure version; made up when omitted."""
        from stacks.pins import load_pins

        if kind not in ("cpu", "gpu"):
            raise ValueError(f"kind must be cpu or gpu, not {kind!r}")
        key = image_key(load_pins().images.for_vm(provider, kind == "gpu"))
        with self._lock:
            published = self.images.setdefault(key, [])
            image = _sim_image(key, image_id, len(published) + 1)
            published.append(image)
        return image["id"]

    # Addresses are unique within one cloud object; collisions are probed deterministically.
    def public_ip(self, key: str) -> str:
        with self._lock:
            if key in self._ips:
                return self._ips[key]
            size = self._PUBLIC_NET.num_addresses
            n = int.from_bytes(_digest("ip", key)[:4], "big") % size
            taken = set(self._ips.values())
            while True:
                ip = str(self._PUBLIC_NET.network_address + n)
                if ip not in taken and not ip.endswith((".0", ".255")):
                    self._ips[key] = ip
                    return ip
                n = (n + 1) % size

    def resource_id(self, type_: str, name: str) -> str:
        h = _digest(type_, name).hex()
        if type_.startswith("aws:"):
            prefix = {
                "aws:ec2/vpc:Vpc": "vpc",
                "aws:ec2/subnet:Subnet": "subnet",
                "aws:ec2/internetGateway:InternetGateway": "igw",
                "aws:ec2/routeTable:RouteTable": "rtb",
                "aws:ec2/routeTableAssociation:RouteTableAssociation": "rtbassoc",
                "aws:ec2/securityGroup:SecurityGroup": "sg",
                "aws:ec2/instance:Instance": "i",
            }.get(type_, "res")
            return f"{prefix}-{h[:17]}"
        if type_.startswith("azure-native:"):
            kind = type_.rsplit(":", 1)[-1]
            return f"/subscriptions/00000000-0000-0000-0000-000000000000/sim/{kind}/{name}"
        if type_.startswith("gcp:"):
            return f"projects/sim/{type_.rsplit(':', 1)[-1].lower()}s/{name}"
        return f"{name}-{h[:8]}"

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if self._fail is not None and self._fail(args.typ, args.name):
            raise CloudFailure(f"simulated failure creating {args.typ} {args.name}")
        if not args.custom:
            return None, {}
        rid = self.resource_id(args.typ, args.name)
        extra: dict[str, Any] = {}
        t = args.typ
        if t == "aws:ec2/instance:Instance":
            extra = {
                "publicIp": self.public_ip(args.name),
                "privateIp": "10.0.1.10",
                "arn": f"arn:aws:ec2:sim:000000000000:instance/{rid}",
                "instanceState": "running",
            }
        elif t == "gcp:compute/instance:Instance":
            nics = [dict(n) for n in args.inputs.get("networkInterfaces", [])]
            if nics:
                nics[0]["accessConfigs"] = [
                    {**ac, "natIp": self.public_ip(args.name)}
                    for ac in nics[0].get("accessConfigs", [])
                ]
                nics[0]["networkIp"] = "10.0.1.10"
            extra = {"networkInterfaces": nics, "instanceId": str(int(_digest(rid).hex()[:12], 16))}
        elif t == "azure-native:compute:VirtualMachine":
            extra = {"vmId": str(_uuid_from(_digest(t, args.name)))}
            storage = self._azure_storage(args.name, args.inputs.get("storageProfile"))
            if storage is not None:
                extra["storageProfile"] = storage
            # The VM declares its public IP; answer lookups of it with the VM's address.
            for name in _azure_public_ip_names(args.inputs):
                with self._lock:
                    self._ip_owner[name] = args.name
        elif t == "azure-native:network:PublicIPAddress":
            extra = {"ipAddress": self.public_ip(args.name)}
        elif t in (
            "random:index/randomString:RandomString",
            "random:index/randomPassword:RandomPassword",
        ):
            length = int(args.inputs.get("length", 16))
            alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
            seed = _digest(t, args.name, json.dumps(args.inputs.get("keepers", {}), sort_keys=True))
            out = "".join(alphabet[b % len(alphabet)] for b in (seed * 4)[:length])
            extra = {"result": out}
        elif t.startswith("pulumi:providers:"):
            rid = f"{args.name}-provider"
        if "name" not in args.inputs and t.startswith(("aws:", "gcp:")):
            extra.setdefault("name", args.name)
        return rid, extra

    def _azure_storage(self, vm_name: str, profile: Any) -> dict[str, Any] | None:
        """The VM's storage profile as Azure reports it: ``latest`` resolved once, when the
        VM is created, to the newest version (``exactVersion``)."""
        if not isinstance(profile, Mapping) or not isinstance(
                profile.get("imageReference"), Mapping):
            return None
        ref = dict(profile["imageReference"])
        version = str(ref.get("version") or "latest")
        if version == "latest":
            key = f"azure:{ref.get('publisher')}:{ref.get('offer')}:{ref.get('sku')}"
            newest = self.newest_image(key)["id"]
            with self._lock:
                version = self._azure_exact.setdefault(f"{vm_name}\x1f{key}", newest)
        return {**profile, "imageReference": {**ref, "exactVersion": version}}

    def call(self, args: MockCallArgs) -> dict[str, Any]:
        if args.token == "aws:ec2/getAmi:getAmi":
            # most_recent: the newest image matching the name pattern.
            filters = {f.get("name"): f.get("values") or [] for f in args.args.get("filters", [])}
            pattern = (filters.get("name") or ["sim-image-*"])[0]
            image = self.newest_image(f"aws:{pattern}")
            return {
                "id": image["id"],
                "imageId": image["id"],
                "name": image["name"],
                "creationDate": image["created"],
                "architecture": (filters.get("architecture") or ["x86_64"])[0],
                "state": "available",
            }
        if args.token == "azure-native:network:getPublicIPAddress":
            name = str(args.args.get("publicIpAddressName", "ip"))
            with self._lock:
                owner = self._ip_owner.get(name, name)
            return {"name": name, "ipAddress": self.public_ip(owner)}
        if args.token == "gcp:compute/getImage:getImage":
            project = str(args.args.get("project") or "sim")
            family = args.args.get("family")
            if family:  # the newest image of the family
                image = self.newest_image(f"gcp:{project}/{family}")
            else:  # that very image
                image = _sim_image(f"gcp:{project}/", str(args.args.get("name") or "image"), 0)
            return {
                "selfLink": image["id"],
                "name": image["name"],
                "family": family or "",
                "project": project,
                "creationTimestamp": image["created"],
                "status": "READY",
            }
        return {}


def image_key(pin: Any) -> str:
    """The simulated clouds' lookup key of an image pin (``components.pins``)."""
    if hasattr(pin, "owners"):
        return f"aws:{pin.name}"
    if hasattr(pin, "family"):
        return f"gcp:{pin.project}/{pin.family}"
    return f"azure:{pin.publisher}:{pin.offer}:{pin.sku}"


def _sim_image(key: str, image_id: str | None, n: int) -> dict[str, str]:
    """The ``n``-th image published under ``key`` (0: the one there from the start), one
    day after the one before; ``image_id`` made up when None."""
    provider, _, rest = key.partition(":")
    day = (_IMAGE_EPOCH + timedelta(days=n)).strftime("%Y%m%d")
    created = f"{day[:4]}-{day[4:6]}-{day[6:]}T00:00:00.000Z"
    if provider == "aws":
        ami = image_id or "ami-" + _digest("ami", key, str(n)).hex()[:17]
        return {"id": ami, "name": rest.replace("*", day), "created": created}
    if provider == "gcp":
        project, _, family = rest.partition("/")
        name = (image_id or f"{family}-v{day}").rsplit("/", 1)[-1]
        link = image_id if image_id and "/" in image_id else (
            f"https://www.googleapis.com/compute/v1/projects/{project}/global/images/{name}")
        return {"id": link, "name": name, "created": created}
    version = image_id or f"1.{n}.{day}"
    return {"id": version, "name": version, "created": created}


def _azure_public_ip_names(inputs: Mapping[str, Any]) -> list[str]:
    profile = inputs.get("networkProfile") or {}
    names = []
    for nic in profile.get("networkInterfaceConfigurations") or []:
        for ipc in nic.get("ipConfigurations") or []:
            pip = ipc.get("publicIPAddressConfiguration") or {}
            if pip.get("name"):
                names.append(str(pip["name"]))
    return names


# --------------------------------------------------------------------------- plain data


def _plain(value: Any, reveal: bool = False) -> tuple[Any, bool]:
    """Strip secret wrappers; return (value with secrets replaced, whether any was secret)."""
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(value):
        if reveal:
            return _plain(rpc.unwrap_rpc_secret(value), reveal)[0], True
        return SECRET, True
    if isinstance(value, Unknown):
        return UNKNOWN, False
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        secret = False
        for k, v in value.items():
            out[str(k)], s = _plain(v, reveal)
            secret = secret or s
        return out, secret
    if isinstance(value, (list, tuple)):
        items = [_plain(v, reveal) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value, False
    # Assets, archives and resource references: keep a readable form.
    return repr(value), False


def _plain_props(
    props: Mapping[str, Any], reveal: bool = False
) -> tuple[dict[str, Any], tuple[str, ...]]:
    out: dict[str, Any] = {}
    secret_keys: list[str] = []
    for k, v in props.items():
        out[k], secret = _plain(v, reveal)
        if secret:
            secret_keys.append(k)
    return out, tuple(sorted(secret_keys))


# --------------------------------------------------------------------------- engine


def _make_mocks(cloud: Cloud, record: dict[str, Any]) -> Any:
    from pulumi.runtime import mocks as pmocks

    class _Mocks(pmocks.Mocks):
        def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
            rid, extra = cloud.new_resource(args)
            # Echo the inputs (secret wrappers included, so secrets stay secret) plus what
            # the cloud computed.
            return rid, {**args.inputs, **extra}

        def call(self, args: MockCallArgs) -> Any:
            # A bare dict means "no check failures" to MockMonitor.Invoke.
            result = cloud.call(args)
            with record["lock"]:
                record["invokes"].append({"token": args.token, "args": args.args})
            return result

    return _Mocks()


def _make_monitor(mocks: Any, record: dict[str, Any]) -> Any:
    from pulumi.runtime import rpc
    from pulumi.runtime.mocks import MockMonitor

    class _Monitor(MockMonitor):  # type: ignore[misc]
        def make_urn(self, parent: str, type_: str, name: str) -> str:
            # Like the real engine: children of the root stack carry no parent type.
            if parent and parent.split("::")[2].split("$")[-1] == STACK_TYPE:
                parent = ""
            result: str = super().make_urn(parent, type_, name)
            return result

        def RegisterResource(self, request: Any) -> Any:
            resp = super().RegisterResource(request)
            if request.type == STACK_TYPE:
                record["stack_urn"] = resp.urn
                return resp
            inputs = rpc.deserialize_properties(request.object)
            with record["lock"]:
                record["order"].append(resp.urn)
                record["requests"][resp.urn] = {
                    "type": request.type,
                    "name": request.name,
                    "parent": request.parent or None,
                    "custom": bool(request.custom),
                    "provider": request.provider or None,
                    "inputs": inputs,
                    "options": {
                        "additionalSecretOutputs": list(request.additionalSecretOutputs),
                        "replaceOnChanges": list(request.replaceOnChanges),
                        "ignoreChanges": list(request.ignoreChanges),
                        "deleteBeforeReplace": bool(request.deleteBeforeReplace),
                        "retainOnDelete": bool(request.retainOnDelete),
                        "protect": bool(request.protect),
                        "dependencies": list(request.dependencies),
                    },
                }
            return resp

        def RegisterResourceOutputs(self, request: Any) -> Any:
            if request.urn == record.get("stack_urn"):
                record["stack_outputs"] = rpc.deserialize_properties(request.outputs)
            return super().RegisterResourceOutputs(request)

    return _Monitor(mocks)


def run_program(
    program: Callable[[], None],
    *,
    cloud: Cloud | None = None,
    project: str = "anycloud",
    stack: str = "mock",
    config: Mapping[str, str] | None = None,
    preview: bool = False,
    logger: logging.Logger | None = None,
    reveal_secrets: bool = False,
) -> ProgramRun:
    """Run ``program`` as a Pulumi stack under mocks; return every registered resource.

    Safe to call repeatedly in one process: each run gets fresh runtime settings, a fresh
    monitor and a fresh root stack, inside a copied context so nothing leaks between runs.
    ``config`` is Pulumi config as the engine passes it (``{"anycloud:pool": "<json>"}``).
    ``reveal_secrets`` keeps secret values readable (still listed as secret): for tests
    only, never for anything printed. Raises whatever the program (or the cloud) raised.
    """
    ctx = contextvars.copy_context()
    return ctx.run(
        _run,
        program,
        cloud or SimulatedCloud(),
        project,
        stack,
        dict(config or {}),
        preview,
        logger,
        reveal_secrets,
    )


def _run(
    program: Callable[[], None],
    cloud: Cloud,
    project: str,
    stack: str,
    config: dict[str, str],
    preview: bool,
    logger: logging.Logger | None,
    reveal_secrets: bool,
) -> ProgramRun:
    from google.protobuf import empty_pb2
    from pulumi.runtime import config as pconfig
    from pulumi.runtime import mocks as pmocks
    from pulumi.runtime import settings
    from pulumi.runtime.stack import run_in_stack
    from pulumi.runtime.sync_await import _sync_await

    record: dict[str, Any] = {
        "lock": threading.Lock(),
        "order": [],
        "requests": {},
        "invokes": [],
    }
    mocks = _make_mocks(cloud, record)
    monitor = _make_monitor(mocks, record)
    features = set(monitor.GetDeploymentInfo(empty_pb2.Empty()).supportedFeatures)
    settings.configure(
        pmocks.MockSettings(
            monitor=monitor,
            monitor_features=features,
            engine=pmocks.MockEngine(logger or logging.getLogger("anycloud.mock_engine")),
            project=project,
            stack=stack,
            dry_run=preview,
            organization="organization",
            callbacks=None,
        )
    )
    settings.SETTINGS.outputs.clear()
    settings.ROOT.set(None)
    pconfig.set_all_config(config, [])

    _sync_await(run_in_stack(program))

    resources: list[RegisteredResource] = []
    registered = monitor.get_registered_resources()
    # Registration order depends on thread scheduling; URN order is stable across runs.
    for urn in sorted(record["order"]):
        req = record["requests"][urn]
        inputs, secret_inputs = _plain_props(req["inputs"], reveal_secrets)
        reg = registered.get(urn)
        outputs, secret_outputs = _plain_props(reg.state if reg else {}, reveal_secrets)
        resources.append(
            RegisteredResource(
                urn=urn,
                type=req["type"],
                name=req["name"],
                custom=req["custom"],
                id=(reg.id or None) if reg else None,
                parent=req["parent"] if req["parent"] != record.get("stack_urn") else None,
                provider=req["provider"],
                inputs=inputs,
                secret_inputs=secret_inputs,
                outputs=outputs,
                secret_outputs=secret_outputs,
                options=req["options"],
            )
        )
    stack_outputs, secret_stack_outputs = _plain_props(
        record.get("stack_outputs", {}), reveal_secrets
    )
    return ProgramRun(
        resources=tuple(resources),
        invokes=tuple(
            {"token": i["token"], "args": _plain(i["args"], reveal_secrets)[0]}
            for i in record["invokes"]
        ),
        outputs=stack_outputs,
        secret_outputs=secret_stack_outputs,
        stack_urn=record.get("stack_urn", ""),
    )
