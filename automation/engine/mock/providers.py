"""What the provider plugins would answer the mock engine: ids, addresses, autonames and
invokes, deterministic and buying nothing (``MockProviders``). The simulated cloud that
also keeps what was bought (``automation.simulators.cloud``) builds on it."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from automation.engine.mock.model import CloudFailure, Step

if TYPE_CHECKING:
    from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

_IMAGE_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # when the simulated clouds' first images date
_ACCOUNT = "000000000000"  # the simulated AWS account
_AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
_GCP_API = "https://www.googleapis.com/compute/v1/"


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def _uuid_from(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw[:16])


def _unwrap(value: Any) -> tuple[Any, bool]:
    """A value without its RPC secret wrapper, and whether it had one."""
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(value):
        return rpc.unwrap_rpc_secret(value), True
    return value, False


def _rewrap(value: Any, secret: bool) -> Any:
    from pulumi.runtime import rpc

    return rpc.wrap_rpc_secret(value) if secret else value


def _text(value: Any) -> str | None:
    """A known string input (secret or not), else None."""
    plain, _ = _unwrap(value)
    return plain if isinstance(plain, str) and plain else None


def _step_of(args: Any) -> Step | None:
    step = getattr(args, "step", None)
    return step if isinstance(step, Step) else None


class MockProviders:
    """A deterministic cloud: ids and addresses derive from the resource type and name.

    It answers like the real providers: AWS ids (``vpc-…``, ``i-…``) with their ARNs, GCP
    resource paths as ids with ``selfLink``/``name``/``project``, Azure ARM ids built from the
    subscription, resource group and name with ``name``, Kubernetes ``namespace/name``. The
    provider resources' configuration (project, region, subscription) is read from the
    explicit providers the program registers. Names the program leaves out are autonamed the
    way each provider does it (``check``).

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
        self._ips_taken: set[str] = set()  # the values of _ips, kept so a lookup is O(1)
        self._ip_owner: dict[str, str] = {}  # Azure public IP name -> VM resource name
        # Published images per lookup key, oldest first (``publish_image``); a key nobody
        # published to answers with one deterministic image. Pass another cloud's ``images``
        # to see what it published (a preview sees the images an ``up`` would).
        self.images: dict[str, list[dict[str, str]]] = images if images is not None else {}
        self._azure_exact: dict[str, str] = {}  # Azure VM name + key -> version built from
        # What later answers need from earlier ones: provider configuration by (type, name),
        # subnets by id (AWS) or path (GCP), private addresses handed out per subnet.
        self._providers: dict[tuple[str, str], dict[str, Any]] = {}
        self._subnets: dict[str, dict[str, str]] = {}
        self._private: dict[str, dict[str, str]] = {}
        self._private_taken: dict[str, set[str]] = {}  # the values of _private per subnet

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

    # -- addresses ------------------------------------------------------------------------
    #
    # Unique within one cloud object; collisions are probed deterministically.

    def public_ip(self, key: str) -> str:
        with self._lock:
            if key in self._ips:
                return self._ips[key]
            size = self._PUBLIC_NET.num_addresses
            n = int.from_bytes(_digest("ip", key)[:4], "big") % size
            if len(self._ips_taken) != len(self._ips):  # _ips restored from saved state
                self._ips_taken = set(self._ips.values())
            while True:
                ip = str(self._PUBLIC_NET.network_address + n)
                if ip not in self._ips_taken and not ip.endswith((".0", ".255")):
                    self._ips[key] = ip
                    self._ips_taken.add(ip)
                    return ip
                n = (n + 1) % size

    def private_ip(self, subnet: str, cidr: str | None, key: str, reserved: int = 4) -> str:
        """An address inside the subnet's range for ``key``, skipping the ``reserved`` first
        ones (AWS keeps 4, GCP 2) and the last."""
        try:
            net = ipaddress.ip_network(cidr or "10.0.1.0/24", strict=False)
        except ValueError:
            net = ipaddress.ip_network("10.0.1.0/24")
        usable = max(net.num_addresses - reserved - 1, 1)
        with self._lock:
            given = self._private.setdefault(subnet, {})
            if key in given:
                return given[key]
            n = int.from_bytes(_digest("private", subnet, key)[:4], "big") % usable
            taken = self._private_taken.setdefault(subnet, set())
            if len(taken) != len(given):
                taken.update(given.values())
            for _ in range(usable):
                ip = str(net.network_address + reserved + n)
                if ip not in taken:
                    break
                n = (n + 1) % usable
            given[key] = ip
            taken.add(ip)
            return ip

    # -- what a provider's Check fills in ---------------------------------------------------

    def check(self, args: MockResourceArgs) -> dict[str, Any]:
        """The input properties the provider adds before the resource exists: an autoname
        where the program gave none (pulumi-terraform-bridge: ``<name>-<7 hex>``;
        azure-native: ``<name><8 hex>``; Kubernetes: ``metadata.name`` ``<name>-<8 hex>``),
        a new one for a replacement. Also remembers provider configuration."""
        from automation.engine.mock.force_new import rules_for

        t = args.typ
        if t.startswith("pulumi:providers:"):
            with self._lock:
                self._providers[(t, args.name)] = dict(args.inputs)
            return {}
        step = _step_of(args)
        seed = (step.old_id or "") if step is not None and step.op == "replace" else ""
        hexes = _digest("autoname", t, args.name, seed).hex()
        prop = rules_for(t).name_property
        if prop is None and t.startswith("gcp:"):
            prop = "name"
        if prop is not None and prop not in args.inputs:
            sep = "" if t.startswith("azure-native:") else "-"
            width = 8 if t.startswith("azure-native:") else 7
            return {prop: f"{args.name}{sep}{hexes[:width]}"}
        if t.startswith("kubernetes:"):
            metadata, secret = _unwrap(args.inputs.get("metadata") or {})
            if isinstance(metadata, Mapping) and not metadata.get("name"):
                named = {**metadata, "name": f"{args.name}-{hexes[:8]}"}
                return {"metadata": _rewrap(named, secret)}
        return {}

    def configure_provider(self, package: str, config: Mapping[str, Any]) -> str:
        """Remember a provider's configuration as a program's provider resource would give
        it (a stand-in plugin's ``configure``); the provider reference that names it."""
        with self._lock:
            self._providers[(f"pulumi:providers:{package}", "standin")] = dict(config)
        return f"urn:pulumi:standin::standin::pulumi:providers:{package}::standin::standin"

    def _provider_config(self, ref: str | None) -> dict[str, Any]:
        # A provider reference is "<urn>::<id>"; the URN ends in "<type>::<name>".
        parts = (ref or "").split("::")
        if len(parts) < 5:
            return {}
        with self._lock:
            return dict(self._providers.get((parts[-3].split("$")[-1], parts[-2]), {}))

    # -- ids and outputs ------------------------------------------------------------------

    def resource_id(self, type_: str, name: str, replaces: str | None = None) -> str:
        """An id for types whose ids the cloud makes up (not derived from a name); a
        replacement (``replaces``: the id it replaces) gets another one."""
        h = _digest(type_, name, *([replaces] if replaces else [])).hex()
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
        if type_.startswith("pulumi:providers:"):
            return str(_uuid_from(bytes.fromhex(h)))
        return f"{name}-{h[:8]}"

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if self._fail is not None and self._fail(args.typ, args.name):
            raise CloudFailure(f"simulated failure creating {args.typ} {args.name}")
        if not args.custom and not args.resource_id:
            return None, {}
        step = _step_of(args)
        replaces = step.old_id if step is not None and step.op == "replace" else None
        known = step.old_id if step is not None and step.op in ("same", "update") else None
        inputs = {**args.inputs, **self.check(args)}
        t = args.typ
        if t.startswith("pulumi:providers:"):
            return known or self.resource_id(t, args.name, replaces), {}
        if t.startswith("aws:"):
            rid = known or args.resource_id or self.resource_id(t, args.name, replaces)
            return rid, self._aws(t, args, inputs, rid, replaces)
        extra: dict[str, Any]
        if t.startswith("gcp:"):
            rid, extra = self._gcp(t, args, inputs, replaces)
            return known or rid, extra
        if t.startswith("azure-native:"):
            rid, extra = self._azure(t, args, inputs)
            return known or rid, extra
        if t.startswith("kubernetes:"):
            # pulumi-kubernetes ids: "<namespace>/<name>", or the name if cluster-scoped.
            metadata, _ = _unwrap(inputs.get("metadata") or {})
            metadata = metadata if isinstance(metadata, Mapping) else {}
            name = _text(metadata.get("name")) or args.name
            namespace = _text(metadata.get("namespace"))
            rid = args.resource_id or (f"{namespace}/{name}" if namespace else name)
            return known or rid, {}
        rid = known or self.resource_id(t, args.name, replaces)
        extra = {}
        if t in (
            "random:index/randomString:RandomString",
            "random:index/randomPassword:RandomPassword",
        ):
            length = int(inputs.get("length", 16))
            alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
            seed = _digest(t, args.name, json.dumps(inputs.get("keepers", {}), sort_keys=True))
            out = "".join(alphabet[b % len(alphabet)] for b in (seed * 4)[:length])
            extra = {"result": out}
        return rid, extra

    def _aws(self, t: str, args: MockResourceArgs, inputs: dict[str, Any], rid: str,
             replaces: str | None) -> dict[str, Any]:
        region = _text(self._provider_config(args.provider).get("region")) or "us-east-1"
        kind = {
            "aws:ec2/vpc:Vpc": "vpc",
            "aws:ec2/subnet:Subnet": "subnet",
            "aws:ec2/internetGateway:InternetGateway": "internet-gateway",
            "aws:ec2/routeTable:RouteTable": "route-table",
            "aws:ec2/securityGroup:SecurityGroup": "security-group",
            "aws:ec2/instance:Instance": "instance",
        }.get(t)
        extra: dict[str, Any] = {}
        if kind is not None:
            extra = {"arn": f"arn:aws:ec2:{region}:{_ACCOUNT}:{kind}/{rid}", "ownerId": _ACCOUNT}
        if t == "aws:ec2/vpc:Vpc":
            h = _digest(rid).hex()
            extra.update({
                "defaultSecurityGroupId": f"sg-{h[:17]}",
                "defaultRouteTableId": f"rtb-{h[17:34]}",
                "mainRouteTableId": f"rtb-{h[17:34]}",
                "defaultNetworkAclId": f"acl-{h[34:51]}",
                "dhcpOptionsId": f"dopt-{h[51:64]}",
                "instanceTenancy": inputs.get("instanceTenancy") or "default",
            })
        elif t == "aws:ec2/subnet:Subnet":
            zone = _text(inputs.get("availabilityZone")) or f"{region}a"
            extra["availabilityZone"] = zone
            with self._lock:
                self._subnets[rid] = {"cidr": _text(inputs.get("cidrBlock")) or "",
                                      "zone": zone}
        elif t == "aws:ec2/instance:Instance":
            subnet_id = _text(inputs.get("subnetId")) or ""
            with self._lock:
                subnet = dict(self._subnets.get(subnet_id, {}))
            key = args.name if replaces is None else f"{args.name}\x1f{rid}"
            public = self.public_ip(key)
            private = self.private_ip(subnet_id, subnet.get("cidr"), key, reserved=4)
            domain = "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"
            public_domain = ("compute-1.amazonaws.com" if region == "us-east-1"
                             else f"{region}.compute.amazonaws.com")
            extra.update({
                "publicIp": public,
                "privateIp": private,
                "publicDns": f"ec2-{public.replace('.', '-')}.{public_domain}",
                "privateDns": f"ip-{private.replace('.', '-')}.{domain}",
                "availabilityZone": subnet.get("zone") or f"{region}a",
                "instanceState": "running",
                "primaryNetworkInterfaceId": f"eni-{_digest('eni', rid).hex()[:17]}",
                "tenancy": inputs.get("tenancy") or "default",
            })
        return extra

    def _gcp(self, t: str, args: MockResourceArgs, inputs: dict[str, Any],
             replaces: str | None) -> tuple[str, dict[str, Any]]:
        config = self._provider_config(args.provider)
        project = _text(inputs.get("project")) or _text(config.get("project")) or "sim-project"
        region = _text(inputs.get("region")) or _text(config.get("region")) or "us-central1"
        name = _text(inputs.get("name")) or args.name
        kind = t.rsplit(":", 1)[-1]
        if kind in ("Network", "Firewall", "Route", "Image"):
            path = f"projects/{project}/global/{kind[0].lower() + kind[1:]}s/{name}"
        elif kind in ("Subnetwork", "Router", "Address"):
            path = f"projects/{project}/regions/{region}/{kind.lower()}s/{name}"
        elif kind == "Instance":
            zone = _text(inputs.get("zone")) or _text(config.get("zone")) or f"{region}-a"
            path = f"projects/{project}/zones/{zone}/instances/{name}"
        else:
            path = f"projects/{project}/{kind[0].lower() + kind[1:]}s/{name}"
        rid = args.resource_id or path
        numeric = str(int(_digest(rid, replaces or "").hex()[:12], 16))
        created = "2026-01-01T00:00:00.000-00:00"
        extra: dict[str, Any] = {"name": name, "project": project, "selfLink": _GCP_API + path,
                                 "creationTimestamp": created}
        if kind == "Network":
            extra.update({"numericId": numeric, "routingMode": inputs.get("routingMode")
                          or "REGIONAL"})
        elif kind == "Subnetwork":
            cidr = _text(inputs.get("ipCidrRange")) or "10.0.0.0/24"
            network = _gcp_path(_text(inputs.get("network")) or "")
            with self._lock:
                self._subnets[path] = {"cidr": cidr, "network": network}
            extra.update({
                "region": region,
                "gatewayAddress": str(ipaddress.ip_network(cidr, strict=False)[1]),
                "fingerprint": _digest("fp", path).hex()[:16],
                "stackType": inputs.get("stackType") or "IPV4_ONLY",
                "purpose": inputs.get("purpose") or "PRIVATE",
            })
        elif kind == "Instance":
            extra.update(self._gcp_instance(args, inputs, path, project, numeric, replaces))
        return rid, extra

    def _gcp_instance(self, args: MockResourceArgs, inputs: dict[str, Any], path: str,
                      project: str, numeric: str, replaces: str | None) -> dict[str, Any]:
        key = args.name if replaces is None else f"{args.name}\x1f{numeric}"
        nics = []
        for i, raw in enumerate(inputs.get("networkInterfaces") or []):
            nic = dict(raw) if isinstance(raw, Mapping) else {}
            subnet = _gcp_path(_text(nic.get("subnetwork")) or "")
            with self._lock:
                known = dict(self._subnets.get(subnet, {}))
            network = _gcp_path(_text(nic.get("network")) or "") or known.get("network", "")
            nic.update({
                "name": f"nic{i}",
                "networkIp": self.private_ip(subnet, known.get("cidr"), key, reserved=2),
                "stackType": nic.get("stackType") or "IPV4_ONLY",
                "subnetworkProject": project,
            })
            if network:
                nic["network"] = _GCP_API + network
            if subnet:
                nic["subnetwork"] = _GCP_API + subnet
            if i == 0:
                nic["accessConfigs"] = [
                    {**ac, "natIp": self.public_ip(key), "networkTier": "PREMIUM"}
                    for ac in nic.get("accessConfigs") or []
                ]
            nics.append(nic)
        zone_path = path.rsplit("/instances/", 1)[0]
        boot = dict(inputs.get("bootDisk") or {})
        boot.update({"source": f"{_GCP_API}{zone_path}/disks/{inputs.get('name') or args.name}",
                     "deviceName": "persistent-disk-0", "mode": "READ_WRITE"})
        return {
            "networkInterfaces": nics,
            "instanceId": numeric,
            "currentStatus": "RUNNING",
            "cpuPlatform": "Intel Cascade Lake",
            "bootDisk": boot,
            "zone": zone_path.rsplit("/", 1)[-1],
        }

    def _azure(self, t: str, args: MockResourceArgs,
               inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        from automation.engine.mock.force_new import rules_for

        config = self._provider_config(args.provider)
        sub = _text(config.get("subscriptionId")) or _AZURE_SUBSCRIPTION
        prop = rules_for(t).name_property
        name = (_text(inputs.get(prop)) if prop else None) or args.name
        group = _text(inputs.get("resourceGroupName")) or ""
        module, kind = t.split(":")[1:]
        namespace = {"network": "Microsoft.Network", "compute": "Microsoft.Compute",
                     "resources": "Microsoft.Resources"}.get(module, f"Microsoft.{module}")
        collection = {"VirtualMachine": "virtualMachines", "PublicIPAddress": "publicIPAddresses",
                      }.get(kind, kind[0].lower() + kind[1:] + "s")
        if kind == "ResourceGroup":
            rid = f"/subscriptions/{sub}/resourceGroups/{name}"
        elif kind == "Subnet":
            vnet = _text(inputs.get("virtualNetworkName")) or ""
            rid = (f"/subscriptions/{sub}/resourceGroups/{group}/providers/Microsoft.Network/"
                   f"virtualNetworks/{vnet}/subnets/{name}")
        else:
            rid = (f"/subscriptions/{sub}/resourceGroups/{group}/providers/{namespace}/"
                   f"{collection}/{name}")
        rid = args.resource_id or rid
        extra: dict[str, Any] = {
            "name": name,
            "type": f"{namespace}/{collection}",
            "provisioningState": "Succeeded",
            "azureApiVersion": "2024-01-01",
        }
        if kind != "ResourceGroup":
            extra["etag"] = f'W/"{_uuid_from(_digest("etag", rid))}"'
        if kind == "VirtualNetwork":
            extra["resourceGuid"] = str(_uuid_from(_digest("guid", rid)))
        elif kind == "VirtualMachine":
            extra["vmId"] = str(_uuid_from(_digest(t, args.name)))
            storage = self._azure_storage(args.name, inputs.get("storageProfile"))
            if storage is not None:
                extra["storageProfile"] = storage
            # Azure never returns the admin password or the custom data.
            profile, secret = _unwrap(inputs.get("osProfile"))
            if isinstance(profile, Mapping):
                kept = {k: v for k, v in profile.items()
                        if k not in ("adminPassword", "customData")}
                extra["osProfile"] = _rewrap(kept, secret)
            # The VM declares its public IP; answer lookups of it with the VM's address.
            for ip_name in _azure_public_ip_names(inputs):
                with self._lock:
                    self._ip_owner[ip_name] = args.name
        elif kind == "PublicIPAddress":
            extra["ipAddress"] = self.public_ip(args.name)
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


def _gcp_path(link: str) -> str:
    """A GCP resource path (``projects/…``) from a selfLink or a path."""
    return link[len(_GCP_API):] if link.startswith(_GCP_API) else link


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


