"""Settling the creates a killed ``pulumi up`` left in flight.

A run killed mid-create leaves ``pending_operations`` of type ``creating`` in the state: the
engine asked the provider to create something and never heard back, so the resource may or
may not exist. Dropping the record blindly could leave a VM nobody owns (and the reconciler
would buy it again); keeping it blocks the stack. Each such create is looked up through the
provider by what identifies it:

- **state only** (component resources, explicit providers, ``random:`` values): they exist
  only in the state; the record is cleared and the next update makes them again;
- **Kubernetes objects**: kind (the type token) and ``namespace/name`` (the recorded
  inputs) are the provider's id: ``read_program`` reads them (a resource ``get``, the
  provider's Read); the engine's ``resource '<id>' does not exist`` confirms one absent;
- **VMs**: by their ``anycloud.sh/attempt`` tag (AWS ``ec2.getInstances``), or by the name
  derived from the attempt checked against the attempt label/tag (GCP
  ``compute.getInstance``, Azure ``compute.getVirtualMachine``): the provider's own invokes
  in ``cloud_lookup_program``;
- **a pool's network** (``components/network``), each by what the cloud identifies it by:
  on AWS the ownership tags anycloud put on it (``ec2.getVpcs``, ``getSubnets``,
  ``getRouteTables``, ``getSecurityGroups``, ``getInternetGateway``) or, for a route-table
  association, the subnet it joins (``ec2.getRouteTable``); on Azure its name in its
  resource group (``getResourceGroup``, ``getVirtualNetwork``, ``getSubnet``,
  ``getNetworkSecurityGroup``), invokes in ``cloud_lookup_program`` too; on GCP, which
  has no lookup for a firewall, a resource ``get`` by the id its name and the credential's
  project make (``projects/<p>/global/firewalls/<name>``), read like a Kubernetes object;
- anything else has no lookup here and stays unresolved.

The lookup programs register nothing but a provider, so any engine can run them: the real
one on a scratch stack beside the pool's (``pulumi_driver``), the mock engine over the
simulated cloud. ``settle`` turns the answers into a ``Settlement``; only a complete one
(every create imported, confirmed absent or state-only) changes the state: ``adopted``
records each one found under the id the provider answered, with no create left in flight,
and the engine's ``stack import`` writes that in one step. Otherwise nothing changes and
the stack stops with ``PENDING_CREATES`` naming what is unresolved and why.

Why not the engine's own shortcuts: ``pulumi import`` needs the program's language plugin
(``pulumi-language-python``, which inline Automation API programs do without), and
``pulumi refresh --import-pending-creates`` (v3.274) turns the record into an ``importing``
operation that the refresh then drops, so the resource is never recorded.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from components import naming

# How each cloud spells the attempt tag (GCP labels allow no "/" or ".", Azure tag names no
# "/").
ATTEMPT_TAG_KEYS = (naming.ATTEMPT, naming.gcp_label_key(naming.ATTEMPT),
                    naming.azure_tag_key(naming.ATTEMPT))
VM_CLOUDS = {
    "aws:ec2/instance:Instance": "aws",
    "gcp:compute/instance:Instance": "gcp",
    "azure-native:compute:VirtualMachine": "azure",
}
# The provider plugin each cloud's lookup needs.
VM_PLUGINS = {"aws": "aws", "gcp": "gcp", "azure": "azure-native"}
STACK_TYPE = "pulumi:pulumi:Stack"
# AWS instance states in which a VM still exists (everything but "terminated").
AWS_LIVE_STATES = ("pending", "running", "shutting-down", "stopping", "stopped")
# A pool's network (components/network), by type: the cloud, and the AWS list invoke that
# finds it by its tags (None: another way, see _lookup_aws_network).
NETWORK_TYPES: dict[str, str] = {
    "aws:ec2/vpc:Vpc": "aws",
    "aws:ec2/subnet:Subnet": "aws",
    "aws:ec2/internetGateway:InternetGateway": "aws",
    "aws:ec2/routeTable:RouteTable": "aws",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "aws",
    "aws:ec2/securityGroup:SecurityGroup": "aws",
    "azure-native:resources:ResourceGroup": "azure",
    "azure-native:network:VirtualNetwork": "azure",
    "azure-native:network:Subnet": "azure",
    "azure-native:network:NetworkSecurityGroup": "azure",
    "gcp:compute/network:Network": "gcp",
    "gcp:compute/subnetwork:Subnetwork": "gcp",
    "gcp:compute/firewall:Firewall": "gcp",
}

# "cloud": looked up by the pool's provider's invokes; "cloud-read": read by its id
# through the pool's provider; "kubernetes": read by its id through the cluster's.
Kind = Literal["state-only", "kubernetes", "cloud", "cloud-read", "unsupported"]


@dataclass(frozen=True)
class PendingCreate:
    """One create an interrupted run left in flight, as the state records it."""

    urn: str
    type: str
    custom: bool
    inputs: Mapping[str, Any]
    parent: str | None = None
    provider: str | None = None  # the provider reference, "<urn>::<id>"
    # The ids the state holds under this URN: the create was a replacement's (a VM replaced
    # create-before-delete for a new bootstrap token), and the VM it replaces is not it.
    replaces: tuple[str, ...] = ()

    @classmethod
    def from_operation(cls, op: Mapping[str, Any]) -> PendingCreate:
        res = op.get("resource") or {}
        return cls(urn=str(res.get("urn", "?")), type=str(res.get("type", "")),
                   custom=bool(res.get("custom")), inputs=dict(res.get("inputs") or {}),
                   parent=res.get("parent") or None, provider=res.get("provider") or None)

    @classmethod
    def from_step(cls, state: Any) -> PendingCreate:
        """A create a preview plans (an engine event's ``StepEventStateMetadata``): what
        adopting a lost state looks up, as if a killed run had left it in flight."""
        return cls(urn=str(state.urn), type=str(state.type), custom=bool(state.custom),
                   inputs=dict(state.inputs or {}), parent=state.parent or None,
                   provider=state.provider or None)

    def recorded(self, resource_id: str, provider: str | None) -> dict[str, Any]:
        """This resource as the state records it once imported under ``resource_id``. An
        input the engine's events showed only as a secret (``"ciphertext": "[secret]"``:
        events never carry a secret's value) is left out rather than recorded as that
        placeholder, which the state could not decrypt; the refresh after the import reads
        what the provider reports for it."""
        out: dict[str, Any] = {"urn": self.urn, "custom": self.custom, "type": self.type,
                               "id": resource_id, "inputs": _without_redacted(self.inputs)}
        if self.parent:
            out["parent"] = self.parent
        if provider:
            out["provider"] = provider
        return out

    @property
    def name(self) -> str:
        """The logical name (the URN's last segment)."""
        return self.urn.rsplit("::", 1)[-1]

    @property
    def provider_urn(self) -> str | None:
        return self.provider.rsplit("::", 1)[0] if self.provider else None

    @property
    def kind(self) -> Kind:
        if not self.custom or self.type.startswith(("pulumi:providers:", "random:")):
            return "state-only"
        if self.type.startswith("kubernetes:"):
            return "kubernetes"
        if self.type in VM_CLOUDS:
            return "cloud"
        if self.type in NETWORK_TYPES:
            return "cloud-read" if NETWORK_TYPES[self.type] == "gcp" else "cloud"
        return "unsupported"

    @property
    def is_vm(self) -> bool:
        return self.type in VM_CLOUDS

    @property
    def cloud(self) -> str | None:
        return VM_CLOUDS.get(self.type) or NETWORK_TYPES.get(self.type)

    def gcp_id(self, project: str | None) -> str | None:
        """The GCP provider's id of a named network resource: its self link's path, from
        the name, the region (subnetworks) and the credential's project."""
        name = self.inputs.get("name")
        if not project or not isinstance(name, str):
            return None
        kind = self.type.rsplit(":", 1)[-1]
        if kind == "Subnetwork":
            region = self.inputs.get("region")
            return (f"projects/{project}/regions/{region}/subnetworks/{name}"
                    if isinstance(region, str) else None)
        return f"projects/{project}/global/{kind[0].lower()}{kind[1:]}s/{name}"

    @property
    def attempt_id(self) -> str | None:
        tags = self.inputs.get("labels") if self.cloud == "gcp" else self.inputs.get("tags")
        if not isinstance(tags, Mapping):
            return None
        return next((str(tags[k]) for k in ATTEMPT_TAG_KEYS if k in tags), None)

    @property
    def kube_id(self) -> str | None:
        """The provider's id of a Kubernetes object: ``namespace/name``, or ``name`` when
        cluster-scoped (pulumi-kubernetes)."""
        metadata = self.inputs.get("metadata")
        if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
            return None
        namespace = metadata.get("namespace")
        name = metadata["name"]
        return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name


def gcp_project(config: Any) -> str | None:
    """The GCP project of a node pool's credential (a GCP resource's id names it)."""
    project = getattr(getattr(config, "credential", None), "project", None)
    return project if isinstance(project, str) else None


def pending_creates_in(deployment: Mapping[str, Any]) -> list[PendingCreate]:
    """The creates an interrupted run left in flight, in URN order."""
    ops = [op for op in deployment.get("pending_operations") or []
           if op.get("type") == "creating"]
    return sorted((PendingCreate.from_operation(op) for op in ops), key=lambda p: p.urn)


# --------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Answer:
    """What the provider said about one pending create."""

    state: Literal["found", "absent", "unknown"]
    id: str | None = None  # the provider's id, when found
    detail: str = ""  # why it is unknown, in the provider's words

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Answer:
        state = raw.get("state")
        if state not in ("found", "absent", "unknown"):
            return cls("unknown", detail=f"the lookup answered {raw!r}")
        return cls(state, raw.get("id") or None, str(raw.get("detail") or ""))


# The only error shapes that mean "this does not exist", per provider. Anything else (an
# Azure AD "was not found in the directory" is a credential problem) leaves the answer unknown.
# - GCP: the Go client's googleapi.Error prints "googleapi: Error <code>: <message>, <reason>"
#   (google.golang.org/api/googleapi); instances.get answers 404 for a missing instance.
# - Azure: ARM answers 404 with error code ResourceNotFound, or ResourceGroupNotFound when the
#   group is gone too (learn.microsoft.com/azure/azure-resource-manager/troubleshooting/
#   error-not-found); azcore prints it as "ERROR CODE: ResourceNotFound", the REST body as
#   "code": "ResourceNotFound", the Python SDK as "(ResourceNotFound) ...".
# - AWS: DescribeInstances (and the other Describe* calls behind the list invokes) answer an
#   empty list, never an error; the single-result data sources (aws_internet_gateway,
#   aws_route_table) fail with the provider's "no matching <what> found"
#   (internal/tfresource.SingularDataSourceFindError in terraform-provider-aws).
_ABSENT = {
    "gcp": re.compile(r"googleapi: Error 404\b"),
    "azure": re.compile(r"\b(ResourceNotFound|ResourceGroupNotFound)\b"),
    "aws": re.compile(r"\bno matching EC2 (Internet Gateway|Route Table) found\b"),
}


def _not_found(cloud: str, message: str) -> bool:
    """Whether ``cloud``'s error says the resource does not exist (see ``_ABSENT``)."""
    shape = _ABSENT.get(cloud)
    return shape is not None and shape.search(message) is not None


def _lookup_aws(p: PendingCreate, attempt: str, invoke: Any) -> Answer:
    import pulumi_aws as aws

    found = aws.ec2.get_instances(instance_tags={ATTEMPT_TAG_KEYS[0]: attempt},
                                  instance_state_names=list(AWS_LIVE_STATES), opts=invoke)
    ids = sorted(i for i in found.ids or [] if i not in p.replaces)
    if len(ids) > 1:
        return Answer("unknown", detail=f"{len(ids)} instances carry {ATTEMPT_TAG_KEYS[0]}="
                                        f"{attempt}: {', '.join(ids)}")
    return Answer("found", ids[0]) if ids else Answer("absent")


def _lookup_gcp(p: PendingCreate, attempt: str, invoke: Any) -> Answer:
    import pulumi_gcp as gcp

    name, zone = p.inputs.get("name"), p.inputs.get("zone")
    if not isinstance(name, str) or not isinstance(zone, str):
        return Answer("unknown", detail="the recorded create names no instance name and zone")
    vm = gcp.compute.get_instance(name=name, zone=zone, opts=invoke)
    if vm.id in p.replaces:  # the name is the attempt's: only the VM being replaced has it
        return Answer("absent")
    labels = dict(vm.labels or {})
    if attempt not in {labels.get(k) for k in ATTEMPT_TAG_KEYS}:
        return Answer("unknown", detail=f"instance {name} in {zone} exists but is not labelled "
                                        f"with attempt {attempt} (labels: {labels})")
    return Answer("found", vm.id)


def _lookup_azure(p: PendingCreate, attempt: str, invoke: Any) -> Answer:
    import pulumi_azure_native as azure

    group, name = p.inputs.get("resourceGroupName"), p.inputs.get("vmName")
    if not isinstance(group, str) or not isinstance(name, str):
        return Answer("unknown", detail="the recorded create names no resource group and VM name")
    vm = azure.compute.get_virtual_machine(resource_group_name=group, vm_name=name, opts=invoke)
    if vm.id in p.replaces:  # the name is the attempt's: only the VM being replaced has it
        return Answer("absent")
    tags = dict(vm.tags or {})
    if attempt not in {tags.get(k) for k in ATTEMPT_TAG_KEYS}:
        return Answer("unknown", detail=f"VM {name} in {group} exists but is not tagged with "
                                        f"attempt {attempt} (tags: {tags})")
    return Answer("found", vm.id)


_LOOKUPS: dict[str, Callable[[PendingCreate, str, Any], Answer]] = {
    "aws": _lookup_aws, "gcp": _lookup_gcp, "azure": _lookup_azure}


def _one(ids: Sequence[str], what: str) -> Answer:
    """Found when exactly one matches; several would make any import a guess."""
    ids = sorted(ids)
    if len(ids) > 1:
        return Answer("unknown", detail=f"{len(ids)} {what} match: {', '.join(ids)}")
    return Answer("found", ids[0]) if ids else Answer("absent")


def _lookup_aws_network(p: PendingCreate, invoke: Any) -> Answer:
    """An AWS network resource by the tags anycloud put on it (the pool's ownership tags,
    and a Name on the VPC), or a route-table association by the subnet it joins."""
    import pulumi_aws as aws

    kind = p.type.rsplit(":", 1)[-1]
    if kind == "RouteTableAssociation":
        subnet, table = p.inputs.get("subnetId"), p.inputs.get("routeTableId")
        if not isinstance(subnet, str) or not isinstance(table, str):
            return Answer("unknown", detail="the recorded create names no subnet and table")
        found = aws.ec2.get_route_table(subnet_id=subnet, opts=invoke)
        joins = [a.route_table_association_id for a in found.associations or []
                 if a.subnet_id == subnet and a.route_table_id == table]
        return _one(joins, f"associations of {table} with {subnet}")
    tags = p.inputs.get("tags")
    if not isinstance(tags, Mapping) or not tags:
        return Answer("unknown", detail=f"the recorded {kind} carries no tags to look up")
    wanted = {str(k): str(v) for k, v in tags.items()}
    if kind == "InternetGateway":
        return Answer("found", aws.ec2.get_internet_gateway(tags=wanted, opts=invoke).id)
    listing = getattr(aws.ec2, {"Vpc": "get_vpcs", "Subnet": "get_subnets",
                                "RouteTable": "get_route_tables",
                                "SecurityGroup": "get_security_groups"}[kind])
    return _one(listing(tags=wanted, opts=invoke).ids or [], f"{kind}s tagged {wanted}")


def _lookup_azure_network(p: PendingCreate, invoke: Any) -> Answer:
    """An Azure network resource by its name in its resource group (ARM names are unique
    there: a second create of the name is an update of the first)."""
    import pulumi_azure_native as azure

    i = p.inputs
    kind = p.type.rsplit(":", 1)[-1]
    names = {"ResourceGroup": ("resourceGroupName",),
             "VirtualNetwork": ("resourceGroupName", "virtualNetworkName"),
             "Subnet": ("resourceGroupName", "virtualNetworkName", "subnetName"),
             "NetworkSecurityGroup": ("resourceGroupName", "networkSecurityGroupName")}[kind]
    if not all(isinstance(i.get(n), str) for n in names):
        return Answer("unknown", detail=f"the recorded {kind} names no {', '.join(names)}")
    if kind == "ResourceGroup":
        found: Any = azure.resources.get_resource_group(
            resource_group_name=i["resourceGroupName"], opts=invoke)
    elif kind == "VirtualNetwork":
        found = azure.network.get_virtual_network(
            resource_group_name=i["resourceGroupName"],
            virtual_network_name=i["virtualNetworkName"], opts=invoke)
    elif kind == "Subnet":
        found = azure.network.get_subnet(
            resource_group_name=i["resourceGroupName"],
            virtual_network_name=i["virtualNetworkName"], subnet_name=i["subnetName"],
            opts=invoke)
    else:
        found = azure.network.get_network_security_group(
            resource_group_name=i["resourceGroupName"],
            network_security_group_name=i["networkSecurityGroupName"], opts=invoke)
    return Answer("found", found.id)


def lookup_cloud(p: PendingCreate, invoke: Any) -> Answer:
    """Ask the provider whether the resource of a pending create exists (``invoke``: the
    InvokeOptions carrying the pool's provider): a VM by its attempt, a network resource
    by what identifies it. Only the provider's own not-found error (``_ABSENT``) is an
    absence; any other error leaves the answer unknown."""
    if p.cloud is None:
        return Answer("unknown", detail=f"{p.type} {p.name} is not a cloud resource")
    try:
        if not p.is_vm:
            network = {"aws": _lookup_aws_network, "azure": _lookup_azure_network}.get(p.cloud)
            if network is None:
                return Answer("unknown", detail=f"{p.type} is read by its id, not looked up")
            return network(p, invoke)
        attempt = p.attempt_id
        if attempt is None:
            return Answer("unknown", detail=f"{p.type} {p.name} carries no attempt tag to "
                                            "look up")
        return _LOOKUPS[p.cloud](p, attempt, invoke)
    except Exception as exc:  # the provider's answer, whatever it is, decides
        message = str(exc).strip() or type(exc).__name__
        return (Answer("absent") if _not_found(p.cloud, message)
                else Answer("unknown", detail=message))


LOOKUPS_OUTPUT = "lookups"


def cloud_lookup_program(pending: Sequence[PendingCreate],
                         provider: Callable[[], Any]) -> Callable[[], None]:
    """A Pulumi program that looks each pending cloud resource (``kind == "cloud"``) up
    through the provider ``provider()`` registers (the pool's own: same account, region and
    credentials) and exports the answers as ``lookups`` (URN → {state, id, detail}). It
    registers nothing but that provider, so any engine can run it on a scratch stack."""

    def program() -> None:
        import pulumi

        invoke = pulumi.InvokeOptions(provider=provider())
        answers = {p.urn: lookup_cloud(p, invoke) for p in pending}
        pulumi.export(LOOKUPS_OUTPUT, {urn: {"state": a.state, "id": a.id, "detail": a.detail}
                                       for urn, a in answers.items()})

    return program


def answers_from_outputs(outputs: Mapping[str, Any],
                         pending: Sequence[PendingCreate]) -> dict[str, Answer]:
    """The lookup program's ``lookups`` output as answers; a create it did not answer for
    stays unknown."""
    raw = outputs.get(LOOKUPS_OUTPUT)
    raw = raw if isinstance(raw, Mapping) else {}
    return {p.urn: (Answer.from_json(raw[p.urn]) if isinstance(raw.get(p.urn), Mapping)
                    else Answer("unknown", detail="the lookup program gave no answer"))
            for p in pending}


def read_program(items: Sequence[tuple[PendingCreate, str]],
                 provider: Callable[[], Any]) -> Callable[[], None]:
    """A Pulumi program that reads each resource by its id through the provider
    ``provider()`` registers (a resource ``get``: the provider's Read, by the type token
    and the id: ``namespace/name`` for a Kubernetes object, the self-link path for a GCP
    one) and exports what it found as ``lookups``. A resource that does not exist fails
    the run with the engine's ``resource '<id>' does not exist`` (``absent_ids``): run it
    again without those (``read_each``)."""

    def program() -> None:
        import pulumi

        opts = pulumi.ResourceOptions(provider=provider())
        found = {p.urn: pulumi.CustomResource(p.type, f"read-{i}", {},
                                              pulumi.ResourceOptions.merge(
                                                  opts, pulumi.ResourceOptions(id=rid)))
                 for i, (p, rid) in enumerate(items)}
        pulumi.export(LOOKUPS_OUTPUT, {urn: {"state": "found", "id": r.id}
                                       for urn, r in found.items()})

    return program


def absent_ids(message: str, items: Sequence[tuple[PendingCreate, str]]) -> set[str]:
    """URNs whose id the engine's error says does not exist (a read of a missing object:
    ``resource '<id>' does not exist``)."""
    return {p.urn for p, rid in items if f"resource '{rid}' does not exist" in message}


def read_each(items: Sequence[tuple[PendingCreate, str]],
              run: Callable[[list[tuple[PendingCreate, str]]], Mapping[str, Any]],
              failure: type[Exception],
              describe: Callable[[Exception], str] = str) -> dict[str, Answer]:
    """Answers for reads by id: ``run`` runs ``read_program`` over some items and returns
    its outputs, or raises ``failure`` with the engine's message. A read the engine says
    found nothing is an absence, and the others are read again without it; a failure that
    names none of them is tried once more (a read changes nothing, and one may fail for a
    moment under load), then leaves them all unknown (the provider could not tell)."""
    answers: dict[str, Answer] = {}
    remaining = list(items)
    tried_again = False
    while remaining:
        try:
            outputs = run(remaining)
        except failure as exc:
            gone = absent_ids(str(exc), remaining)
            answers.update({urn: Answer("absent") for urn in gone})
            if not gone and not tried_again:
                tried_again = True
                continue
            if not gone:
                detail = describe(exc).strip() or type(exc).__name__
                answers.update({p.urn: Answer("unknown", detail=detail)
                                for p, _ in remaining})
                break
            remaining = [(p, rid) for p, rid in remaining if p.urn not in gone]
            continue
        answers.update(answers_from_outputs(outputs, [p for p, _ in remaining]))
        break
    return answers


# --------------------------------------------------------------------------- the decision


@dataclass
class Settlement:
    """What became of each pending create."""

    imported: list[tuple[str, str]] = field(default_factory=list)  # (URN, id)
    cleared: list[str] = field(default_factory=list)  # confirmed absent, or state only
    unresolved: list[tuple[str, str]] = field(default_factory=list)  # (URN, why)

    @property
    def complete(self) -> bool:
        return not self.unresolved

    def describe(self) -> str:
        parts = [f"imported {urn} (id {rid})" for urn, rid in self.imported]
        parts += [f"cleared {urn}" for urn in self.cleared]
        parts += [f"UNRESOLVED {urn}: {why}" for urn, why in self.unresolved]
        return "; ".join(parts) or "nothing pending"


# Each answers per URN: found (with the provider's id), absent, or unknown.
LookupCloud = Callable[[list[PendingCreate]], dict[str, Answer]]
# Reads by id; the engine tells a Kubernetes object from a cloud one by ``PendingCreate.kind``.
LookupObjects = Callable[[list[tuple[PendingCreate, str]]], dict[str, Answer]]


def settle(pending: Sequence[PendingCreate], recorded: Collection[str], *,
           lookup_cloud: LookupCloud, lookup_objects: LookupObjects,
           project: str | None = None,
           recorded_ids: Mapping[str, Sequence[str]] | None = None) -> Settlement:
    """Look each pending create up and decide: import what exists (by the id the provider
    answered), clear what is confirmed absent or lives only in the state, leave the rest
    unresolved. ``recorded``: URNs the state holds; ``recorded_ids``: their ids, by URN;
    ``project``: the pool credential's GCP project (a GCP resource's id names it).

    A VM's create under a URN the state holds is its replacement's (create-before-delete,
    for a new bootstrap token): the cloud may hold the new VM beside the recorded one, so it
    is looked up too, the recorded one excluded. Found, it is imported as the replacement
    and the recorded VM left for the next update to delete (``adopted``); clearing the record
    would leave the new VM running with nothing to delete it."""
    out = Settlement()
    objects: list[tuple[PendingCreate, str]] = []
    clouds: list[PendingCreate] = []
    for p in pending:
        replaced = tuple((recorded_ids or {}).get(p.urn) or ())
        if p.urn in recorded and p.is_vm and replaced:
            clouds.append(dataclasses.replace(p, replaces=replaced))
        elif p.urn in recorded:
            out.cleared.append(p.urn)  # the state has it already: only the record is left
        elif p.kind == "state-only":
            out.cleared.append(p.urn)
        elif p.parent is not None and p.parent not in recorded and not _is_stack(p.parent):
            # An import could not place it where the program registers it.
            out.unresolved.append((p.urn, f"its parent {p.parent} is not in the state"))
        elif p.kind == "kubernetes":
            if p.kube_id is None:
                out.unresolved.append((p.urn, "the recorded create names no metadata.name"))
            else:
                objects.append((p, p.kube_id))
        elif p.kind == "cloud-read":
            rid = p.gcp_id(project)
            if rid is None:
                out.unresolved.append((p.urn, "its id needs the credential's GCP project and "
                                              "the recorded name (and region)"))
            else:
                objects.append((p, rid))
        elif p.kind == "cloud":
            clouds.append(p)
        else:
            out.unresolved.append((p.urn, f"no lookup for {p.type}: look it up in the cloud, "
                                          "then `pulumi import` it or confirm it absent"))
    answers: dict[str, Answer] = {}
    if clouds:
        answers.update(lookup_cloud(clouds))
    if objects:
        answers.update(lookup_objects(objects))
    ids = dict((p.urn, rid) for p, rid in objects)
    for p in [*clouds, *(p for p, _ in objects)]:
        a = answers.get(p.urn) or Answer("unknown", detail="not looked up")
        if a.state == "found" and a.id:
            out.imported.append((p.urn, a.id))
        elif a.state == "absent":
            out.cleared.append(p.urn)
        elif p.is_vm:
            out.unresolved.append((p.urn, f"the {p.cloud} lookup by attempt "
                                          f"{p.attempt_id} could not tell: {a.detail}"))
        elif p.kind == "cloud":
            out.unresolved.append((p.urn, f"the {p.cloud} lookup of {p.type} could not "
                                          f"tell: {a.detail}"))
        else:
            out.unresolved.append((p.urn, f"reading {ids[p.urn]} could not tell: {a.detail}"))
    return out


_SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")


def _redacted(value: Any) -> bool:
    return (isinstance(value, Mapping) and value.get(_SECRET_SIG[0]) == _SECRET_SIG[1]
            and "plaintext" not in value and value.get("ciphertext") == "[secret]")


def _without_redacted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_redacted(v) for k, v in value.items() if not _redacted(v)}
    if isinstance(value, list | tuple):
        return [_without_redacted(v) for v in value if not _redacted(v)]
    return value


# What the engine sends for a value it cannot know yet (``pulumi.runtime.rpc.UNKNOWN``).
UNKNOWN_VALUE = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def has_unknowns(value: Any) -> bool:
    """Whether a planned create's inputs hold a value the preview could not know (an id of
    a resource that does not exist yet): it cannot be looked up by them."""
    return bool(unknown_paths(value))


def unknown_paths(value: Any, prefix: str = "") -> list[str]:
    """The property paths of ``value`` the preview could not know."""
    if isinstance(value, Mapping):
        return [q for k, v in value.items()
                for q in unknown_paths(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, list | tuple):
        return [q for i, v in enumerate(value) for q in unknown_paths(v, f"{prefix}[{i}]")]
    return [prefix] if value == UNKNOWN_VALUE else []


def _is_stack(urn: str) -> bool:
    return urn.split("::")[2].endswith(STACK_TYPE) if urn.count("::") >= 3 else False


def adopted(deployment: Mapping[str, Any], outcome: Settlement) -> dict[str, Any]:
    """The deployment with every pending create settled: each one imported becomes a
    resource of the state under the id the provider answered (its recorded inputs, parent,
    provider and options as the create had them; a refresh then reads its outputs), and no
    create is left in flight. Only for a complete settlement: the engine's own ``stack
    import`` drops every pending operation."""
    if not outcome.complete:
        raise ValueError("an incomplete settlement would drop unresolved creates")
    ids = dict(outcome.imported)
    creates = {str((op.get("resource") or {}).get("urn")): op["resource"]
               for op in deployment.get("pending_operations") or []
               if op.get("type") == "creating" and op.get("resource")}
    resources: list[dict[str, Any]] = []
    for resource in deployment.get("resources") or []:
        urn = str(resource.get("urn"))
        if urn in ids and not resource.get("delete"):
            # A replacement found beside the VM it replaces: the engine's own mid-replace
            # record -- the old one marked for deletion, the new one after it (its
            # dependents follow both) -- so the next update deletes the old VM.
            resources += [{**resource, "delete": True}, {**creates[urn], "id": ids.pop(urn)}]
        else:
            resources.append(dict(resource))
    resources += [{**creates[urn], "id": rid} for urn, rid in ids.items()]
    return {**deployment, "resources": resources, "pending_operations": []}


def with_imports(deployment: Mapping[str, Any], planned: Sequence[PendingCreate],
                 outcome: Settlement) -> dict[str, Any]:
    """The deployment with each planned create the lookups found recorded under the
    provider's id (``adopt``: a lost state rebuilt). Each one's provider reference names the
    provider's id in this state (a preview of a lost state plans the provider too, so its
    reference carried no id yet). Only for a complete settlement."""
    if not outcome.complete:
        raise ValueError("an incomplete settlement would import a guess")
    resources = list(deployment.get("resources") or [])
    provider_ids = {str(r.get("urn")): str(r.get("id")) for r in resources
                    if str(r.get("type", "")).startswith("pulumi:providers:")}
    by_urn = {p.urn: p for p in planned}
    for urn, rid in outcome.imported:
        p = by_urn[urn]
        reference = None
        if p.provider_urn is not None:
            if p.provider_urn not in provider_ids:
                raise ValueError(f"{urn}: its provider {p.provider_urn} is not in the state")
            reference = f"{p.provider_urn}::{provider_ids[p.provider_urn]}"
        resources.append(p.recorded(rid, reference))
    return {**deployment, "resources": resources}


def recorded_ids(resources: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The ids a state's resources hold, by URN (a replaced one's too, until deleted)."""
    ids: dict[str, list[str]] = {}
    for r in resources:
        if r.get("id"):
            ids.setdefault(str(r.get("urn")), []).append(str(r["id"]))
    return ids


def unread_imports(deployment: Mapping[str, Any]) -> list[str]:
    """URNs of resources ``adopted`` recorded whose outputs no refresh has read yet (the
    recovery was killed in between): custom, with an id, without outputs. Providers are
    left out: their outputs are their configuration, possibly empty."""
    return [str(r.get("urn")) for r in deployment.get("resources") or []
            if r.get("custom") and r.get("id") and not r.get("outputs")
            and not str(r.get("type", "")).startswith("pulumi:providers:")]
